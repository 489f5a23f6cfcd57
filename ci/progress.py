#!/usr/bin/env python3
"""Run one long step of a CI script and show that it moves: what it is doing, counts, elapsed time.

    python3 ci/progress.py --what "building the plugin wheel" -- python3 -m pip wheel --no-deps . -w dist

The rule: a step that can take more than a few seconds never sits silent. Its output is read line by
line and condensed: for pip, the packages it collected, downloaded, found already installed, and the
install it is in (``pip ... --quiet`` prints nothing for minutes); for any command, its last line. A
line of progress is printed when pip's phase changes and at least every :data:`HEARTBEAT_S` seconds
(``[quickstart 41s] building the plugin wheel: ...``). On failure the command's last 40 lines are shown.

``ci/sglang_venv.py`` runs its steps through :func:`run`; bash scripts (``ci/quickstart``) through the
command line. Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

HEARTBEAT_S = 10.0

_PIP = (
    ("collected", re.compile(r"^Collecting (\S+)")),
    ("downloaded", re.compile(r"^\s*Downloading (\S+)")),
    ("already installed", re.compile(r"^Requirement already satisfied: (\S+)")),
    ("built", re.compile(r"^\s*Building wheel for (\S+)")),
)
_PIP_INSTALLING = re.compile(r"^Installing collected packages: (.*)")
_PIP_DONE = re.compile(r"^Successfully (installed|built) (.*)")


@dataclass
class Tally:
    """What a pip run has done so far, from its own lines."""

    counts: dict[str, int] = field(default_factory=dict)
    installing: int = 0
    done: str = ""
    last: str = ""

    def see(self, line: str) -> bool:
        """Count ``line``; True when pip entered a new phase (worth a progress line of its own)."""
        text = line.rstrip()
        if not text:
            return False
        self.last = text.strip()
        for name, pattern in _PIP:
            if pattern.match(text):
                new = name not in self.counts
                self.counts[name] = self.counts.get(name, 0) + 1
                return new
        m = _PIP_INSTALLING.match(text)
        if m:
            self.installing = len([p for p in m.group(1).split(",") if p.strip()])
            return True
        m = _PIP_DONE.match(text)
        if m:
            self.done = f"{m.group(1)} {len(m.group(2).split())}"
            return True
        return False

    def summary(self) -> str:
        parts = [f"{n} {name}" for name, n in self.counts.items()]
        if self.installing:
            parts.append(f"installing {self.installing} package(s)")
        if self.done:
            parts.append(self.done)
        return ", ".join(parts) if parts else (self.last[:100] or "working")


def run(cmd: Sequence[str], *, what: str, say: Callable[[str], None], env: Mapping[str, str] | None = None,
        heartbeat: float = HEARTBEAT_S) -> tuple[int, list[str], float]:
    """Run ``cmd`` and say how it progresses; returns (exit status, its output lines, seconds)."""
    started = time.monotonic()
    say(f"{what} ...")
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", env=None if env is None else dict(env))
    lines: list[str] = []
    tally = Tally()
    lock = threading.Lock()
    state = {"new_phase": False}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with lock:
                lines.append(line.rstrip("\n"))
                if tally.see(line):
                    state["new_phase"] = True

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    last_said = started
    while reader.is_alive():
        reader.join(0.5)
        now = time.monotonic()
        with lock:
            due = (state["new_phase"] and now - last_said >= 2.0) or now - last_said >= heartbeat
            if due and reader.is_alive():
                say(f"{what}: {tally.summary()} ({now - started:.0f}s)")
                state["new_phase"], last_said = False, now
    code = proc.wait()
    return code, lines, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--what", required=True, help="what the step does, in a few words")
    parser.add_argument("--prefix", default="progress", help="the tag of each line, e.g. quickstart")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    start = time.monotonic()

    def say(text: str) -> None:
        print(f"[{args.prefix} {time.monotonic() - start:3.0f}s] {text}", flush=True)

    code, lines, took = run(command, what=args.what, say=say)
    if code != 0:
        say(f"FAILED ({took:.1f}s): {args.what}")
        print("\n".join(lines[-40:]), file=sys.stderr)
        return code
    say(f"{args.what}: done in {took:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
