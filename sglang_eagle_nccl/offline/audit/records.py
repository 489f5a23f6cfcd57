"""Reading a launch directory as hostile input: which files are records, which records are valid.

An audit directory may be shared, copied, corrupted or tampered with, so reading it never

- opens anything but a regular file (a FIFO would block ``audit``, a device never ends, a
  symlink would read a file elsewhere): names are checked with ``lstat``, opened with
  ``O_NOFOLLOW | O_NONBLOCK`` and checked again with ``fstat`` (:mod:`sglang_eagle_nccl.contract.files`);
- reads more than :data:`MAX_RECORD_FILE_BYTES` per file;
- passes a record to judging unless it is strict JSON (no NaN or Infinity) of an event of the one
  table, :mod:`sglang_eagle_nccl.contract.events`, with the fields and types its row declares (the
  same reader serves the audit records and NCCL's reads logs, each with its table).

Everything that is not read or not valid is returned as an :class:`Unreadable` entry (file,
line, reason) for the report to show; it demotes the verdict.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract import events
from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.files import UnreadableFile, kind_of, read_regular_file
from sglang_eagle_nccl.contract.launch_dir import FILE_PREFIX, FILE_SUFFIX, LAUNCH_META, READS_PREFIX
from sglang_eagle_nccl.contract.names import is_ascii_digits

# One process writes a few hundred records of a few KiB at most (start-up and one per
# communicator); 16 MiB is far beyond any real file and still quick to read.
MAX_RECORD_FILE_BYTES = 16 * 1024 * 1024
# launch.json holds the resolved profile (per-node values included).
MAX_LAUNCH_META_BYTES = 4 * 1024 * 1024


class CannotJudge(PluginStop, FileNotFoundError):
    """``audit`` cannot give a verdict: no launch there, not a directory, nothing readable (exit 2).

    A FileNotFoundError too, so callers written for the plain "no such launch" case keep working.
    """


@dataclass(frozen=True)
class Unreadable:
    """A file, or one line of a file, that was not passed on to judging, and why."""

    file: str
    line: int | None
    reason: str

    def text(self) -> str:
        return f"{self.file}{'' if self.line is None else f':{self.line}'}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason}


# --- the table's types, as checks -----------------------------------------------------------------

Check = Callable[[Any], str | None]  # None when the value fits, else what is wrong in words


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


_BASE: dict[str, tuple[type | tuple[type, ...], str]] = {
    "str": (str, "a string"), "int": (int, "an integer"), "bool": (bool, "a boolean"), "num": ((int, float), "a number"),
}


def check_of(field_type: Any) -> Check:
    """The check for one field type of :mod:`sglang_eagle_nccl.contract.events` (see its docstring)."""
    if field_type == "any":
        return lambda value: None
    if isinstance(field_type, str):
        python_type, words = _BASE[field_type]

        def base(value: Any) -> str | None:
            # bool is an int in Python; JSON true/false must never pass as a number.
            if isinstance(value, bool) and field_type != "bool":
                return f"expected {words}, got a boolean"
            if isinstance(value, float) and value != value:  # NaN: not JSON, never a value
                return f"expected {words}, got NaN"
            return None if isinstance(value, python_type) else f"expected {words}, got {_json_type(value)}"

        return base
    kind = field_type[0]
    if kind == "opt":
        inner = check_of(field_type[1])
        return lambda value: None if value is None else inner(value)
    if kind == "list":
        item = check_of(field_type[1])

        def each(value: Any) -> str | None:
            if not isinstance(value, list):
                return f"expected a list, got {_json_type(value)}"
            for index, element in enumerate(value):
                why = item(element)
                if why:
                    return f"[{index}]: {why}"
            return None

        return each
    if kind == "map":
        item = check_of(field_type[1])

        def values(value: Any) -> str | None:
            if not isinstance(value, dict):
                return f"expected an object, got {_json_type(value)}"
            for key, element in value.items():
                why = item(element)
                if why:
                    return f"[{key!r}]: {why}"
            return None

        return values
    if kind == "obj":
        return _object_check({k: check_of(v) for k, v in field_type[1].items()},
                             {k: check_of(v) for k, v in field_type[2].items()})
    raise ValueError(f"unknown field type {field_type!r}")


def _object_check(required: Mapping[str, Check], optional: Mapping[str, Check]) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"expected an object, got {_json_type(value)}"
        for key, field_check in required.items():
            if key not in value:
                return f"missing field {key!r}"
            why = field_check(value[key])
            if why:
                return f"field {key!r}: {why}"
        for key, field_check in optional.items():
            if key in value:
                why = field_check(value[key])
                if why:
                    return f"field {key!r}: {why}"
        return None

    return check


@dataclass(frozen=True)
class Schema:
    """One table of :mod:`sglang_eagle_nccl.contract.events`, compiled into checks."""

    common: Check
    events: Mapping[str, Check]

    @classmethod
    def of(cls, common: Mapping[str, Any], table: Mapping[str, events.Event]) -> Schema:
        return cls(
            _object_check({k: check_of(v) for k, v in common.items()}, {}),
            {name: _object_check({k: check_of(v) for k, v in e.required.items()},
                                 {k: check_of(v) for k, v in e.optional.items()}) for name, e in table.items()},
        )

    def problem(self, record: Any) -> str | None:
        """Why ``record`` cannot be judged, or None when it fits its event's row.

        An event not in the table is not judged either: it was written by another version of the
        plugin (or by hand), and a record nobody can interpret must be listed, not passed over.
        """
        if not isinstance(record, dict):
            return f"not a JSON object but {_json_type(record)}"
        why = self.common(record)
        if why:
            return why
        check = self.events.get(record["event"])
        if check is None:
            return f"unknown event {record['event']!r} (not written by this version of the plugin)"
        why = check(record)
        return f"{record['event']} record: {why}" if why else None


RECORDS = Schema.of(events.COMMON, events.EVENTS)
READS = Schema.of(events.READS_COMMON, events.READS_EVENTS)
LAUNCH_META_SCHEMA = check_of(events.LAUNCH_META)
# Kept for readers of the table by name (tests, the fuzzer).
EVENT_SCHEMAS = events.EVENTS


def record_problem(record: Any) -> str | None:
    """Why an audit record cannot be judged, or None (see :meth:`Schema.problem`)."""
    return RECORDS.problem(record)


# --- files ---------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text, parse_constant=_no_constant), None
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError as exc:  # JSONDecodeError, and int() beyond Python's digit limit
        return None, f"not valid JSON ({exc})"


def parse_records(data: bytes, file: str, schema: Schema = RECORDS) -> tuple[list[dict[str, Any]], list[Unreadable]]:
    """The valid records of one file (audit records, or NCCL's reads log with ``schema=READS``), and one
    Unreadable entry per line that is not."""
    records: list[dict[str, Any]] = []
    bad: list[Unreadable] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(Unreadable(file, number, "not UTF-8 text"))
            continue
        record, why = _loads(text)
        if why is None:
            why = schema.problem(record)
        if why is None:
            records.append(record)
        else:
            bad.append(Unreadable(file, number, why))
    return records, bad


def read_meta(run: Path) -> tuple[dict[str, Any], list[Unreadable]]:
    """launch.json as an object (empty when absent), or an Unreadable entry saying why not."""
    path = run / LAUNCH_META
    try:
        os.lstat(path)
    except FileNotFoundError:
        return {}, []
    except OSError as exc:
        return {}, [Unreadable(LAUNCH_META, None, exc.strerror or str(exc))]
    try:
        data = read_regular_file(str(path), MAX_LAUNCH_META_BYTES, follow_symlinks=False)
    except UnreadableFile as exc:
        return {}, [Unreadable(LAUNCH_META, None, exc.reason)]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {}, [Unreadable(LAUNCH_META, None, "not UTF-8 text")]
    meta, why = _loads(text)
    if why is None:
        problem = LAUNCH_META_SCHEMA(meta)
        why = None if problem is None else (
            f"not a JSON object but {_json_type(meta)}" if not isinstance(meta, dict) else problem
        )
    if why is not None:
        return {}, [Unreadable(LAUNCH_META, 1, why)]
    return meta, []


def pid_from_file_name(name: str) -> int | None:
    """``proc-<host>-<pid>.jsonl`` -> pid, or None when the name does not end in plain digits."""
    stem = name[: -len(FILE_SUFFIX)] if name.endswith(FILE_SUFFIX) else name
    tail = stem.rsplit("-", 1)[-1]
    return int(tail) if is_ascii_digits(tail) and len(tail) <= 10 else None


def is_record_file_name(name: str) -> bool:
    return name.startswith(FILE_PREFIX) and name.endswith(FILE_SUFFIX)


def is_reads_file_name(name: str) -> bool:
    return name.startswith(READS_PREFIX) and name.endswith(FILE_SUFFIX)


def read_record_file(path: Path, schema: Schema = RECORDS) -> tuple[list[dict[str, Any]] | None, list[Unreadable]]:
    """(records, unreadable): records is None when the file itself was not read."""
    try:
        data = read_regular_file(str(path), MAX_RECORD_FILE_BYTES, follow_symlinks=False)
    except UnreadableFile as exc:
        return None, [Unreadable(path.name, None, exc.reason)]
    return parse_records(data, path.name, schema)


def list_entries(directory: Path) -> list[os.DirEntry[str]]:
    """The directory's entries, without following anything; CannotJudge when it cannot be listed."""
    try:
        with os.scandir(directory) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError as exc:
        raise CannotJudge(
            f"cannot list {directory}: {exc.strerror or exc}. Fix: check the path and that you may read it"
        ) from None


def entry_kind(entry: os.DirEntry[str]) -> str:
    """'file', 'dir' or what else the entry is, never following a symlink."""
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError as exc:
        return exc.strerror or "cannot stat"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return kind_of(mode)
