"""Reading a launch's audit records from disk, as hostile input: finding the launch, one file per process.

Judging them is :mod:`sglang_eagle_nccl.offline.audit.judge`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.launch_dir import FILE_PREFIX, FILE_SUFFIX, LAUNCH_META
from sglang_eagle_nccl.offline.audit.records import (
    CannotJudge,
    Unreadable,
    entry_kind,
    is_record_file_name,
    list_entries,
    pid_from_file_name,
    read_meta,
    read_record_file,
)

__all__ = ["CannotJudge", "Unreadable"]

@dataclass
class ProcessRecords:
    file: str
    pid: int
    records: list[dict[str, Any]]
    bad_lines: int = 0

    @property
    def role(self) -> str:
        role = "process"
        for r in self.records:
            if r.get("event") == "process_role":
                role = r["title"].removeprefix("sglang::")
            elif r.get("event") == "scheduler_start" and role in ("process", "child"):
                role = "scheduler"
            elif r.get("event") == "process_start" and role == "process":
                role = r.get("role", role)
        return role

    def events(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("event") == name]

    def first(self, name: str) -> dict[str, Any] | None:
        found = self.events(name)
        return found[0] if found else None


def _holds_records(entries: list[Any]) -> bool:
    return any(is_record_file_name(e.name) or e.name == LAUNCH_META for e in entries)


def find_launch_dir(path: str | Path) -> Path:
    """``path`` itself if it holds process files, else its newest launch sub-directory.

    Only real directories are considered (a symlinked launch sub-directory is skipped, as it
    may lead anywhere); raises :class:`CannotJudge` when there is no launch to judge.
    """
    p = Path(path)
    try:
        st = os.stat(p)  # the path the user named may be a symlink to their audit root
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise CannotJudge(
            f"audit directory {p} cannot be used: {reason}. Fix: give the launch directory printed at start, "
            "or its audit root"
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise CannotJudge(f"audit path {p} is not a directory. Fix: give the launch directory printed at start, or its audit root")
    entries = list_entries(p)
    if _holds_records(entries):
        return p
    launches: list[tuple[float, str, Path]] = []
    for entry in entries:
        if entry_kind(entry) != "dir":
            continue
        try:
            inner = list_entries(Path(entry.path))
            mtime = entry.stat(follow_symlinks=False).st_mtime
        except (CannotJudge, OSError):
            continue
        if _holds_records(inner):
            launches.append((mtime, entry.name, Path(entry.path)))
    if not launches:
        raise CannotJudge(
            f"no audit records under {p} (expected {FILE_PREFIX}*{FILE_SUFFIX} files or launch sub-directories). "
            "Fix: give the launch directory printed at start, or the --audit-dir root it was created under"
        )
    return max(launches)[2]


@dataclass
class LaunchRecords:
    """What a launch directory holds: its launch.json, the valid records per process, and the rest."""

    meta: dict[str, Any]
    processes: list[ProcessRecords]
    unreadable: list[Unreadable] = field(default_factory=list)


def read_launch_records(run_dir: str | Path) -> LaunchRecords:
    """Read a launch directory as hostile input (see :mod:`sglang_eagle_nccl.offline.audit.records`).

    Files that are not regular (symlinks, FIFOs, devices), too large, or not readable are
    listed as unreadable and not opened; lines that are not valid records are listed with
    their line number and left out. Raises :class:`CannotJudge` when the directory cannot be
    listed, or when it held record files and not one valid record could be read from them.
    """
    run = Path(run_dir)
    meta, unreadable = read_meta(run)
    processes: list[ProcessRecords] = []
    record_files = 0
    for entry in list_entries(run):
        if not is_record_file_name(entry.name):
            continue
        record_files += 1
        records, bad = read_record_file(Path(entry.path))
        unreadable += bad
        if records is None:
            continue
        pid = records[0]["pid"] if records else pid_from_file_name(entry.name)
        processes.append(ProcessRecords(entry.name, pid if pid is not None else 0, records, len(bad)))
    if not any(p.records for p in processes) and (record_files or unreadable):
        lines = "; ".join(u.text() for u in unreadable[:5]) + ("; ..." if len(unreadable) > 5 else "")
        raise CannotJudge(
            f"no valid audit record could be read in {run} ({lines}). Fix: audit the launch directory the plugin "
            "wrote; its files may have been replaced or damaged"
        )
    return LaunchRecords(meta, processes, unreadable)


def read_launch(run_dir: str | Path) -> tuple[dict[str, Any], list[ProcessRecords]]:
    """(launch.json, valid records per process); see :func:`read_launch_records` for the rest."""
    launch = read_launch_records(run_dir)
    return launch.meta, launch.processes
