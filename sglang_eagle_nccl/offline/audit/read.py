"""Reading launch directories as hostile input: finding the launch, its processes, and NCCL's reads.

One reader for everything in a launch directory (:mod:`sglang_eagle_nccl.offline.audit.records`):
audit records and NCCL's reads logs go through the same file rules (regular files only, bounded, never
blocking) and the same table (:mod:`sglang_eagle_nccl.contract.events`). Records are grouped into
processes by their whole identity -- host, boot id, PID namespace, pid, start time -- never by pid or by
file name, so processes of two hosts (or two containers) with the same pid stay apart, in one shared
directory or in several collected ones. A reads log belongs to the process with the identity its first
line names; one that belongs to no process, or whose lines come from another pid, is listed as not judged.

Judging them is :mod:`sglang_eagle_nccl.offline.audit.judge`.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.launch_dir import FILE_PREFIX, FILE_SUFFIX, LAUNCH_META, identity_key
from sglang_eagle_nccl.offline.audit.records import (
    READS,
    CannotJudge,
    Unreadable,
    entry_kind,
    is_reads_file_name,
    is_record_file_name,
    list_entries,
    read_meta,
    read_record_file,
)

__all__ = ["CannotJudge", "Unreadable"]

IDENTITY_FIELDS = ("host", "boot_id", "pidns", "pid", "start")
Key = tuple[str, str, str, int, str]


def key_text(key: Key) -> str:
    """A process key as one string (``--json`` uses it to name processes): ``host/boot/pidns/pid/start``."""
    return "/".join(str(part) for part in key)


@dataclass
class ProcessRecords:
    """The valid audit records of one process (one identity), from one file or several."""

    identity: dict[str, Any]
    files: list[str]
    records: list[dict[str, Any]]
    bad_lines: int = 0

    @property
    def key(self) -> Key:
        return identity_key(self.identity)

    @property
    def pid(self) -> int:
        return self.identity["pid"]

    @property
    def host(self) -> str:
        return self.identity["host"]

    @property
    def machine(self) -> tuple[str, str]:
        """The host this process ran on: its name and its boot (a name alone repeats across containers)."""
        return self.identity["host"], self.identity["boot_id"]

    @property
    def file(self) -> str:
        return self.files[0] if self.files else ""

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


@dataclass
class ProcessReads:
    """What NCCL itself read in one process (its reads log, read by the same reader as the records)."""

    identity: dict[str, Any]
    file: str
    env_init: dict[str, Any] | None = None
    reads: list[dict[str, Any]] = field(default_factory=list)
    tuner_inits: list[dict[str, Any]] = field(default_factory=list)
    # (name, value, source) -> how often NCCL read it (the last "counts" line: cumulative), and the reads
    # the library had no room to record one by one.
    counts: dict[tuple[str, str | None, str], int] = field(default_factory=dict)
    unrecorded: int = 0

    @property
    def key(self) -> Key:
        return identity_key(self.identity)

    @property
    def pid(self) -> int:
        return self.identity["pid"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "process": key_text(self.key),
            "pid": self.pid,
            "host": self.identity["host"],
            "file": self.file,
            "nccl_version": (self.env_init or {}).get("nccl_version"),
            "env_plugin_abi": (self.env_init or {}).get("abi"),
            "reads": [{**r, "count": self.counts.get((r["name"], r.get("value"), r["source"]))} for r in self.reads],
            "tuner_inits": self.tuner_inits,
            "unrecorded": self.unrecorded,
        }


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
    """What one or more launch directories hold: launch.json, the valid records per process, NCCL's reads
    per process, and everything that was not judged."""

    meta: dict[str, Any]
    processes: list[ProcessRecords]
    unreadable: list[Unreadable] = field(default_factory=list)
    reads: dict[Key, ProcessReads] = field(default_factory=dict)
    run_dirs: list[str] = field(default_factory=list)
    # launch.json of every directory that had one (a multi-node launch collected per node has several)
    metas: list[dict[str, Any]] = field(default_factory=list)


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in IDENTITY_FIELDS}


def _reads_of(name: str, records: list[dict[str, Any]], bad: list[Unreadable]) -> ProcessReads | None:
    """A reads log's valid lines as one process's reads; None (and why, in ``bad``) when it names no process."""
    if not records or records[0]["event"] != "reads_log":
        bad.append(Unreadable(name, None, "no identity line first: cannot tell whose NCCL reads these are"))
        return None
    proc = ProcessReads(_identity(records[0]), name)
    for number, rec in enumerate(records[1:], start=2):
        event = rec["event"]
        if event == "reads_log" or rec.get("pid") != proc.pid:
            bad.append(Unreadable(name, None, f"record {number} ({event}) is not from pid {proc.pid}, whose reads log "
                                              "this is"))
            continue
        if event == "env_init":
            proc.env_init = rec
        elif event == "read":
            proc.reads.append({k: rec.get(k) for k in ("name", "value", "source", "environment", "disagrees")})
        elif event == "tuner_init":
            proc.tuner_inits.append({k: rec.get(k) for k in ("abi", "nranks", "nnodes", "rules", "group", "comm_id")})
        elif event == "counts":
            proc.counts = {(r["name"], r["value"], r["source"]): r["count"] for r in rec["reads"]}
            proc.unrecorded = rec["unrecorded"]
    return proc


def read_launch_records(run_dir: str | Path) -> LaunchRecords:
    """Read one launch directory as hostile input (see :mod:`sglang_eagle_nccl.offline.audit.records`).

    Files that are not regular (symlinks, FIFOs, devices), too large, or not readable are
    listed as unreadable and not opened; lines that are not valid records are listed with
    their line number and left out. Raises :class:`CannotJudge` when the directory cannot be
    listed, or when it held record files and not one valid record could be read from them.
    """
    run = Path(run_dir)
    meta, unreadable = read_meta(run)
    by_key: dict[Key, ProcessRecords] = {}
    reads: dict[Key, ProcessReads] = {}
    record_files = 0
    for entry in list_entries(run):
        if is_record_file_name(entry.name):
            record_files += 1
            records, bad = read_record_file(Path(entry.path))
            unreadable += bad
            for rec in records or []:
                ident = _identity(rec)
                proc = by_key.setdefault(identity_key(ident), ProcessRecords(ident, [], []))
                if entry.name not in proc.files:
                    proc.files.append(entry.name)
                proc.records.append(rec)
            if records is not None and bad:
                # A bad line cannot be attributed to a process: every process of the file is told.
                for proc in by_key.values():
                    if entry.name in proc.files:
                        proc.bad_lines += len(bad)
        elif is_reads_file_name(entry.name):
            records, bad = read_record_file(Path(entry.path), READS)
            unreadable += bad
            if records is None:
                continue
            got = _reads_of(entry.name, records, unreadable)
            if got is not None:
                reads[got.key] = got
    for key, got in list(reads.items()):
        proc = by_key.get(key)
        if proc is None:
            unreadable.append(Unreadable(got.file, None, "NCCL's reads log of a process that left no audit records "
                                                         "(not judged)"))
            del reads[key]
        elif got.file not in {r["file"] for r in proc.events("nccl_reads_log")}:
            # The process names the log it created; a file it never declared was put there by someone else.
            unreadable.append(Unreadable(got.file, None, f"a reads log pid {got.pid} did not declare creating "
                                                         "(not judged: not written by the plugin for that process)"))
            del reads[key]
    processes = list(by_key.values())
    if not any(p.records for p in processes) and (record_files or unreadable):
        lines = "; ".join(u.text() for u in unreadable[:5]) + ("; ..." if len(unreadable) > 5 else "")
        raise CannotJudge(
            f"no valid audit record could be read in {run} ({lines}). Fix: audit the launch directory the plugin "
            "wrote; its files may have been replaced or damaged"
        )
    return LaunchRecords(meta, processes, unreadable, reads, [str(run)],
                         [meta] if meta else [])


def merge(launches: Iterable[LaunchRecords]) -> LaunchRecords:
    """Several launch directories (one per node, however collected, or a shared one given twice) as one.

    Processes are merged by identity; a record present in two directories (a copy) counts once.
    """
    merged = LaunchRecords({}, [], [])
    by_key: dict[Key, ProcessRecords] = {}
    seen: dict[Key, set[str]] = {}
    for launch in launches:
        merged.run_dirs += launch.run_dirs
        merged.unreadable += launch.unreadable
        merged.metas += launch.metas
        if not merged.meta and launch.meta:
            merged.meta = launch.meta
        for proc in launch.processes:
            into = by_key.setdefault(proc.key, ProcessRecords(proc.identity, [], []))
            texts = seen.setdefault(proc.key, set())
            into.files += [f for f in proc.files if f not in into.files]
            into.bad_lines += proc.bad_lines
            for rec in proc.records:
                text = json.dumps(rec, sort_keys=True)
                if text not in texts:
                    texts.add(text)
                    into.records.append(rec)
        for key, got in launch.reads.items():
            merged.reads.setdefault(key, got)
    for proc in by_key.values():
        proc.records.sort(key=lambda r: r.get("ts", 0))
    merged.processes = list(by_key.values())
    return merged


def read_launches(paths: Iterable[str | Path]) -> LaunchRecords:
    """Every launch directory named (each a launch directory or an audit root: its newest launch), merged."""
    return merge(read_launch_records(find_launch_dir(p)) for p in paths)


def read_launch(run_dir: str | Path) -> tuple[dict[str, Any], list[ProcessRecords]]:
    """(launch.json, valid records per process); see :func:`read_launch_records` for the rest."""
    launch = read_launch_records(run_dir)
    return launch.meta, launch.processes
