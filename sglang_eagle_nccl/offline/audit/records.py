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
Work is bounded over the whole audit, not only per file (:class:`Budget`): bytes, files, lines and
records read, each with a limit; past one the audit stops with :class:`BudgetExceeded` (exit 2, the
limit named and how to raise it). Bad lines cost a count, not memory: the first
:data:`LISTED_PER_FILE` of a file are listed with their line number and reason, the rest in one
"... and N more" entry. A file is split a chunk at a time, so a file of millions of short junk lines
never holds a Python object per line.

**Cut line.** The bytes after the last newline of a file (not blank) are its *cut line*: a process
killed in the middle of a write, or a copy taken of a file while its process wrote. It is listed as
exactly that (:class:`CutLine`: file, process, byte offset, size), never dropped without a word and
never counted as an unreadable line. It does not change a mark: the audit judges the records that
were written whole, exactly as it judges a copy taken between two records, and a cut at a line
boundary (which hides as much) cannot be told from no cut at all, so a ⚠ here would only punish the
honest case (a process still running, or killed) without catching anyone. When the cut bytes happen
to hold a whole valid record (only the newline was lost) that record is judged like any other.
"""

from __future__ import annotations

import json
import operator
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract import events, names
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
    """A file, or one line of a file, that was not passed on to judging, and why.

    ``directory`` names the launch directory when the audit reads several (the same file name can be in
    each); it is empty for one.
    """

    file: str
    line: int | None
    reason: str
    directory: str = ""

    @property
    def place(self) -> str:
        return f"{self.directory}/{self.file}" if self.directory else self.file

    def text(self) -> str:
        return f"{self.place}{'' if self.line is None else f':{self.line}'}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason, "directory": self.directory}


@dataclass(frozen=True)
class CutLine:
    """The bytes after the last newline of a file (see the module docstring): where, whose, how many."""

    file: str
    offset: int  # byte offset of the cut line's first byte in the file
    size: int
    whole_record: bool  # the bytes hold a whole valid record (judged): only the newline was lost
    process: str | None = None  # the process key (host/boot/pidns/pid/start), None when no record names it
    directory: str = ""

    @property
    def place(self) -> str:
        return f"{self.directory}/{self.file}" if self.directory else self.file

    def text(self) -> str:
        whose = f"process {self.process}" if self.process else "no complete record names its process"
        what = "a whole record without its newline (judged)" if self.whole_record else "not judged"
        return f"{self.place}: cut line at byte {self.offset} ({self.size} bytes; {whose}): {what}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "directory": self.directory, "offset": self.offset, "size": self.size,
                "whole_record": self.whole_record, "process": self.process}


# How many bad lines of one file are listed one by one; the rest are counted in one entry.
LISTED_PER_FILE = 10

# The whole audit's default limits: far above a launch of 65,536 processes (about 1 GiB, 2.3 million
# lines and 131,072 files of the real writers' shape) and low enough that memory stays a few GiB.
DEFAULT_BUDGET = {"bytes": 4 << 30, "files": 500_000, "lines": 16_000_000, "records": 8_000_000}
BUDGET_WORDS = {"bytes": "bytes", "files": "files", "lines": "lines", "records": "valid records"}


class BudgetExceeded(CannotJudge):
    """The audit read more than its budget allows (exit 2): which limit, and how to raise it."""

    def __init__(self, kind: str, limit: int) -> None:
        super().__init__(
            f"the audit read more than {limit} {BUDGET_WORDS[kind]} (its budget for the whole audit) and stopped "
            f"before judging. Fix: check that the directories are the launch's (a launch of 65,536 processes is "
            f"about 1 GiB in 2.3 million lines), or raise the limit with --budget {kind}=N"
        )
        self.kind = kind
        self.limit = limit


class Budget:
    """What the whole audit may still read: bytes, files, lines and records, each with its limit."""

    def __init__(self, limits: Mapping[str, int] | None = None) -> None:
        unknown = set(limits or {}) - set(DEFAULT_BUDGET)
        if unknown:
            raise ValueError(f"unknown budget kind(s) {sorted(unknown)}; known: {sorted(DEFAULT_BUDGET)}")
        self.limits = {**DEFAULT_BUDGET, **(limits or {})}
        self.used = dict.fromkeys(DEFAULT_BUDGET, 0)

    def take(self, kind: str, amount: int) -> None:
        used = self.used[kind] + amount
        self.used[kind] = used
        if used > self.limits[kind]:
            raise BudgetExceeded(kind, self.limits[kind])


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


_EXACT: dict[str, type] = {"str": str, "int": int, "bool": bool, "num": float}
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

        # The JSON decoder makes exact types only: one identity test passes every good value, and
        # the full check above says what is wrong with a bad one.
        fits = _EXACT[field_type]
        if field_type == "num":
            return lambda value: None if type(value) is int or (type(value) is float and value == value) else base(value)
        return lambda value: None if type(value) is fits else base(value)
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
        fits = _fits(field_type[1])

        def values(value: Any) -> str | None:
            if not isinstance(value, dict):
                return f"expected an object, got {_json_type(value)}"
            for key, element in value.items():
                if type(element) is fits:  # the common case (an environment: strings) without a call
                    continue
                why = item(element)
                if why:
                    return f"[{key!r}]: {why}"
            return None

        return values
    if kind == "obj":
        return _object_check(field_type[1], field_type[2])
    raise ValueError(f"unknown field type {field_type!r}")


def _fits(field_type: Any) -> type | None:
    """The one Python type every good value of a base field has (None: no such type, call its check)."""
    return _EXACT.get(field_type) if field_type in ("str", "int", "bool") else None


_MISSING = object()
# Fields whose values repeat on every line of a file (one process's identity and role).
_SHARED_ORDER = ("event", "host", "boot_id", "pidns", "start", "role")
_SHARED = frozenset(_SHARED_ORDER)


def _object_check(required: Mapping[str, Any], optional: Mapping[str, Any]) -> Check:
    """The check of an object with these required and optional field types."""
    # (key, the exact type that passes without a call, the full check): a record has a dozen fields
    # and an audit millions of records, so a good field costs one dict lookup and one identity test.
    must = tuple((k, _fits(t), check_of(t)) for k, t in required.items())
    may = tuple((k, _fits(t), check_of(t)) for k, t in optional.items())

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"expected an object, got {_json_type(value)}"
        get = value.get
        for key, fits, field_check in must:
            field = get(key, _MISSING)
            if field is _MISSING:
                return f"missing field {key!r}"
            if type(field) is not fits:
                why = field_check(field)
                if why:
                    return f"field {key!r}: {why}"
        for key, fits, field_check in may:
            field = get(key, _MISSING)
            if field is not _MISSING and type(field) is not fits:
                why = field_check(field)
                if why:
                    return f"field {key!r}: {why}"
        return None

    return check


# --- the optional fast reader ----------------------------------------------------------------------
#
# With msgspec installed (the ``fast`` extra), a line that is a valid record is decoded and checked in one
# pass of C code, against a TypedDict made from its event's row of the table; anything it does not accept
# (a bad line, a value msgspec reads otherwise than the json module: a number beyond its range, a lone
# surrogate) goes the plain way below, which alone says what is wrong. So the result is the same with or
# without it (tests/unit/offline/audit/test_fast_reader.py checks that on generated lines): the records,
# their values and types, the bad lines and their reasons. The in-process writers never use it.

try:  # the optional extra: `pip install 'sglang-eagle-nccl[fast]'`
    import msgspec as _msgspec
except ImportError:  # pragma: no cover - depends on the installation
    _msgspec = None

FAST = _msgspec is not None and os.environ.get(names.ENV_AUDIT_READER, "") != "json"


def _has_object(field_type: Any) -> bool:
    return isinstance(field_type, tuple) and (field_type[0] == "obj" or any(_has_object(t) for t in field_type[1:]
                                                                             if isinstance(t, tuple)))


def _fast_type(field_type: Any) -> Any:
    """The msgspec annotation of a field type (an object: any JSON object, checked in full afterwards, since a
    TypedDict would drop the keys it does not declare, which the plain reader keeps inside a field)."""
    if field_type == "any":
        return Any
    if isinstance(field_type, str):
        return {"str": str, "int": int, "bool": bool, "num": int | float}[field_type]
    kind = field_type[0]
    if kind == "opt":
        return _fast_type(field_type[1]) | None
    if kind == "list":
        return list[_fast_type(field_type[1])]  # type: ignore[misc]
    if kind == "map":
        return dict[str, _fast_type(field_type[1])]  # type: ignore[misc]
    return dict[str, Any]


def _fast_decoders(common: Mapping[str, Any], table: Mapping[str, events.Event]
                   ) -> tuple[dict[bytes, Callable[[bytes], Any]], dict[str, tuple[tuple[str, Check], ...]]]:
    if not FAST:
        return {}, {}
    from typing import NotRequired, Required, TypedDict

    decoders, checks = {}, {}
    for name, event in table.items():
        if any(k in common and event.fields[k] != common[k] for k in event.fields):
            continue  # a common field this row types otherwise: both checks apply, the plain way
        declared = {**{k: (t, True) for k, t in common.items()},
                    **{k: (t, True) for k, t in event.required.items() if k not in common},
                    **{k: (t, False) for k, t in event.optional.items() if k not in common}}
        shape = TypedDict(f"Fast_{name}", {k: (Required if must else NotRequired)[_fast_type(t)]  # type: ignore[misc]
                                           for k, (t, must) in declared.items()}, total=False)
        decoders[name.encode()] = _msgspec.json.Decoder(shape).decode
        checks[name] = tuple((k, check_of(t)) for k, (t, _) in declared.items() if _has_object(t))
    return decoders, checks


# The event of a line, found without decoding it: only a guess (the first "event" key anywhere), which is
# why a fast record is kept only when its decoded event is the one guessed.
_EVENT = re.compile(rb'"event": ?"([a-z_0-9]{1,64})"')


# Where msgspec is more lenient than the json module in the values it skips (fields the table does not
# declare): bytes that are not UTF-8, integers past Python's 4,300-digit limit, nesting past Python's
# recursion limit. Such a line goes the plain way (rare: a real record is ASCII, a few KiB, flat).
_LONG_DIGITS = re.compile(rb"[0-9]{4300}")
_MAX_BRACKETS = 400


def _fast_record(raw: bytes, rows: Mapping[bytes, _FastRow]) -> dict[str, Any] | None:
    """The record of a valid line through msgspec, or None: then the plain reader decides. Its event is the
    table's own string (one object for every record of that event, as :meth:`Schema.compact` shares strings)."""
    if not raw.isascii() and _utf8(raw) is None:
        return None
    if len(raw) > 800 and (raw.count(b"[") + raw.count(b"{") > _MAX_BRACKETS
                           or (len(raw) >= 4300 and _LONG_DIGITS.search(raw))):
        return None
    found = _EVENT.search(raw)
    if found is None:
        return None
    row = rows.get(found.group(1))
    if row is None:
        return None
    decode, event, checks = row
    try:
        record = decode(raw)
    except (_msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    if record["event"] != event:  # the guess was another "event" key (a duplicate): the last one counts
        return None
    for key, check in checks:
        value = record.get(key, _MISSING)
        if value is not _MISSING and check(value) is not None:
            return None
    record["event"] = event
    return record


# One event's fast reading: its decoder, the event's name as the table spells it, and the checks after it.
_FastRow = tuple[Callable[[bytes], Any], str, tuple[tuple[str, Check], ...]]


@dataclass(frozen=True)
class Schema:
    """One table of :mod:`sglang_eagle_nccl.contract.events`, compiled into checks."""

    common: Check
    events: Mapping[str, Check]
    # per event: every field the table declares (the common ones first), as the table spells them
    fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # per event (as bytes): the optional C decoder of a valid line (see FAST below); empty without msgspec
    fast: Mapping[bytes, Callable[[bytes], Any]] = field(default_factory=dict)
    # per event: the fields whose values the fast decoder takes as they are and the full check then checks
    fast_checks: Mapping[str, tuple[tuple[str, Check], ...]] = field(default_factory=dict)
    # the shared fields (_SHARED) every record of the table holds (its common fields)
    shared: tuple[str, ...] = ()
    # per event (as bytes): fast and fast_checks in one lookup (_FastRow), made from them
    rows: Mapping[bytes, _FastRow] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # keyed by the event as bytes (found in the line), holding the table's own string of it
        object.__setattr__(self, "rows", {event.encode(): (self.fast[event.encode()], event, checks)
                                          for event, checks in self.fast_checks.items()})

    @classmethod
    def of(cls, common: Mapping[str, Any], table: Mapping[str, events.Event]) -> Schema:
        fast, fast_checks = _fast_decoders(common, table)
        return cls(_object_check(common, {}),
                   {name: _object_check(e.required, e.optional) for name, e in table.items()},
                   {name: (*common, *(k for k in e.fields if k not in common)) for name, e in table.items()},
                   fast, fast_checks, tuple(k for k in _SHARED_ORDER if k in common))

    def compact(self, record: dict[str, Any], strings: dict[str, str]) -> dict[str, Any]:
        """A valid record with the fields the table declares only, keyed by the table's own strings, its
        identity strings shared with the file's other records (``strings``): a cluster's audit holds
        millions of records, and a dict of new key strings each is most of their memory. Nothing reads a
        field the table does not declare (tests/unit/contract/test_events.py checks the writers)."""
        out = {}
        for key in self.fields[record["event"]]:
            value = record.get(key, _MISSING)
            if value is not _MISSING:
                out[key] = strings.setdefault(value, value) if key in _SHARED else value
        return out

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


# One decoder for every line: json.loads with an argument builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)
_SCAN = _DECODER.scan_once


def _loads(text: str) -> tuple[Any, str | None]:
    try:
        return _DECODER.decode(text), None
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError as exc:  # JSONDecodeError, and int() beyond Python's digit limit
        return None, f"not valid JSON ({exc})"


def _value(text: str) -> tuple[Any, str | None]:
    """The JSON value of one line, or why it is none (the same answer as :func:`_loads`, faster for a record)."""
    if text[:1] == "{" and text[-1:] == "}":
        # A record as the writers write it: scanned in place, no whitespace to skip.
        try:
            value, end = _SCAN(text, 0)
        except (StopIteration, ValueError, RecursionError):
            return _loads(text)
        if end == len(text):
            return value, None
    return _loads(text)


@dataclass
class ParsedFile:
    """One file's lines: the valid records, the bad lines (listed up to LISTED_PER_FILE, all counted) and
    its cut line."""

    records: list[dict[str, Any]]
    bad: list[Unreadable]
    bad_lines: int = 0
    cut: CutLine | None = None


# Lines are split a chunk at a time so that a file of millions of tiny lines never holds one object per line.
_CHUNK = 1 << 20


def parse_file(data: bytes, file: str, schema: Schema = RECORDS, *, budget: Budget | None = None,
               unique: bool = False) -> ParsedFile:
    """Every line of one file (see the module docstring): records, bad lines, and the cut line.

    ``unique``: a line that repeats an earlier line of the file is the same record, kept once.
    """
    out = ParsedFile([], [])
    seen: set[bytes] = set()
    strings: dict[str, str] = {}
    tail_at = data.rfind(b"\n") + 1
    number = 0
    pos = 0
    while pos < tail_at:
        # The chunk ends after its last newline; with none, the line is longer than a chunk and is one
        # chunk alone (data[tail_at - 1] is a newline, so there is one to find).
        stop = data.rfind(b"\n", pos, min(pos + _CHUNK, tail_at)) + 1
        if stop <= pos:
            stop = data.find(b"\n", pos, tail_at) + 1
        chunk = data[pos:stop - 1].split(b"\n")
        if budget is not None:
            budget.take("lines", len(chunk))
        if schema.fast:
            _take_fast(out, chunk, number, file, schema, seen if unique else None, strings)
            number += len(chunk)
            pos = stop
            continue
        try:
            texts: list[str | None] = data[pos:stop - 1].decode("utf-8").split("\n")
        except UnicodeDecodeError:
            texts = [_utf8(raw) for raw in chunk]
        for raw, text in zip(chunk, texts, strict=True):
            number += 1
            _take_line(out, raw, text, number, file, schema, seen if unique else None, strings)
        pos = stop
    if budget is not None:
        budget.take("records", len(out.records))
    tail = data[tail_at:]
    if tail.strip():
        text = _utf8(tail)
        record, why = _value(text) if text is not None else (None, "not UTF-8 text")
        if why is None:
            why = schema.problem(record)
        whole = why is None
        if whole:
            out.records.append(schema.compact(record, strings))
        out.cut = CutLine(file, tail_at, len(tail), whole, _process_of(out.records[-1]) if out.records else None)
    if out.bad_lines > LISTED_PER_FILE:
        out.bad.append(Unreadable(file, None, f"... and {out.bad_lines - LISTED_PER_FILE} more unreadable line(s) "
                                              f"(the first {LISTED_PER_FILE} are listed)"))
    return out


def _process_of(record: dict[str, Any]) -> str | None:
    if "start" in record:
        return "/".join(str(record.get(k)) for k in ("host", "boot_id", "pidns", "pid", "start"))
    return None  # a reads-log line names its pid only; the reader names the process


def _utf8(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _take_fast(out: ParsedFile, chunk: list[bytes], number: int, file: str, schema: Schema,
               seen: set[bytes] | None, strings: dict[str, str]) -> None:
    """The lines of a chunk: each valid record through msgspec, any other line the plain way (:func:`_take_line`)."""
    append = out.records.append
    share = strings.setdefault
    rows = schema.rows
    # The identity strings of a file, shared (see Schema.compact; the event is the table's string already):
    # the records of one file are one process's nearly always, so the strings of the record before serve.
    keys = tuple(k for k in schema.shared if k != "event")
    # every record of the table holds these (common, required fields); itemgetter of one key gives no tuple
    values = (operator.itemgetter(*keys) if len(keys) > 1 else (lambda record: (record[keys[0]],)) if keys
              else None)
    last: tuple[str, ...] = ()
    same: dict[str, str] = {}
    for raw in chunk:
        number += 1
        record = _fast_record(raw, rows) if raw[:1] == b"{" else None
        if record is None:
            _take_line(out, raw, _utf8(raw), number, file, schema, seen, strings)
            continue
        if seen is not None:
            if raw in seen:
                continue
            seen.add(raw)
        if values is not None:
            got = values(record)
            if got != last:
                last = tuple(map(share, got, got))
                same = dict(zip(keys, last, strict=True))
            record.update(same)
        append(record)


def _take_line(out: ParsedFile, raw: bytes, text: str | None, number: int, file: str, schema: Schema,
               seen: set[bytes] | None, strings: dict[str, str]) -> None:
    if not raw.strip():
        return
    listed = out.bad_lines < LISTED_PER_FILE
    if text is None:
        why: str | None = "not UTF-8 text"
    elif not listed and text.lstrip(" \t\r")[:1] != "{":
        why = "not a record"  # past the listed ones only the count matters: no need to parse junk
    else:
        record, why = _value(text)
        if why is None:
            why = schema.problem(record)
        if why is None:
            if seen is not None:
                if raw in seen:
                    return
                seen.add(raw)
            out.records.append(schema.compact(record, strings))
            return
    out.bad_lines += 1
    if listed:
        out.bad.append(Unreadable(file, number, why))


def parse_records(data: bytes, file: str, schema: Schema = RECORDS) -> tuple[list[dict[str, Any]], list[Unreadable]]:
    """The valid records of one file (audit records, or NCCL's reads log with ``schema=READS``), and the
    Unreadable entries of its bad lines (the first LISTED_PER_FILE one by one, then how many more)."""
    parsed = parse_file(data, file, schema)
    return parsed.records, parsed.bad


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


def read_file(path: str | os.PathLike[str], schema: Schema, budget: Budget) -> ParsedFile | Unreadable:
    """One file of a launch directory, counted against the whole audit's budget; an Unreadable when not read."""
    budget.take("files", 1)
    path = os.fspath(path)
    name = os.path.basename(path)
    try:
        data = read_regular_file(path, MAX_RECORD_FILE_BYTES, follow_symlinks=False)
    except UnreadableFile as exc:
        return Unreadable(name, None, exc.reason)
    budget.take("bytes", len(data))
    return parse_file(data, name, schema, budget=budget, unique=True)


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
