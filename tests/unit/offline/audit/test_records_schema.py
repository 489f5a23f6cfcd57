"""What the reader passes on to judging (offline/audit/records.py): the events table compiled into checks.

The reader compiles contract/events.py once at import; the checks are compiled here again, at run time,
and each type of the table is held to what it accepts and what it refuses, with the words that say why
(a record that is not judged is listed with that reason and demotes the verdict).
"""

from __future__ import annotations

import math

import pytest

from sglang_eagle_nccl.contract import events
from sglang_eagle_nccl.offline.audit.records import (
    READS,
    RECORDS,
    Schema,
    Unreadable,
    check_of,
    is_reads_file_name,
    is_record_file_name,
    parse_records,
    pid_from_file_name,
)
from support.audit_records import reads_header, rec


@pytest.mark.parametrize(
    "field_type,value,why",
    [
        ("str", "x", None),
        ("str", 1, "expected a string, got a number"),
        ("str", None, "expected a string, got null"),
        ("str", True, "expected a string, got a boolean"),
        ("int", 3, None),
        ("int", -3, None),
        ("int", True, "expected an integer, got a boolean"),
        ("int", 1.0, "expected an integer, got a number"),
        ("int", "3", "expected an integer, got a string"),
        ("bool", False, None),
        ("bool", 0, "expected a boolean, got a number"),
        ("num", 1, None),
        ("num", 1.5, None),
        ("num", False, "expected a number, got a boolean"),
        ("num", math.nan, "expected a number, got NaN"),
        ("num", [], "expected a number, got a list"),
        ("num", {}, "expected a number, got an object"),
        ("any", object(), None),
        ("any", None, None),
        (events.opt("int"), None, None),
        (events.opt("int"), 2, None),
        (events.opt("int"), "2", "expected an integer, got a string"),
        (events.list_of("int"), [1, 2], None),
        (events.list_of("int"), [], None),
        (events.list_of("int"), [1, "x"], "[1]: expected an integer, got a string"),
        (events.list_of("int"), (1,), "expected a list, got tuple"),
        (events.list_of("int"), {}, "expected a list, got an object"),
        (events.map_of("str"), {"a": "b"}, None),
        (events.map_of("str"), {"a": 1}, "['a']: expected a string, got a number"),
        (events.map_of("str"), {"a": "b", "c": 1}, "['c']: expected a string, got a number"),  # past a good one
        (events.map_of("str"), [], "expected an object, got a list"),
        (events.obj({"a": "int"}, {"b": "str"}), {"a": 1}, None),
        (events.obj({"a": "int"}, {"b": "str"}), {"a": 1, "b": "x", "c": None}, None),
        (events.obj({"a": "int"}, {"b": "str"}), {"b": "x"}, "missing field 'a'"),
        (events.obj({"a": "int"}, {"b": "str"}), {"a": "1"}, "field 'a': expected an integer, got a string"),
        (
            events.obj({"a": "int"}, {"b": "str"}),
            {"a": 1, "b": 2},
            "field 'b': expected a string, got a number",
        ),
        (events.obj({"a": "int"}), "x", "expected an object, got a string"),
        (
            events.list_of(events.map_of(events.opt("str"))),
            [{"a": None}, {"b": 3}],
            "[1]: ['b']: expected a string, got a number",
        ),
    ],
)
def test_each_field_type_accepts_and_refuses(field_type, value, why):
    assert check_of(field_type)(value) == why


def test_an_unknown_field_type_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown field type"):
        check_of(("tuple", "int"))


