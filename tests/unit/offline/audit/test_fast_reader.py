"""The optional fast reader (msgspec) reads exactly what the plain one reads (issue 24 item 6).

Rule (offline/audit/records.py, "the optional fast reader"): for any bytes, ``parse_file`` gives the same
records -- the same values of the same JSON types, the same fields --, the same bad lines with the same
reasons and the same cut line whether msgspec decodes the lines or the json module does. Checked on
generated lines of every event of both tables: valid records in any key order and spacing, and the same
with a field dropped, retyped, duplicated, extended or replaced by junk. The plain reader is the
reference here; its own rules are tested against a separate reference elsewhere (test_records_schema.py).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.contract import events
from sglang_eagle_nccl.offline.audit import records
from sglang_eagle_nccl.offline.audit.records import READS, RECORDS, Schema, parse_file
from support.record_lines import lines

# Each test over both tables: the audit records' and NCCL's reads logs'.
BOTH_TABLES = pytest.mark.parametrize("schema, common, table", [(RECORDS, events.COMMON, events.EVENTS),
                                                               (READS, events.READS_COMMON, events.READS_EVENTS)],
                                      ids=["records", "reads"])


def _same(fast_schema, plain_schema, data: bytes) -> None:
    fast = parse_file(data, "f.jsonl", fast_schema, unique=True)
    plain = parse_file(data, "f.jsonl", plain_schema, unique=True)
    canon = [json.dumps(r, sort_keys=True) for r in fast.records]  # types included: true is not 1, 1.0 is not 1
    assert canon == [json.dumps(r, sort_keys=True) for r in plain.records]
    assert (fast.bad, fast.bad_lines, fast.cut) == (plain.bad, plain.bad_lines, plain.cut)


def test_the_fast_reader_is_on_where_msgspec_is_installed():
    pytest.importorskip("msgspec", reason="the test extra installs msgspec: both readers are tested there")
    assert records.FAST and RECORDS.fast and READS.fast


@BOTH_TABLES
def test_the_fast_reader_reads_what_the_plain_reader_reads(schema, common, table):
    # msgspec is in the test extra: without it this test would prove nothing, so it fails rather than skips.
    assert schema.fast, "msgspec is not installed: pip install -e '.[test]' (the test extra brings it)"
    plain = replace(schema, fast={}, fast_checks={})

    @settings(max_examples=300)
    @given(st.lists(lines(common, table), min_size=1, max_size=6), st.booleans())
    def check(texts, cut):
        data = "\n".join(texts).encode("utf-8", "surrogatepass") + (b"" if cut else b"\n")
        _same(schema, plain, data)

    check()


@pytest.mark.parametrize("extra", [
    b'"\xed\xa0\x80"',  # not UTF-8 (a surrogate encoded as such) in a field the table does not declare
    b"1" + b"0" * 4400,  # an integer past Python's digit limit: the json module refuses it
    b"[" * 1200 + b"]" * 1200,  # nesting past Python's recursion limit
], ids=["not-utf8", "long-integer", "deep"])
def test_what_msgspec_would_skip_and_the_json_module_refuses_is_refused_by_both(extra):
    assert RECORDS.fast, "msgspec is not installed: pip install -e '.[test]' (the test extra brings it)"
    line = (b'{"event":"audit_error","ts":0,"role":"","host":"","boot_id":"","pidns":"","pid":0,"start":"",'
            b'"undeclared":' + extra + b"}\n")
    _same(RECORDS, replace(RECORDS, fast={}, fast_checks={}), line)
    assert parse_file(line, "f.jsonl", RECORDS).bad_lines == 1


@BOTH_TABLES
def test_a_table_compiled_now_reads_every_line_as_the_one_compiled_at_import(schema, common, table):
    # The reader's tables are compiled once, at import; compiled again here (the same code, run now) they
    # must give the same fast decoders, the same fields checked in full after them, and the same reading
    # of every line -- fast and plain -- as the plain reader compiled at import.
    fresh = Schema.of(common, table)
    assert fresh.fast, "msgspec is not installed: pip install -e '.[test]' (the test extra brings it)"
    assert sorted(fresh.fast) == sorted(schema.fast) and (fresh.fields, fresh.shared) == (schema.fields, schema.shared)
    assert ({k: [f for f, _ in v] for k, v in fresh.fast_checks.items()}
            == {k: [f for f, _ in v] for k, v in schema.fast_checks.items()})
    reference = replace(schema, fast={}, fast_checks={})

    @settings(max_examples=200)
    @given(st.lists(lines(common, table), min_size=1, max_size=6), st.booleans())
    def check(texts, cut):
        data = "\n".join(texts).encode("utf-8", "surrogatepass") + (b"" if cut else b"\n")
        _same(fresh, reference, data)
        _same(replace(fresh, fast={}, fast_checks={}), reference, data)

    check()


def _some(field_type):
    """A valid value of a field type of the table (the smallest)."""
    if isinstance(field_type, str):
        return {"str": "s", "int": 1, "bool": True, "num": 1.5, "any": None}[field_type]
    kind = field_type[0]
    return (None if kind == "opt" else [] if kind == "list" else {} if kind == "map"
            else {k: _some(t) for k, t in field_type[1].items()})


@BOTH_TABLES
def test_the_fast_reader_reads_every_valid_record_itself(schema, common, table):
    # A line the plain reader would take the same way is not proof that msgspec read it: a fast record's
    # event is the table's own string (the plain reader's is the one decoded from the line).
    assert schema.fast, "msgspec is not installed: pip install -e '.[test]' (the test extra brings it)"
    for name in schema.fast_checks:
        own = next(k for k in table if k == name)
        record = {k: _some(t) for k, t in {**common, **table[name].required}.items()} | {"event": name}
        line = json.dumps(record, separators=(",", ":")).encode() + b"\n"
        got = parse_file(line, "f.jsonl", schema).records
        assert got == [record] and got[0]["event"] is own, name
        plain = parse_file(line, "f.jsonl", replace(schema, fast={}, fast_checks={})).records
        assert plain == [record] and plain[0]["event"] is not own, name
    assert sorted(schema.fast_checks) == sorted(table)  # every event has its fast decoder


def _wrong(field_type):
    """A value of the wrong type for a (non-"any") field type."""
    return "s" if field_type in ("int", "bool", "num") else 5 if field_type == "str" else 5


@BOTH_TABLES
def test_a_wrong_value_inside_every_optional_list_and_map_field_is_refused_by_both(schema, common, table):
    # Every field that holds values of one type (an opt's, a list's items, a map's values): a record whose
    # value there has another type is a bad line in both readers -- msgspec's types must say what the
    # plain reader's checks say, for each kind (the generated lines above reach only some of them).
    assert schema.fast, "msgspec is not installed: pip install -e '.[test]' (the test extra brings it)"
    plain = replace(schema, fast={}, fast_checks={})
    tried = set()
    for name, row in table.items():
        for key, field_type in {**common, **row.required, **row.optional}.items():
            if not (isinstance(field_type, tuple) and field_type[0] in ("opt", "list", "map")
                    and isinstance(field_type[1], str) and field_type[1] != "any"):
                continue
            record = {k: _some(t) for k, t in {**common, **row.required}.items()} | {"event": name}
            inner = _wrong(field_type[1])
            record[key] = {"opt": inner, "list": [inner], "map": {"k": inner}}[field_type[0]]
            line = json.dumps(record).encode() + b"\n"
            _same(schema, plain, line)
            assert parse_file(line, "f.jsonl", schema).bad_lines == 1, (name, key, record[key])
            tried.add(field_type[0])
    assert tried >= {"opt", "map"} if schema is RECORDS else tried, tried


@pytest.mark.parametrize("schema", [RECORDS, replace(RECORDS, fast={}, fast_checks={})], ids=["fast", "plain"])
def test_a_record_after_the_listed_bad_lines_is_still_read(schema):
    # Past the listed bad lines only their count matters (junk is no longer parsed), never a record's reading.
    record = {k: _some(t) for k, t in {**events.COMMON, **events.EVENTS["audit_error"].required}.items()}
    record["event"] = "audit_error"
    junk = [b"x", b" {", b"[1]", b"{}"] * (records.LISTED_PER_FILE // 2 + 2)
    data = b"\n".join([*junk, json.dumps(record).encode(), b" " + json.dumps(record).encode(), b"y"]) + b"\n"
    got = parse_file(data, "f.jsonl", schema)
    assert got.records == [record, record]
    assert got.bad_lines == len(junk) + 1 and len(got.bad) == records.LISTED_PER_FILE + 1  # "... and N more"
