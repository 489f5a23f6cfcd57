"""The one event table (contract/events.py) against every writer and the judge, both ways.

Writers are found in the source, not by running them: every ``record("x", ...)`` / ``.write("x", ...)``
call and every ``{"event": "x", ...}`` literal in the Python package, and every ``sb_head(&b, "x")`` line
the C library builds. A writer that sets a field the table does not declare, omits a required one, or
writes an event the table lacks fails here; so does a table row nothing writes, a declared field no
writer sets, and a judged event without exactly one judge function.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sglang_eagle_nccl.contract import events
from sglang_eagle_nccl.offline.audit.judge import JUDGES

PKG = Path(__file__).resolve().parents[3] / "sglang_eagle_nccl"
WRITER_CALLS = {"record", "write"}


def python_writes() -> dict[str, list[tuple[str, set[str] | None]]]:
    """event -> [(where, field names set there, or None when a **mapping makes them unknowable)]."""
    found: dict[str, list[tuple[str, set[str] | None]]] = {}
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        rel = path.relative_to(PKG).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if (
                    name in WRITER_CALLS
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    dynamic = any(k.arg is None for k in node.keywords)
                    fields = None if dynamic else {k.arg for k in node.keywords if k.arg}
                    found.setdefault(node.args[0].value, []).append((f"{rel}:{node.lineno}", fields))
            elif isinstance(node, ast.Dict):
                keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
                if "event" in keys:
                    value = node.values[keys.index("event")]
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        fields = {k for k in keys if isinstance(k, str)} - {"event"}
                        # **identity() is the one spread a writer may use: the process identity.
                        spreads = [v for k, v in zip(node.keys, node.values, strict=True) if k is None]
                        if all(
                            isinstance(s, ast.Call) and getattr(s.func, "id", "") == "identity"
                            for s in spreads
                        ):
                            fields |= set(events.IDENTITY) if spreads else set()
                        else:
                            fields = None
                        found.setdefault(value.value, []).append((f"{rel}:{node.lineno}", fields))
    return found


def c_writes() -> dict[str, list[tuple[str, set[str]]]]:
    found: dict[str, list[tuple[str, set[str]]]] = {}
    for path in (PKG / "native" / "src").glob("*.c"):
        text = path.read_text("utf-8")
        for match in re.finditer(r'sb_head\(&b, "(\w+)"\);(.*?)reads_log_emit_locked', text, re.S):
            body = match.group(2)
            fields = set(re.findall(r'\\"(\w+)\\":', body))
            # Nested objects (the counts line's list of reads) are checked by their own row's type.
            if match.group(1) == "counts":
                fields = {"reads", "unrecorded"}
            elif match.group(1) == "tuner_answers":
                fields = {f for f in fields if f not in events.READS_EVENTS["tuner_answers"].required["answers"][1][1]}
            line = text.count("\n", 0, match.start()) + 1
            found.setdefault(match.group(1), []).append((f"native/src/{path.name}:{line}", fields))
    return found


def test_every_python_write_site_matches_its_row():
    writes = python_writes()
    assert writes, "no write sites found: the scan is broken"
    table = {**events.EVENTS, **events.READS_EVENTS}
    problems = []
    for event, sites in writes.items():
        row = table.get(event)
        if row is None:
            problems += [
                f"{where}: writes event {event!r}, which contract/events.py does not declare"
                for where, _ in sites
            ]
            continue
        common = set(events.COMMON if event in events.EVENTS else events.READS_COMMON)
        for where, fields in sites:
            if fields is None:
                continue
            unknown = fields - set(row.fields) - common
            missing = set(row.required) - fields - common
            if unknown:
                problems.append(f"{where}: {event} sets undeclared field(s) {sorted(unknown)}")
            if missing:
                problems.append(f"{where}: {event} omits required field(s) {sorted(missing)}")
    assert not problems, "\n".join(problems)


def test_every_c_line_matches_its_row():
    writes = c_writes()
    assert set(writes) >= {"read", "counts", "env_init", "tuner_init"}, writes
    problems = []
    for event, sites in writes.items():
        row = events.READS_EVENTS.get(event)
        if row is None:
            problems.append(f"{sites[0][0]}: writes event {event!r}, which READS_EVENTS does not declare")
            continue
        for where, fields in sites:
            if fields != set(row.fields):
                problems.append(
                    f"{where}: {event} writes {sorted(fields)}, the table says {sorted(row.fields)}"
                )
    assert not problems, "\n".join(problems)


def test_every_row_is_written_and_every_declared_field_is_set_by_some_writer():
    py, c = python_writes(), c_writes()
    problems = []
    for table, common in ((events.EVENTS, events.COMMON), (events.READS_EVENTS, events.READS_COMMON)):
        for name, row in table.items():
            sites = [f for _, f in py.get(name, [])] + [f for _, f in c.get(name, [])]
            if not sites:
                problems.append(f"{name}: declared ({row.writer}) but nothing writes it")
                continue
            if any(f is None for f in sites):
                continue  # a writer passes a mapping: its fields cannot be listed statically
            set_somewhere = set().union(*sites) | set(common)
            unset = set(row.fields) - set_somewhere
            if unset:
                problems.append(f"{name}: declared field(s) {sorted(unset)} that no writer sets")
    assert not problems, "\n".join(problems)


def test_the_writer_named_in_each_row_writes_it():
    py, c = python_writes(), c_writes()
    for name, row in {**events.EVENTS, **events.READS_EVENTS}.items():
        where = [w for w, _ in py.get(name, [])] + [w for w, _ in c.get(name, [])]
        assert any(w.startswith(row.writer) for w in where), (name, row.writer, where)


def test_each_judged_event_has_exactly_one_judge_function():
    judged = {name for name, row in events.EVENTS.items() if row.judged}
    assert set(JUDGES) == judged, (sorted(set(JUDGES) - judged), sorted(judged - set(JUDGES)))
