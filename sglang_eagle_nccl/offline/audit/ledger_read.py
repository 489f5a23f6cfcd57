"""Reading the phase ledger of a launch: every ``ledger-<identity>.jsonl`` of its launch directories.

Rule (from :mod:`sglang_eagle_nccl.contract.ledger`): a key's count in a process is the largest
count any line of that process gives it. So the result is a function of the *set* of lines: the
order of directories and files, a copy of a file, several flushes, and a last line cut short
(which does not parse and is counted in ``unreadable``) change nothing. A process is its
identity (``launch_dir.identity_key``), never its file name or pid alone.

Files are read with :func:`~sglang_eagle_nccl.contract.files.read_regular_file` (regular files
only, no symlink followed, at most :data:`MAX_FILE_BYTES` each).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl.contract import ledger as contract
from sglang_eagle_nccl.contract.files import UnreadableFile, read_regular_file
from sglang_eagle_nccl.contract.launch_dir import LAUNCH_META, identity_key

MAX_FILE_BYTES = 64 << 20


@dataclass
class ProcessLedger:
    """One process's counts: ``counts[key] = n`` (keys from ``contract.key_of``), ``lines[key]`` the fields."""

    identity: dict[str, Any]
    role: str = "process"
    sglang_version: str | None = None
    models: dict[str, Any] = field(default_factory=dict)
    counts: dict[tuple, int] = field(default_factory=dict)
    lines: dict[tuple, dict[str, Any]] = field(default_factory=dict)

    def add(self, line: dict[str, Any]) -> None:
        key = contract.key_of(line)
        n = line.get("count")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError("count is not a whole number")
        if n > self.counts.get(key, -1):
            self.counts[key] = n
            self.lines[key] = {k: v for k, v in line.items() if k != "count"}


@dataclass
class LaunchLedger:
    processes: dict[tuple, ProcessLedger] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    files: int = 0


def parse_lines(text: str, name: str, into: LaunchLedger) -> None:
    """Fold one ledger file's lines into ``into`` (the header names the process)."""
    proc: ProcessLedger | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            if not isinstance(line, dict) or line.get("kind") not in contract.KINDS:
                raise ValueError("not a ledger line")
            if line["kind"] == "process":
                ident = line.get("identity")
                if not isinstance(ident, dict):
                    raise ValueError("a process line without identity")
                key = identity_key(ident)
                proc = into.processes.get(key)
                if proc is None:
                    proc = into.processes[key] = ProcessLedger(identity=ident)
                proc.role = str(line.get("role") or proc.role)
                proc.sglang_version = line.get("sglang_version") or proc.sglang_version
                if isinstance(line.get("models"), dict):
                    proc.models.update(line["models"])
                continue
            if proc is None:
                raise ValueError("a count before the process line")
            proc.add(line)
        except (ValueError, KeyError, TypeError) as exc:
            into.unreadable.append(f"{name}:{n}: {exc}")


def read_ledger(run_dirs: list[str]) -> LaunchLedger:
    """The ledger of the launch written into ``run_dirs`` (a launch may span several directories)."""
    out = LaunchLedger()
    for run_dir in sorted(set(run_dirs)):
        try:
            names = sorted(os.listdir(run_dir))
        except OSError as exc:
            out.unreadable.append(f"{run_dir}: {exc.strerror or exc}")
            continue
        if not out.profile and LAUNCH_META in names:
            try:
                meta = json.loads(read_regular_file(os.path.join(run_dir, LAUNCH_META), 1 << 20, follow_symlinks=False))
                if isinstance(meta, dict) and isinstance(meta.get("profile"), dict):
                    out.profile = meta["profile"]
            except (UnreadableFile, ValueError):
                pass
        for name in names:
            if not contract.is_ledger_file(name):
                continue
            path = os.path.join(run_dir, name)
            try:
                text = read_regular_file(path, MAX_FILE_BYTES, follow_symlinks=False).decode("utf-8", "replace")
            except UnreadableFile as exc:
                out.unreadable.append(f"{path}: {exc.reason}")
                continue
            out.files += 1
            parse_lines(text, path, out)
    return out
