"""Reading launch directories as hostile input: finding the launch, its processes, and NCCL's reads.

One reader for everything in a launch directory (:mod:`sglang_eagle_nccl.offline.audit.records`):
audit records and NCCL's reads logs go through the same file rules (regular files only, bounded, never
blocking) and the same table (:mod:`sglang_eagle_nccl.contract.events`). Records are grouped into
processes by their whole identity -- host, boot id, PID namespace, pid, start time -- never by pid or by
file name, so processes of two hosts (or two containers) with the same pid stay apart, in one shared
directory or in several collected ones.

**The verdict is a function of the set of evidence** (DESIGN.md §11; docs/audit.md says the same to
users). The evidence is the set of (place, content) pairs the directories hold -- a place is a
directory and a file name -- and the reader obeys these rules, so that nothing else (the order of the
arguments, of the files, how often a thing was copied) can change a verdict:

1. *Order-independent.* Directories are read in any order and their results sorted: processes by
   identity, copies and unreadable entries by place, ``run_dirs`` by path; the one ``launch.json``
   whose profile judges the launch is chosen by content, not by position (and directories whose
   launch.json name different profiles are a ✗, whichever comes first).
2. *Idempotent.* A directory named twice (the same directory by another path too) is read once; a
   line that repeats an earlier line of its file is one record; a file copied into two directories is
   two copies of one thing, and identical copies count once.
3. *Copies are reconciled, never chosen.* The copies of one process's evidence -- its records from
   every file that holds records with its identity, and each NCCL reads log of it by file name -- are
   compared line by line (the same line: the same JSON value, types included). A copy that is a prefix
   of another (an rsync taken while the process ran) counts as the longer one. Copies that disagree
   are a *conflict*: listed with every place, each judged as it is, and the process is ⚠ at best and
   ✗ where either copy holds a ✗ -- a conflict can only make a verdict worse.
4. *Monotone.* Adding evidence of a ✗ (a record, a read, a copy) never turns a verdict into ✓:
   judging is a worst-of over everything judged, and copies only add versions to judge.
5. *Strays are not judged.* A process names the NCCL reads log it created (its ``nccl_reads_log``
   record); a reads log it did not name (``... (copy).jsonl``, a planted file) is listed as not judged
   and is never read as that process's reads, so it can neither displace nor hide the one it named.
   Record files need no such declaration: every file holding a process's records is a copy of them
   (rule 3), so a stray one can add a conflict but never remove a line that another copy holds.

Work is bounded by one :class:`~sglang_eagle_nccl.offline.audit.records.Budget` over the whole audit.
Judging them is :mod:`sglang_eagle_nccl.offline.audit.judge`.
"""

from __future__ import annotations

import gc
import json
import operator
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.launch_dir import (
    DISK_FULL_REQUIRED_SUFFIX,
    DISK_FULL_SUFFIX,
    FILE_PREFIX,
    FILE_SUFFIX,
    LAUNCH_META,
    READS_PREFIX,
    identity_key,
)
from sglang_eagle_nccl.offline.audit.records import (
    LISTED_PER_FILE,
    READS,
    RECORDS,
    Budget,
    BudgetExceeded,
    CannotJudge,
    CutLine,
    ParsedFile,
    Unreadable,
    entry_kind,
    is_reads_file_name,
    is_record_file_name,
    list_entries,
    read_file,
    read_meta,
)

__all__ = ["Budget", "BudgetExceeded", "CannotJudge", "CopyNote", "CutLine", "DiskFull", "Unreadable"]

IDENTITY_FIELDS = ("host", "boot_id", "pidns", "pid", "start")
Key = tuple[str, str, str, int, str]


def key_text(key: Key) -> str:
    """A process key as one string (``--json`` uses it to name processes): ``host/boot/pidns/pid/start``."""
    return "/".join(map(str, key))


