"""Rules of the reader that only its speed and memory see (issue 24 item 6), each checked on generated inputs
or against a reference written here:

- *One string per value in a file* (offline/audit/records.py, ``Schema.compact``): a cluster's audit holds
  millions of records, so the identity strings of one file's records (event, host, boot id, PID namespace,
  start, role) are one object per value, whichever reader (msgspec's or the json module's) read the lines
  and however the processes of the file alternate; the values are the ones written.
- *A launch is reconciled once* (offline/audit/read.py): reconciling is a function of the evidence, so
  merging one launch gives that launch, merging several gives what reconciling all their evidence gives,
  and merging none gives an empty launch; a process found in one place only is that copy as it is (its file,
  its place, its bad lines, its records, no conflict), as the general reconciling gives it.
- *The cycle collector does not walk the audit twice* (offline/audit/read.py, ``no_cycle_collector``): what was
  made while it was paused is in the oldest generation afterwards, and the collector is as it was.
"""

from __future__ import annotations

import gc
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.offline.audit.read import (
    merge,
    no_cycle_collector,
    read_evidence,
    read_launches,
    reconcile,
)
from sglang_eagle_nccl.offline.audit.records import RECORDS, Budget, parse_file
from support.audit_records import rec, write_lines

SHARED = ("event", "host", "boot_id", "pidns", "start", "role")
# A few events of the table with their own fields, enough to interleave kinds within one file.
KINDS = {
    "process_role": {"title": "sglang::scheduler_TP0"},
    "hook_installed": {"target": "sglang.x:T", "mechanism": "wrapt"},
    "patch_set": {"patch_set": "p", "uncovered": [{"target": "t", "required": False}]},
    "nccl_reads_log": {"file": "nccl-reads-h-100.jsonl"},
}


@st.composite
def files(draw) -> list[dict]:
    """One file's records: of one process or two alternating (a shared file), of several events, with one line
    that is no record among them (the plain way inside the fast reader)."""
    out = []
    for event, who, role in draw(st.lists(st.tuples(st.sampled_from(sorted(KINDS)), st.sampled_from([100, 101]),
                                                     st.sampled_from(["child", "scheduler"])), min_size=1, max_size=12)):
        out.append(rec(event, who, role, {"host": f"h{who}"}, **KINDS[event]))
    if draw(st.booleans()):
        out.insert(draw(st.integers(0, len(out))), {"event": "hook_installed", "target": 1})  # a bad line
    return out


def _lines(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


@settings(max_examples=150)
@given(files(), st.booleans())
def test_a_files_identity_strings_are_one_object_per_value_with_either_reader(records, fast):
    schema = RECORDS if fast else replace(RECORDS, fast={}, fast_checks={})
    got = parse_file(_lines(records), "f.jsonl", schema).records
    valid = [r for r in records if not isinstance(r.get("target", ""), int)]
    assert [{k: r[k] for k in SHARED} for r in got] == [{k: r[k] for k in SHARED} for r in valid]
    for key in SHARED:
        objects = defaultdict(set)
        for r in got:
            objects[r[key]].add(id(r[key]))
        assert all(len(ids) == 1 for ids in objects.values()), (key, objects)


def _launch(root: Path, name: str, pids: list[int]) -> Path:
    run = root / name
    run.mkdir()
    for pid in pids:
        write_lines(run / f"proc-h-{pid}.jsonl", [rec("process_role", pid, title="sglang::x"),
                                                  rec("hook_installed", pid, target="t")])
    return run


def _canon(launch) -> str:
    return json.dumps([[p.name, p.files, p.places, p.conflicts, p.records] for p in launch.processes]
                      + [launch.run_dirs, [u.text() for u in launch.unreadable]], sort_keys=True)


def test_merging_one_launch_gives_it_and_merging_several_reconciles_all_their_evidence(tmp_path):
    one = read_evidence(_launch(tmp_path, "a", [100, 101]), Budget())
    other = read_evidence(_launch(tmp_path, "b", [101, 102]), Budget())
    assert merge([one]) is one
    assert merge(iter([one])) is one
    assert _canon(one) == _canon(reconcile(one.evidence))
    both = merge([one, other])
    assert _canon(both) == _canon(reconcile([*one.evidence, *other.evidence]))
    assert [p.name.split("/")[3] for p in both.processes] == ["100", "101", "102"]
    assert len(both.run_dirs) == 2 and both.processes[0].places[0].endswith("a/proc-h-100.jsonl")
    empty = merge([])
    assert (empty.processes, empty.run_dirs, empty.meta) == ([], [], {})


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(100, 104), st.integers(0, 2), st.booleans()), min_size=1,
                max_size=6, unique_by=lambda t: t[1]))