def test_the_whole_table_compiled_at_run_time_judges_records_as_the_reader_does():
    schema = Schema.of(events.COMMON, events.EVENTS)
    good = rec("group_created", group="tp", env={"NCCL_PROTO": "LL"}, ranks=[0, 1])
    assert schema.problem(good) is None and RECORDS.problem(good) is None
    cases = {
        "not a JSON object but a list": [],
        "not a JSON object but null": None,
        "missing field 'host'": {k: v for k, v in good.items() if k != "host"},
        "field 'pid': expected an integer, got a string": {**good, "pid": "100"},
        "unknown event 'group_deleted' (not written by this version of the plugin)": {
            **good,
            "event": "group_deleted",
        },
        "group_created record: missing field 'env'": {k: v for k, v in good.items() if k != "env"},
        "group_created record: field 'ranks': [1]: expected an integer, got null": {
            **good,
            "ranks": [0, None],
        },
        "group_created record: field 'env': ['NCCL_PROTO']: expected a string, got a number": {
            **good,
            "env": {"NCCL_PROTO": 1},
        },
    }
    for why, record in cases.items():
        assert schema.problem(record) == why and RECORDS.problem(record) == why, record


def test_the_reads_log_has_its_own_table():
    header = reads_header()
    assert READS.problem(header) is None and RECORDS.problem(header) is not None
    line = {
        "event": "read",
        "pid": 100,
        "time": 1.0,
        "name": "NCCL_PROTO",
        "value": None,
        "source": "default",
        "environment": None,
        "disagrees": False,
    }
    assert READS.problem(line) is None
    assert (
        READS.problem({**line, "disagrees": 0})
        == "read record: field 'disagrees': expected a boolean, got a number"
    )


def test_parse_records_keeps_the_valid_lines_and_names_each_bad_one():
    good = rec("process_role", title="sglang::scheduler_TP0")
    import json

    data = b"\n".join(
        [
            json.dumps(good).encode(),
            b"",
            b"  ",
            b"\xff\xfe",
            b'{"a": NaN}',
            b"[1",
            json.dumps([1]).encode(),
            json.dumps({**good, "title": 5}).encode(),
            b"[" * 100000 + b"]" * 100000,
            json.dumps(good).encode(),
        ]
    )
    records, bad = parse_records(data, "proc-x.jsonl")
    assert records == [good, good]
    reasons = {u.line: u.reason for u in bad}
    assert set(reasons) == {4, 5, 6, 7, 8, 9} and all(u.file == "proc-x.jsonl" for u in bad)
    assert reasons[4] == "not UTF-8 text"
    assert reasons[5].startswith("not valid JSON (NaN is not JSON")
    assert reasons[6].startswith("not valid JSON (")
    assert reasons[7] == "not a JSON object but a list"
    assert reasons[8] == "process_role record: field 'title': expected a string, got a number"
    assert reasons[9] in ("JSON nested too deeply",) or reasons[9].startswith("not valid JSON")


def test_unreadable_says_file_and_line():
    assert Unreadable("f", 3, "why").text() == "f:3: why" and Unreadable("f", None, "why").text() == "f: why"
    assert Unreadable("f", 0, "w").text() == "f:0: w"
    assert Unreadable("f", None, "w").to_dict() == {"file": "f", "line": None, "reason": "w", "directory": ""}
    assert Unreadable("f", 2, "w", "d").text() == "d/f:2: w" and Unreadable("f", 2, "w", "d").place == "d/f"


@pytest.mark.parametrize(
    "name,pid",
    [
        ("proc-h-100.jsonl", 100),
        ("proc-host-boot-ns-123-4567.jsonl", 4567),
        ("proc-h-0100.jsonl", 100),
        ("proc-h-1234567890.jsonl", 1234567890),
        ("proc-h-12345678901.jsonl", None),
        ("proc-h-x1.jsonl", None),
        ("proc-h-.jsonl", None),
        ("proc-h-١٢.jsonl", None),
        ("proc-h-100", 100),
        ("proc-h-100.json", None),
    ],
)
def test_pid_from_file_name(name, pid):
    assert pid_from_file_name(name) == pid


def test_which_names_are_records_and_which_are_reads_logs():
    assert is_record_file_name("proc-x.jsonl") and not is_record_file_name("proc-x.json")
    assert not is_record_file_name("xproc-x.jsonl") and not is_record_file_name("nccl-reads-x.jsonl")
    assert is_reads_file_name("nccl-reads-x.jsonl") and not is_reads_file_name("proc-x.jsonl")
    assert not is_reads_file_name("nccl-reads-x.txt")