@dataclass
class ProcessRecords:
    """The valid audit records of one process (one identity), from one file or several."""

    identity: dict[str, Any]
    files: list[str]
    records: list[dict[str, Any]]
    bad_lines: int = 0
    # Where these records are (every copy, prefixes included) and, when copies disagree, the places of
    # each other version of this process (rule 3 of the module docstring): empty when there is one.
    places: list[str] = field(default_factory=list)
    conflicts: list[list[str]] = field(default_factory=list)

    @property
    def key(self) -> Key:
        return identity_key(self.identity)

    @property
    def name(self) -> str:
        """:func:`key_text` of the process (worked out once: the judge names the process in every verdict)."""
        text = self.__dict__.get("_name")
        if text is None:
            text = self.__dict__["_name"] = key_text(self.key)
        return text

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
            event = r.get("event")
            if event == "process_role":
                role = r["title"].removeprefix("sglang::")
            elif event == "scheduler_start" and role in ("process", "child"):
                role = "scheduler"
            elif event == "process_start" and role == "process":
                role = r.get("role", role)
        return role

    def events(self, name: str) -> list[dict[str, Any]]:
        """The records of one event, in their order (a new list)."""
        # The judge asks each process for half a dozen events: its records (never changed once read) are
        # put by event once, not scanned once per question.
        by_event = self.__dict__.get("_by_event")
        if by_event is None:
            by_event = self.__dict__["_by_event"] = {}
            for r in self.records:
                by_event.setdefault(r.get("event"), []).append(r)
        return list(by_event.get(name, ()))

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
    places: list[str] = field(default_factory=list)  # every copy of this log (prefixes included)
    conflicts: list[list[str]] = field(default_factory=list)  # the places of the other versions, if any

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
            "places": self.places,
            "conflicts": self.conflicts,
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


@dataclass(frozen=True)
class CopyNote:
    """Where one process's evidence of one kind was found more than once, and how it was reconciled."""

    kind: str  # "records" or "reads"
    process: str  # key_text of the process
    versions: tuple[tuple[str, ...], ...]  # per version, the places of its identical copies
    prefixes: tuple[str, ...]  # places of copies that are a prefix of a version (counted as the longer one)

    @property
    def conflict(self) -> bool:
        return len(self.versions) > 1

    def text(self) -> str:
        if self.conflict:
            return (f"{self.kind} of process {self.process}: copies disagree -- "
                    + " / ".join(", ".join(v) for v in self.versions) + " (each judged; the worse counts)")
        extra = f"; prefix copies {', '.join(self.prefixes)}" if self.prefixes else ""
        return f"{self.kind} of process {self.process}: counted once from {', '.join(self.versions[0])}{extra}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "process": self.process, "conflict": self.conflict,
                "versions": [list(v) for v in self.versions], "prefixes": list(self.prefixes)}


@dataclass
class LaunchRecords:
    """What one or more launch directories hold: launch.json, the valid records per process, NCCL's reads
    per process, and everything that was not judged.

    ``processes`` is sorted by identity; a process whose copies disagree appears once per version (the
    versions in a fixed order), each with ``conflicts`` naming the others.
    """

    meta: dict[str, Any]
    processes: list[ProcessRecords]
    unreadable: list[Unreadable] = field(default_factory=list)
    reads: dict[Key, ProcessReads] = field(default_factory=dict)
    run_dirs: list[str] = field(default_factory=list)
    # launch.json of every directory that had one (a multi-node launch collected per node has several)
    metas: list[dict[str, Any]] = field(default_factory=list)
    cut_lines: list[CutLine] = field(default_factory=list)
    copies: list[CopyNote] = field(default_factory=list)
    # every version of each process's NCCL reads log (``reads`` holds the first of each)
    reads_versions: dict[Key, list[ProcessReads]] = field(default_factory=dict)
    evidence: list[_DirEvidence] = field(default_factory=list, repr=False)
    # record files and reads logs whose writer ran out of space, each listed in ``unreadable`` too
    disk_full: list[DiskFull] = field(default_factory=list)


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in IDENTITY_FIELDS}


_key_of = operator.itemgetter(*IDENTITY_FIELDS)


# The fields of a read and of a tuner_init kept per process: required in their rows, so every valid line has them.
_READ_FIELDS = ("name", "value", "source", "environment", "disagrees")
_TUNER_FIELDS = ("abi", "nranks", "nnodes", "rules", "group", "comm_id")
_read_values = operator.itemgetter(*_READ_FIELDS)
_tuner_values = operator.itemgetter(*_TUNER_FIELDS)