def test_a_process_in_one_place_is_that_copy_as_it_is(tmp_path_factory, layout):
    # (directory, pid, bad lines, declares a reads log) per process, each process in one place only
    root = tmp_path_factory.mktemp("one-place")
    dirs = [root / "a", root / "b"]
    for d in dirs:
        d.mkdir()
    expected = {}
    for where, pid, bad, declares in layout:
        lines = [rec("process_role", pid, title="sglang::x"), *(["not json"] * bad)]
        if declares:
            lines.append(rec("nccl_reads_log", pid, file=f"nccl-reads-h-{pid}.jsonl"))
            write_lines(dirs[where] / f"nccl-reads-h-{pid}.jsonl",
                        [{"event": "reads_log", "time": 1.0, "host": "h", "boot_id": rec("x")["boot_id"],
                          "pidns": rec("x")["pidns"], "pid": pid, "start": str(1000 + pid)}])
        write_lines(dirs[where] / f"proc-h-{pid}.jsonl", lines)
        expected[pid] = (where, bad, declares)
    used = sorted({where for where, *_ in layout})
    launch = read_launches([dirs[i] for i in used])
    several = len(used) > 1
    assert [p.pid for p in launch.processes] == sorted(expected)
    for p in launch.processes:
        where, bad, declares = expected[p.pid]
        name = f"proc-h-{p.pid}.jsonl"
        place = f"{dirs[where]}/{name}" if several else name
        assert (p.files, p.places, p.conflicts, p.bad_lines) == ([name], [place], [], bad)
        assert [r["event"] for r in p.records] == ["process_role", *(["nccl_reads_log"] if declares else [])]
    # a reads log is judged only when its process declared it
    assert sorted(k[3] for k in launch.reads) == sorted(pid for pid, (_, _, declares) in expected.items() if declares)
    assert not launch.copies


def test_what_is_made_while_the_collector_is_paused_is_old_afterwards():
    was = gc.isenabled()
    gc.enable()
    try:
        with no_cycle_collector():
            assert not gc.isenabled()
            made = [[i] for i in range(50)]
            with no_cycle_collector():  # nested: the outer one decides
                pass
            assert not gc.isenabled()
        assert gc.isenabled() and gc.get_freeze_count() == 0
        old = {id(o) for o in gc.get_objects(generation=2)}
        assert all(id(x) in old for x in made)
        gc.disable()
        with no_cycle_collector():
            pass
        assert not gc.isenabled()  # paused before: paused after
    finally:
        (gc.enable if was else gc.disable)()


@settings(max_examples=40, deadline=None)
@given(files())
def test_a_files_records_are_grouped_by_process_in_file_order(tmp_path_factory, records):
    # A file of one process (as the writers write them) or of several interleaved (an old shared file): each
    # process gets its own records in file order (a repeated line once), and the bad lines of the file are told to each.
    run = tmp_path_factory.mktemp("grouped")
    write_lines(run / "proc-h-100.jsonl", records)
    launch = read_launches([run])
    valid = [r for r in records if not isinstance(r.get("target", ""), int)]
    expected: dict[int, list[dict]] = {}
    seen: set[str] = set()
    for r in valid:
        if json.dumps(r) not in seen:  # a line that repeats an earlier one is one record
            seen.add(json.dumps(r))
            expected.setdefault(r["pid"], []).append(r)
    assert {p.pid: p.records for p in launch.processes} == expected
    assert {p.bad_lines for p in launch.processes} == {len(records) - len(valid)}


def test_the_fields_kept_per_read_are_required_in_their_rows():
    # _reads_of takes them without a default: every valid line of the reads table has them.
    from sglang_eagle_nccl.contract.events import READS_EVENTS
    from sglang_eagle_nccl.offline.audit.read import _READ_FIELDS, _TUNER_FIELDS

    assert set(_READ_FIELDS) <= set(READS_EVENTS["read"].required)
    assert set(_TUNER_FIELDS) <= set(READS_EVENTS["tuner_init"].required)


@settings(max_examples=40, deadline=None)
@given(files(), st.lists(st.sampled_from([*sorted(KINDS), "process_start"]), max_size=6))
def test_a_process_gives_the_records_of_an_event_in_their_order_however_often_asked(tmp_path_factory, records, asked):
    run = tmp_path_factory.mktemp("events")
    write_lines(run / "proc-h-100.jsonl", records)
    for p in read_launches([run]).processes:
        for name in asked:
            got = p.events(name)
            assert got == [r for r in p.records if r["event"] == name]
            got.append({})  # a new list each time: what a caller does with it changes nothing
            assert p.first(name) == next((r for r in p.records if r["event"] == name), None)
