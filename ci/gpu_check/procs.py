"""Child processes of gpu-check: each step runs in its own session, with its output in a log, and is
killed whole at its timeout (SGLang leaves schedulers behind when only its launcher dies)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def session_members(sid: int) -> list[tuple[int, str]]:
    """(pid, command) of every live process in session ``sid`` (zombies excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) != sid or fields[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            members.append((int(entry.name), cmd))
        except (OSError, ValueError, IndexError):
            continue
    return members


def reap_session(sid: int, grace: float = 10.0) -> list[str]:
    """Wait up to ``grace`` s for what the step started to exit, then kill what is left (by pid, only
    processes of the session this driver created for the step). Returns the leftovers' commands."""
    deadline = time.monotonic() + grace
    left = session_members(sid)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = session_members(sid)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return [cmd[:160] for _, cmd in left]


@dataclasses.dataclass
class Ran:
    rc: int | None  # None: killed at the timeout
    output: str
    wall_s: float
    leftovers: list[str]


def run_logged(cmd: Sequence[str], *, env: Mapping[str, str], log: Path, timeout: float,
               stdout_to: Path | None = None) -> Ran:
    """Run ``cmd`` in its own session with stdout+stderr into ``log`` (stdout into ``stdout_to``
    instead, when given: a JSON document must not be interleaved with SGLang's warnings); kill the
    whole session at the timeout (SGLang leaves schedulers behind when its launcher is killed alone)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("w"))
        out.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        out.flush()
        stdout = stack.enter_context(stdout_to.open("w")) if stdout_to else out
        proc = subprocess.Popen(list(cmd), stdout=stdout, stderr=out, env=dict(env), start_new_session=True)
        rc: int | None
        try:
            rc = proc.wait(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            rc = None
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
    wall = time.monotonic() - started
    leftovers = reap_session(proc.pid)
    return Ran(rc, log.read_text(errors="replace"), wall, leftovers)


def run_json(cmd: Sequence[str], *, env: Mapping[str, str], timeout: float,
             log: Path | None = None) -> tuple[int | None, dict[str, Any] | list[Any] | None, str]:
    """Run a command that prints one JSON document on stdout; (rc, parsed or None, stderr)."""
    try:
        proc = subprocess.run(list(cmd), env=dict(env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return None, None, f"timed out after {timeout:.0f}s: {exc}"
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("$ " + " ".join(shlex.quote(c) for c in cmd) + f"\n[rc {proc.returncode}]\n"
                       + proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    try:
        data = json.loads(proc.stdout) if proc.stdout.strip() else None
    except ValueError:
        data = None
    return proc.returncode, data, proc.stderr