def _reads_of(name: str, records: list[dict[str, Any]], bad: list[Unreadable]) -> ProcessReads | None:
    """A reads log's valid lines as one process's reads; None (and why, in ``bad``) when it names no process."""
    if not records or records[0]["event"] != "reads_log":
        bad.append(Unreadable(name, None, "no identity line first: cannot tell whose NCCL reads these are"))
        return None
    proc = ProcessReads(_identity(records[0]), name)
    foreign = 0
    for number, rec in enumerate(records[1:], start=2):
        event = rec["event"]
        if event == "reads_log" or rec.get("pid") != proc.pid:
            foreign += 1
            if foreign <= LISTED_PER_FILE:
                bad.append(Unreadable(name, None, f"record {number} ({event}) is not from pid {proc.pid}, whose reads "
                                                  "log this is"))
            continue
        if event == "env_init":
            proc.env_init = rec
        elif event == "read":
            proc.reads.append(dict(zip(_READ_FIELDS, _read_values(rec), strict=True)))
        elif event == "tuner_init":
            proc.tuner_inits.append(dict(zip(_TUNER_FIELDS, _tuner_values(rec), strict=True)))
        elif event == "counts":
            proc.counts = {(r["name"], r["value"], r["source"]): r["count"] for r in rec["reads"]}
            proc.unrecorded = rec["unrecorded"]
    if foreign > LISTED_PER_FILE:
        bad.append(Unreadable(name, None, f"... and {foreign - LISTED_PER_FILE} more record(s) not from pid {proc.pid}"))
    return proc


@dataclass
class _Copy:
    """One place's lines of one process: the records of one identity in one file, or one reads log."""

    directory: str
    file: str
    identity: dict[str, Any]
    records: list[dict[str, Any]]
    bad_lines: int = 0
    reads: ProcessReads | None = None

    def place(self, several: bool) -> str:
        return f"{self.directory}/{self.file}" if several else self.file


@dataclass
class _DirEvidence:
    """Everything one launch directory holds, before copies are reconciled."""

    run: str
    meta: dict[str, Any]
    records: list[_Copy] = field(default_factory=list)
    reads: list[_Copy] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    cut_lines: list[CutLine] = field(default_factory=list)
    record_files: int = 0
    disk_full: list[DiskFull] = field(default_factory=list)


@dataclass(frozen=True)
class DiskFull:
    """A record file or reads log whose writer ran out of space (its marker, contract/launch_dir.py:
    mark_disk_full): the host, the file, and whether the process ran under ``audit_required`` (it stopped)."""

    host: str
    file: str
    required: bool
    directory: str = ""

    def reason(self) -> str:
        then = ("the process stopped there (audit_required: fail closed)" if self.required
                else "what it would have written after its last whole line is missing")
        return f"disk full on {self.host}: a write to this file failed (ENOSPC/EDQUOT); {then}"

    def text(self) -> str:
        place = f"{self.directory}/{self.file}" if self.directory else self.file
        return self.reason().replace(": a write to this file", f": a write to {place}", 1)


def _disk_full_of(name: str) -> tuple[str, bool] | None:
    """(the file a disk-full marker stands for, under audit_required) or None when ``name`` is no marker."""
    for suffix, required in ((DISK_FULL_REQUIRED_SUFFIX, True), (DISK_FULL_SUFFIX, False)):
        base = name.removesuffix(suffix)
        if base != name and (is_record_file_name(base) or is_reads_file_name(base)):
            return base, required
    return None


def _host_of(base: str, evidence: _DirEvidence) -> str:
    """The host of the process whose file ``base`` is: from its records, else from the file's name."""
    for copy in (*evidence.records, *evidence.reads):
        if copy.file == base:
            return str(copy.identity["host"])
    stem = base.removeprefix(FILE_PREFIX).removeprefix(READS_PREFIX).removesuffix(FILE_SUFFIX)
    return stem.split("-", 1)[0] + " (from the file name)"


