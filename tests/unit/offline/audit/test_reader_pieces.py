"""The reader's two deciding pieces, each against a small reference written here (offline/audit/read.py's
docstring states the rules):

- a reads log is one process's reads only from its identity line on: every later line of another pid
  (or a second identity line) is listed as foreign, the first LISTED_PER_FILE one by one, the rest as
  one "... and N more" entry; the lines of its own pid fill the process's reads (the last ``env_init``
  and ``counts`` win, ``read`` and ``tuner_init`` lines are kept in order);
- copies are reconciled, never chosen (rule 3): the versions of a process are the copies no other copy
  extends, each standing for its identical copies and its prefixes; more than one place is a note, more
  than one version a conflict; the result does not depend on the order of the copies (rule 1).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle_nccl.contract.launch_dir import DISK_FULL_SUFFIX, process_file_name
from sglang_eagle_nccl.offline.audit.read import (
    CopyNote,
    _Copy,
    _read_dir,
    _reads_of,
    _reconcile,
    read_launches,
)
from sglang_eagle_nccl.offline.audit.records import LISTED_PER_FILE, Budget, BudgetExceeded
from support.audit_records import ident, reads_header, reads_line, rec, write_lines

PID = 100
NAME = "nccl-reads-h-100.jsonl"
TEXT = st.sampled_from(["a", "b", "LL"])
OPT_TEXT = st.none() | TEXT


# --- a reads log ------------------------------------------------------------------------------------------


@st.composite
def reads_lines(draw) -> list[dict]:
    """The lines after the identity line: each of this pid or another, of any event of the reads table."""
    out = []
    for event, own in draw(st.lists(st.tuples(st.sampled_from(["reads_log", "env_init", "read", "tuner_init",
                                                                "counts"]), st.booleans()), max_size=28)):
        pid = PID if own else draw(st.sampled_from([1, 99, 101]))
        if event == "reads_log":
            out.append(reads_header(PID if own else pid))
        elif event == "env_init":
            out.append(reads_line(event, pid, abi=draw(TEXT), nccl_version=draw(TEXT)))
        elif event == "read":
            out.append(reads_line(event, pid, name=draw(TEXT), value=draw(OPT_TEXT), source=draw(TEXT),
                                  environment=draw(OPT_TEXT), disagrees=draw(st.booleans())))
        elif event == "tuner_init":
            out.append(reads_line(event, pid, abi=draw(st.integers(0, 3)), nranks=draw(st.integers(1, 8)),
                                  nnodes=draw(st.integers(1, 2)), rules=draw(st.integers(0, 5)),
                                  group=draw(OPT_TEXT), comm_id=draw(TEXT)))
        else:
            out.append(reads_line(event, pid, unrecorded=draw(st.integers(0, 9)), reads=[
                {"name": draw(TEXT), "value": draw(OPT_TEXT), "source": draw(TEXT), "environment": None,
                 "count": draw(st.integers(1, 50))} for _ in range(draw(st.integers(0, 2)))]))
    return out


def reference_reads(lines: list[dict]) -> tuple[dict, list[str]]:
    """What the process read, and the foreign lines' (number, event) as listed: from the lines alone."""
    got: dict = {"env_init": None, "reads": [], "tuner_inits": [], "counts": {}, "unrecorded": 0}
    foreign = []
    for number, line in enumerate(lines, start=2):  # line 1 is the identity line
        if line["event"] == "reads_log" or line["pid"] != PID:
            foreign.append(f"record {number} ({line['event']})")
        elif line["event"] == "env_init":
            got["env_init"] = line
        elif line["event"] == "read":
            got["reads"].append({k: line[k] for k in ("name", "value", "source", "environment", "disagrees")})
        elif line["event"] == "tuner_init":
            got["tuner_inits"].append({k: line[k] for k in ("abi", "nranks", "nnodes", "rules", "group", "comm_id")})
        else:
            got["counts"] = {(r["name"], r["value"], r["source"]): r["count"] for r in line["reads"]}
            got["unrecorded"] = line["unrecorded"]
    listed = foreign[:LISTED_PER_FILE]
    if len(foreign) > LISTED_PER_FILE:
        listed.append(f"... and {len(foreign) - LISTED_PER_FILE} more record(s)")
    return got, listed


@given(reads_lines())
def test_a_reads_log_is_its_pids_lines_after_the_identity_line_and_the_rest_is_listed(lines):
    bad: list = []
    proc = _reads_of(NAME, [reads_header(PID), *lines], bad)
    want, listed = reference_reads(lines)
    assert proc is not None and proc.identity == ident(PID) and proc.file == NAME and proc.pid == PID
    assert {k: getattr(proc, k) for k in want} == want
    assert len(bad) == len(listed)
    for entry, expected in zip(bad, listed, strict=True):
        assert entry.file == NAME and entry.line is None and entry.reason.startswith(expected)
        assert f"pid {PID}" in entry.reason


@given(reads_lines())
def test_a_reads_log_without_its_identity_line_first_is_nobodys(lines):
    for records in ([], lines) if not lines or lines[0]["event"] != "reads_log" else ([],):
        bad: list = []
        assert _reads_of(NAME, records, bad) is None
        assert [(u.file, u.line) for u in bad] == [(NAME, None)] and "no identity line first" in bad[0].reason


