"""Reading a launch directory as hostile input: which files are records, which records are valid.

An audit directory may be shared, copied, corrupted or tampered with, so reading it never

- opens anything but a regular file (a FIFO would block ``audit``, a device never ends, a
  symlink would read a file elsewhere): names are checked with ``lstat``, opened with
  ``O_NOFOLLOW | O_NONBLOCK`` and checked again with ``fstat`` (:mod:`sglang_eagle_nccl.contract.files`);
- reads more than :data:`MAX_RECORD_FILE_BYTES` per file;
- passes a record to judging unless it is a JSON object whose fields have the types the
  judge reads (:data:`EVENT_SCHEMAS`, one row per event; a record of an event not in the table
  needs only the common fields, so new events pass through until a row is added for them).

Everything that is not read or not valid is returned as an :class:`Unreadable` entry (file,
line, reason) for the report to show.

To add an event: add a row to :data:`EVENT_SCHEMAS` naming the fields the judge or the report
reads, with their types (``STR``, ``INT``, ``BOOL``, ``NUM``, ``ENV``, ``opt(...)``,
``list_of(...)``, ``map_of(...)``, ``obj({...})``).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.files import UnreadableFile, kind_of, read_regular_file
from sglang_eagle_nccl.contract.launch_dir import FILE_PREFIX, FILE_SUFFIX, LAUNCH_META
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


# --- the schema language --------------------------------------------------------------------

Check = Callable[[Any], str | None]  # None when the value fits, else what is wrong in words


def _type(python_type: type | tuple[type, ...], words: str) -> Check:
    def check(value: Any) -> str | None:
        # bool is an int in Python; JSON true/false must never pass as a number.
        if isinstance(value, bool) and bool not in (python_type if isinstance(python_type, tuple) else (python_type,)):
            return f"expected {words}, got a boolean"
        return None if isinstance(value, python_type) else f"expected {words}, got {_json_type(value)}"

    return check


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


STR = _type(str, "a string")
INT = _type(int, "an integer")
BOOL = _type(bool, "a boolean")
NUM = _type((int, float), "a number")
ANY: Check = lambda value: None  # noqa: E731


def opt(check: Check) -> Check:
    """``check``, or null."""
    return lambda value: None if value is None else check(value)


def list_of(item: Check) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return f"expected a list, got {_json_type(value)}"
        for index, element in enumerate(value):
            why = item(element)
            if why:
                return f"[{index}]: {why}"
        return None

    return check


def map_of(item: Check) -> Check:
    """A JSON object with any keys and values that pass ``item``."""

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"expected an object, got {_json_type(value)}"
        for key, element in value.items():
            why = item(element)
            if why:
                return f"[{key!r}]: {why}"
        return None

    return check


def obj(required: Mapping[str, Check], optional: Mapping[str, Check] | None = None) -> Check:
    """A JSON object with the ``required`` fields and, when present, the ``optional`` ones."""
    optional = optional or {}

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


# An NCCL environment snapshot or expectation: variable -> value.
ENV = map_of(STR)
GROUP_DESCRIPTION = obj({}, {"unique_name": opt(STR), "group": opt(STR)})
MISMATCHES = list_of(obj({"variable": STR, "values_by_rank": map_of(opt(STR))}))


@dataclass(frozen=True)
class EventSchema:
    required: Mapping[str, Check]
    optional: Mapping[str, Check]


def event(required: Mapping[str, Check] | None = None, optional: Mapping[str, Check] | None = None) -> EventSchema:
    return EventSchema(dict(required or {}), dict(optional or {}))


# Fields every record has (AuditWriter.write).
COMMON = {"event": STR, "pid": INT, "ts": NUM, "role": STR}

# Per event: the fields the judge and the report read, with their types.
EVENT_SCHEMAS: dict[str, EventSchema] = {
    "process_start": event(
        {"env": ENV},
        {"expected_env": ENV, "profile": opt(STR), "node_rank": opt(INT), "origin": opt(STR), "invocation": opt(STR),
         "group_envs": map_of(ENV), "sglang_wins": list_of(STR)},
    ),
    "profile_changed": event(
        {"env": ENV, "expected_env": ENV},
        {"reason": opt(STR), "profile": opt(STR), "node_rank": opt(INT), "group_envs": map_of(ENV),
         "sglang_wins": list_of(STR), "changes": list_of(map_of(ANY))},
    ),
    "correctness_conflict": event({"variables": list_of(STR)}, {"message": opt(STR)}),
    "native_plugins": event(
        {"library": STR},
        {"library_version": opt(STR), "rules_digest": opt(STR), "tuner": BOOL, "reads_log": opt(STR)},
    ),
    "audit_error": event({}, {"lost_event": opt(STR), "error": opt(STR)}),
    "process_role": event({"title": STR}),
    "patch_set": event(
        {"patch_set": STR},
        {"sglang_version": opt(STR), "status": opt(STR), "uncovered": list_of(obj({"target": STR}))},
    ),
    "hook_installed": event({"target": STR}, {"mechanism": opt(STR), "handler": opt(STR)}),
    "hook_uncovered": event({"target": STR}, {"required": BOOL, "reason": opt(STR), "mechanism": opt(STR)}),
    "plugin_error": event({}, {"handler": opt(STR), "hook": opt(STR), "error": opt(STR)}),
    "sglang_env_writes": event(
        {"writes": list_of(obj({"name": STR}, {"before": opt(STR), "after": opt(STR), "for_correctness": opt(STR)}))},
        {"where": opt(STR), "server_flags": map_of(ANY)},
    ),
    "env_restored": event(
        {"env": ENV},
        {"overwrites": list_of(
            obj({"name": STR, "profile_value": opt(STR)}, {"restored": BOOL, "foreign_value": opt(STR)})
        )},
    ),
    "scheduler_start": event({"env": ENV}, {"overwrites": list_of(map_of(ANY))}),
    "profile_replaced": event({"env": ENV}, {"profile": opt(STR)}),
    "consistency_ok": event({"group": STR}, {"ranks": list_of(INT), "fingerprint": opt(STR)}),
    "consistency_mismatch": event({"group": STR, "mismatches": MISMATCHES}, {"ranks": list_of(INT), "mode": opt(STR)}),
    "consistency_failed": event({"group": STR}, {"error": opt(STR), "mismatches": MISMATCHES}),
    "group_created": event(
        {"group": STR, "env": ENV},
        {
            "unique_name": opt(STR), "ranks": list_of(INT), "rank_in_group": opt(INT), "world_size": opt(INT),
            "global_rank": opt(INT), "backend": opt(STR), "device_group_backend": opt(STR),
            "cpu_group_backend": opt(STR), "torch_comm": opt(STR), "use_pynccl": BOOL, "has_pynccl": BOOL,
            "group_overrides": opt(ENV), "process_env": ENV, "allreduce_paths": opt(map_of(ANY)),
        },
    ),
    "pynccl_created": event(
        {"group": STR, "env": ENV},
        {
            "world_size": opt(INT), "rank": opt(INT), "available": BOOL, "disabled": BOOL, "device": opt(STR),
            "library": opt(STR), "group_overrides": opt(ENV), "process_env": ENV,
        },
    ),
    "torch_pg_options": event({}, {"group": opt(STR), "options": opt(STR)}),
    "eagle_groups": event(
        {"worker": STR},
        {
            "module": opt(STR), "draft": opt(map_of(GROUP_DESCRIPTION)), "verify": opt(map_of(GROUP_DESCRIPTION)),
            "current_tp": opt(GROUP_DESCRIPTION), "new_groups": BOOL, "draft_note": opt(STR),
        },
    ),
    "mechanism_fallback": event({"target": STR}, {"reason": opt(STR)}),
    "ray_actor_env": event(
        {"actor_role": STR, "env": ENV},
        {"actor": opt(STR), "where": opt(STR), "node_rank": opt(INT), "placement_group": opt(STR), "bundle": opt(INT),
         "ray_node": opt(STR), "plugin_vars": list_of(STR), "replaced_user_values": list_of(map_of(ANY))},
    ),
    "ray_refused": event({"error": STR}, {"actor_role": opt(STR), "where": opt(STR)}),
}

# launch.json: written once by the process that created the launch directory.
LAUNCH_META_SCHEMA = obj(
    {},
    {
        "profile": obj(
            {},
            {
                "name": opt(STR), "env": ENV, "groups": map_of(ENV), "nodes": map_of(ENV),
                "policy": obj({}, {"sglang_wins": list_of(STR)}), "sources": list_of(STR),
            },
        ),
        "launcher": opt(STR),
    },
)


def record_problem(record: Any) -> str | None:
    """Why ``record`` cannot be judged, or None when it fits the schema of its event."""
    if not isinstance(record, dict):
        return f"not a JSON object but {_json_type(record)}"
    for key, check in COMMON.items():
        if key not in record:
            return f"missing field {key!r}"
        why = check(record[key])
        if why:
            return f"field {key!r}: {why}"
    schema = EVENT_SCHEMAS.get(record["event"])
    if schema is None:
        return None
    why = obj(schema.required, schema.optional)(record)
    return f"{record['event']} record: {why}" if why else None


# --- files ---------------------------------------------------------------------------------


def _loads(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError as exc:  # JSONDecodeError, and int() beyond Python's digit limit
        return None, f"not valid JSON ({exc})"


def parse_records(data: bytes, file: str) -> tuple[list[dict[str, Any]], list[Unreadable]]:
    """The valid records of one process file, and one Unreadable entry per line that is not."""
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
            why = record_problem(record)
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


def read_record_file(path: Path) -> tuple[list[dict[str, Any]] | None, list[Unreadable]]:
    """(records, unreadable): records is None when the file itself was not read."""
    try:
        data = read_regular_file(str(path), MAX_RECORD_FILE_BYTES, follow_symlinks=False)
    except UnreadableFile as exc:
        return None, [Unreadable(path.name, None, exc.reason)]
    return parse_records(data, path.name)


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