def _read_dir(run: Path, budget: Budget) -> _DirEvidence:
    meta, unreadable = read_meta(run)
    evidence = _DirEvidence(str(run), meta, unreadable=list(unreadable))
    directory = str(run)
    markers: list[tuple[str, bool]] = []
    for entry in list_entries(run):
        if is_record_file_name(entry.name):
            evidence.record_files += 1
            got = read_file(entry.path, RECORDS, budget)
            if isinstance(got, Unreadable):
                evidence.unreadable.append(got)
                continue
            evidence.unreadable += got.bad
            # identity_key of a valid record (its identity fields are strings and an int): no str() needed
            keys = list(map(_key_of, got.records))
            if keys and keys.count(keys[0]) == len(keys):  # one process's file, as the writers write them
                evidence.records.append(_Copy(directory, entry.name, _identity(got.records[0]), got.records,
                                              got.bad_lines))
            else:
                by_key: dict[Key, _Copy] = {}
                for key, rec in zip(keys, got.records, strict=True):
                    copy = by_key.get(key)
                    if copy is None:
                        copy = by_key[key] = _Copy(directory, entry.name, _identity(rec), [], got.bad_lines)
                    copy.records.append(rec)
                evidence.records += by_key.values()
            _note_cut(evidence, got)
        elif is_reads_file_name(entry.name):
            got = read_file(entry.path, READS, budget)
            if isinstance(got, Unreadable):
                evidence.unreadable.append(got)
                continue
            evidence.unreadable += got.bad
            reads = _reads_of(entry.name, got.records, evidence.unreadable)
            if got.cut is not None:
                got.cut = replace(got.cut, process=key_text(reads.key) if reads is not None else None)
            _note_cut(evidence, got)
            if reads is not None:
                evidence.reads.append(_Copy(directory, entry.name, reads.identity, got.records, got.bad_lines, reads))
        elif (marker := _disk_full_of(entry.name)) is not None:
            markers.append(marker)
    for base, required in markers:
        evidence.disk_full.append(DiskFull(_host_of(base, evidence), base, required))
    return evidence


def _note_cut(evidence: _DirEvidence, got: ParsedFile) -> None:
    if got.cut is not None:
        evidence.cut_lines.append(replace(got.cut, directory=evidence.run))


def _line(record: dict[str, Any]) -> str:
    # The same line of two copies: the same JSON value, types included (true is not 1, 1.0 is not 1).
    return json.dumps(record, sort_keys=True)