# --- copies of one process's evidence -----------------------------------------------------------------------

PLACES = [(d, f) for d in ("/r/a", "/r/b", "/r/c") for f in ("proc-h-100.jsonl", "proc-h-100 (copy).jsonl")]


def _records(values: list[int]) -> list[dict]:
    return [{"event": "x", "n": v, **ident(PID)} for v in values]


COPIES = st.lists(st.tuples(st.sampled_from(PLACES), st.lists(st.integers(0, 2), max_size=4)), min_size=1,
                  max_size=6, unique_by=lambda c: c[0])


def reference_versions(copies: list[tuple[tuple[str, str], list[int]]], several: bool) -> set:
    """{(content, its identical copies' places, its prefixes' places)} for each copy no other copy extends."""
    def place(where: tuple[str, str]) -> str:
        return f"{where[0]}/{where[1]}" if several else where[1]

    def extends(longer: list[int], shorter: list[int]) -> bool:
        return len(longer) > len(shorter) and longer[:len(shorter)] == shorter

    out = set()
    for _, content in copies:
        if any(extends(other, content) for _, other in copies):
            continue
        same = tuple(place(w) for w in sorted(w for w, c in copies if c == content))
        prefixes = tuple(sorted(place(w) for w, c in copies if extends(content, c)))
        out.add((tuple(content), same, prefixes))
    return out


@given(COPIES, st.booleans(), st.randoms(use_true_random=False), st.booleans())
def test_copies_are_reconciled_into_the_versions_no_copy_extends_whatever_their_order(copies, several, rnd, reads):
    def build(order):
        return [_Copy(d, f, ident(PID), _records(c), reads=object() if reads else None) for (d, f), c in order]

    versions, note, key = _reconcile(build(copies), several)
    want = reference_versions(copies, several)
    got = set()
    for copy, places in versions:
        content = tuple(r["n"] for r in copy.records)
        identical = sum(1 for _, c in copies if tuple(c) == content)
        got.add((content, tuple(places[:identical]), tuple(places[identical:])))
        assert copy.identity == ident(PID)
    assert got == want
    assert key == "/".join(str(ident(PID)[k]) for k in ("host", "boot_id", "pidns", "pid", "start"))
    if len(copies) == 1:
        assert note is None
    else:
        assert note is not None and note.process == key and note.kind == ("reads" if reads else "records")
        assert {(tuple(v)) for v in note.versions} == {w[1] for w in want}
        assert list(note.prefixes) == sorted({p for w in want for p in w[2]})
        assert note.conflict == (len(want) > 1)
    shuffled = list(copies)
    rnd.shuffle(shuffled)
    again, note_again, _ = _reconcile(build(shuffled), several)
    assert [([r["n"] for r in c.records], p) for c, p in again] == [([r["n"] for r in c.records], p)
                                                                     for c, p in versions]
    assert note_again == note


def test_identical_copies_are_one_version_that_names_every_place_in_place_order():
    copies = [_Copy(d, "proc-h-100.jsonl", ident(PID), _records([1, 2])) for d in ("/r/c", "/r/a", "/r/b")]
    versions, note, _ = _reconcile(copies, True)
    assert [places for _, places in versions] == [["/r/a/proc-h-100.jsonl", "/r/b/proc-h-100.jsonl",
                                                   "/r/c/proc-h-100.jsonl"]]
    assert versions[0][0].directory == "/r/a"  # the first place stands for them
    assert note is not None and not note.conflict and note.prefixes == ()
    assert json.loads(json.dumps(note.to_dict()))["versions"] == [[p for p in versions[0][1]]]


# --- what a disk-full marker names, the budget, the note's words --------------------------------------------


def test_a_marker_without_records_names_the_host_part_of_the_writers_file_name(tmp_path):
    # contract/launch_dir.py names a file <host>-<boot>-<pidns>-<start>-<pid>, the host with '-' made '_':
    # the host is what comes before the first dash, without the suffix.
    machine = {"host": "gpu-node-7", "boot_id": "b" * 32, "pidns": "4026531836"}
    name = process_file_name({**machine, "pid": 7, "start": "1007"})
    (tmp_path / (name + DISK_FULL_SUFFIX)).write_bytes(b"")
    (tmp_path / ("proc-solo.jsonl" + DISK_FULL_SUFFIX)).write_bytes(b"")  # a name with no dash at all
    evidence = _read_dir(tmp_path, Budget())
    assert sorted((f.host, f.file) for f in evidence.disk_full) == [
        ("gpu_node_7 (from the file name)", name), ("solo (from the file name)", "proc-solo.jsonl")]


def test_the_budget_given_is_the_one_the_whole_audit_spends(tmp_path):
    write_lines(tmp_path / "proc-h-100.jsonl", [rec("process_role", title="x")])
    assert read_launches([tmp_path], Budget({"files": 1})).processes  # one file: within
    with pytest.raises(BudgetExceeded) as err:
        read_launches([tmp_path], Budget({"files": 0}))
    assert err.value.kind == "files"


def test_a_note_lists_every_prefix_copy():
    note = CopyNote("records", "h/b/p/1/2", (("/a/f",),), ("/b/f", "/c/f"))
    assert note.text() == "records of process h/b/p/1/2: counted once from /a/f; prefix copies /b/f, /c/f"