def _reconcile(copies: list[_Copy], several: bool) -> tuple[list[tuple[_Copy, list[str]]], CopyNote | None, str]:
    """The versions of one process's copies (rule 3): each a copy none of the others extends, with the places
    it stands for (its identical copies and its prefixes), in a fixed order; the note when there was more
    than one place; and the process key text."""
    if len(copies) == 1:
        only = copies[0]
        return [(only, [only.place(several)])], None, key_text(identity_key(only.identity))
    lines: dict[tuple[str, ...], list[_Copy]] = {}
    for copy in copies:
        lines.setdefault(tuple(_line(r) for r in copy.records), []).append(copy)
    sequences = sorted(lines)

    def extends(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
        return len(longer) > len(shorter) and longer[:len(shorter)] == shorter

    maximal = [s for s in sequences if not any(extends(t, s) for t in sequences)]
    versions = []
    prefix_places: set[str] = set()
    for sequence in maximal:
        same = sorted(lines[sequence], key=lambda c: c.place(True))
        places = [c.place(several) for c in same]
        prefixes = sorted(c.place(several) for s in sequences if extends(sequence, s) for c in lines[s])
        prefix_places.update(prefixes)
        versions.append((same[0], places + prefixes, places))
    key = key_text(identity_key(copies[0].identity))
    note = CopyNote(copies[0].reads and "reads" or "records", key, tuple(tuple(v[2]) for v in versions),
                    tuple(sorted(prefix_places)))
    return [(v[0], v[1]) for v in versions], note, key


def _dir_key(path: str) -> tuple[int, int] | str:
    try:
        st = os.stat(path)
        return (st.st_dev, st.st_ino)
    except OSError:
        return path


def unique_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Each directory once (rule 2: the same directory named twice, or by two paths, is read once), named by
    the shortest of its paths (the first in sorted order among equals), in path order."""
    seen: dict[tuple[int, int] | str, str] = {}
    for p in paths:
        key = _dir_key(str(p))
        if key not in seen or _shorter(str(p), seen[key]):
            seen[key] = str(p)
    return [Path(p) for p in sorted(seen.values())]


def _shorter(a: str, b: str) -> bool:
    return (len(a), a) < (len(b), b)


def _dedupe_dirs(evidence: Iterable[_DirEvidence]) -> list[_DirEvidence]:
    """One entry per directory (rule 2), in path order."""
    seen: dict[tuple[int, int] | str, _DirEvidence] = {}
    for ev in evidence:
        key = _dir_key(ev.run)
        if key not in seen or _shorter(ev.run, seen[key].run):
            seen[key] = ev
    return sorted(seen.values(), key=lambda e: e.run)


def _choose_meta(metas: list[dict[str, Any]]) -> dict[str, Any]:
    # By content, never by position (rule 1): the smallest in canonical JSON.
    return min(metas, key=lambda m: json.dumps(m, sort_keys=True)) if metas else {}


def reconcile(evidence: Iterable[_DirEvidence]) -> LaunchRecords:
    """The launch that the directories' evidence shows, by the rules of the module docstring."""
    dirs = _dedupe_dirs(evidence)
    several = len(dirs) > 1
    metas = sorted((d.meta for d in dirs if d.meta), key=lambda m: json.dumps(m, sort_keys=True))
    launch = LaunchRecords(_choose_meta(metas), [], run_dirs=[d.run for d in dirs], metas=metas, evidence=dirs)
    for d in dirs:
        launch.unreadable += [replace(u, directory=d.run) if several else u for u in d.unreadable]
        launch.cut_lines += [c if several else replace(c, directory="") for c in d.cut_lines]
        launch.disk_full += [replace(f, directory=d.run) if several else f for f in d.disk_full]
    launch.disk_full = sorted(set(launch.disk_full), key=lambda f: (f.host, f.directory, f.file, f.required))
    launch.unreadable += [Unreadable(f.file, None, f.reason(), f.directory) for f in launch.disk_full]
    launch.cut_lines.sort(key=lambda c: (c.directory, c.file))
    record_copies: dict[Key, list[_Copy]] = {}
    for d in dirs:
        for copy in d.records:
            record_copies.setdefault(_key_of(copy.identity), []).append(copy)  # a valid identity: see _read_dir
    declared: dict[Key, set[str]] = {}
    for key in sorted(record_copies, key=key_text):
        if len(record_copies[key]) == 1:
            # The common case, one place: what the general way below gives for it, without its work.
            only = record_copies[key][0]
            launch.processes.append(ProcessRecords(only.identity, [only.file], list(only.records), only.bad_lines,
                                                   [only.place(several)], []))
            declared[key] = {str(r["file"]) for r in only.records if r["event"] == "nccl_reads_log"}
            continue
        versions, note, _ = _reconcile(record_copies[key], several)
        if note is not None:
            launch.copies.append(note)
        all_places = [places for _, places in versions]
        for (copy, places), others in zip(versions, [[p for j, p in enumerate(all_places) if j != i]
                                                      for i in range(len(versions))], strict=True):
            files = sorted({place.rsplit("/", 1)[-1] for place in places})
            bad = max((c.bad_lines for c in record_copies[key] if c.place(several) in places), default=0)
            launch.processes.append(ProcessRecords(copy.identity, files, list(copy.records), bad, places,
                                                   [sorted(o) for o in others]))
            declared.setdefault(key, set()).update(
                str(r["file"]) for r in copy.records if r.get("event") == "nccl_reads_log")
    reads_copies: dict[tuple[Key, str], list[_Copy]] = {}
    for d in dirs:
        for copy in d.reads:
            reads_copies.setdefault((_key_of(copy.identity), copy.file), []).append(copy)
    for key, name in sorted(reads_copies, key=lambda kn: (key_text(kn[0]), kn[1])):
        copies = reads_copies[(key, name)]
        if key not in declared:
            launch.unreadable += [Unreadable(name, None, "NCCL's reads log of a process that left no audit records "
                                                         "(not judged)", c.directory if several else "") for c in copies]
            continue
        if name not in declared[key]:
            # The process names the log it created; a file it never declared was put there by someone else.
            launch.unreadable += [Unreadable(name, None, f"a reads log pid {key[3]} did not declare creating (not "
                                                         "judged: not written by the plugin for that process)",
                                             c.directory if several else "") for c in copies]
            continue
        versions, note, _ = _reconcile(copies, several)
        if note is not None:
            launch.copies.append(note)
        all_places = [places for _, places in versions]
        for i, (copy, places) in enumerate(versions):
            assert copy.reads is not None
            got = replace(copy.reads, file=copy.file, places=places,
                          conflicts=[sorted(p) for j, p in enumerate(all_places) if j != i])
            launch.reads_versions.setdefault(key, []).append(got)
    launch.reads = {key: versions[0] for key, versions in launch.reads_versions.items()}
    launch.unreadable.sort(key=lambda u: (u.directory, u.file, -1 if u.line is None else u.line, u.reason))
    return launch


def refuse_if_nothing(launch: LaunchRecords, run: str) -> None:
    """CannotJudge when the directories held record files (or things that could not be read) and not one
    valid record: decided over the whole set, so a directory that holds only reads logs is not refused."""
    record_files = sum(d.record_files for d in launch.evidence)
    if not launch.processes and (record_files or launch.unreadable):
        lines = "; ".join(u.text() for u in launch.unreadable[:5]) + ("; ..." if len(launch.unreadable) > 5 else "")
        raise CannotJudge(
            f"no valid audit record could be read in {run} ({lines}). Fix: audit the launch directory the plugin "
            "wrote; its files may have been replaced or damaged"
        )


def read_launch_records(run_dir: str | Path, budget: Budget | None = None) -> LaunchRecords:
    """Read one launch directory as hostile input (see :mod:`sglang_eagle_nccl.offline.audit.records`).

    Files that are not regular (symlinks, FIFOs, devices), too large, or not readable are
    listed as unreadable and not opened; lines that are not valid records are listed with
    their line number and left out. Raises :class:`CannotJudge` when the directory cannot be
    listed, or when it held record files and not one valid record could be read from them.
    """
    run = Path(run_dir)
    launch = read_evidence(run, budget or Budget())
    refuse_if_nothing(launch, str(run))
    return launch


def read_evidence(run_dir: str | Path, budget: Budget) -> LaunchRecords:
    """One launch directory's evidence, judged by nothing yet (merge it with the others, then decide)."""
    return reconcile([_read_dir(Path(run_dir), budget)])


def merge(launches: Iterable[LaunchRecords]) -> LaunchRecords:
    """Several launch directories (one per node, however collected, or a shared one given twice) as one
    launch, by the rules of the module docstring (whatever the order they are given in)."""
    launches = list(launches)
    if len(launches) == 1:
        # A launch is reconciled already, and reconciling is a function of the evidence: this one again.
        return launches[0]
    return reconcile([ev for launch in launches for ev in launch.evidence])


@contextmanager
def no_cycle_collector() -> Iterator[None]:
    """Python's cycle collector paused while an audit reads and judges: its records are millions of small
    dicts and lists that hold no cycles (reference counting frees them), and every collection would walk
    them all again -- half the audit's time at 4,096 processes, and more the larger the launch. When it
    ends, what was made meanwhile is in the oldest generation (it is collected there like anything else)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if not gc.get_freeze_count():  # (objects someone else froze stay frozen)
                # What was made meanwhile mostly lives on (the launch, the report): moved to the oldest
                # generation at once (frozen, then thawed there), or the first young collection after this
                # would walk it all again.
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def read_launches(paths: Iterable[str | Path], budget: Budget | None = None) -> LaunchRecords:
    """Every launch directory named (each a launch directory or an audit root: its newest launch), merged."""
    with no_cycle_collector():
        return _read_launches(paths, budget)


def _read_launches(paths: Iterable[str | Path], budget: Budget | None = None) -> LaunchRecords:
    budget = budget or Budget()
    runs = unique_dirs(find_launch_dir(p) for p in paths)
    launch = merge(read_evidence(run, budget) for run in runs)
    refuse_if_nothing(launch, ", ".join(map(str, runs)))
    return launch


def read_launch(run_dir: str | Path) -> tuple[dict[str, Any], list[ProcessRecords]]:
    """(launch.json, valid records per process); see :func:`read_launch_records` for the rest."""
    launch = read_launch_records(run_dir)
    return launch.meta, launch.processes
