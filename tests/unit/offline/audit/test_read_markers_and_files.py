"""The reader's rules for disk-full markers, single files and its messages (issue 24 items 5 and 7).

Rules (offline/audit/read.py, records.py):

* a marker ``<file>.disk-full`` (``-required``) beside a record file or a reads log of a launch directory
  says its writer ran out of space: listed as not judged, "disk full on <host>" with the host of the process
  whose records that file holds (else the host part of its name, said to come from the name), once per
  directory and file; any other name ending so is not a marker; under ``audit_required`` the launch fails
  with the problem named, otherwise it is ⚠ at best;
* ``read_record_file`` reads one regular file (never through a symlink) with the table it is given;
* a type check accepts any value of its type, subclasses included (bool is never a number).

Checked against small references written here on generated directories.
"""

from __future__ import annotations

import enum
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.read import read_launch_records, read_launches
from sglang_eagle_nccl.offline.audit.records import (
    READS,
    Budget,
    BudgetExceeded,
    CannotJudge,
    check_of,
    read_record_file,
)
from support.audit_records import reads_header, reads_line, rec, write_lines

ENV = {"NCCL_PROTO": "LL"}
HOSTS = ["node-a", "node.b", "c"]


def _name_host(host: str) -> str:
    # contract/launch_dir.py: a file name carries the host with anything but [A-Za-z0-9._] as '_'
    return "".join(ch if ch.isalnum() or ch in "._" else "_" for ch in host)


def _scheduler(pid: int, host: str) -> list[dict]:
    m = {"host": host}
    return [rec("process_start", pid, machine=m, expected_env=ENV, env=ENV, profile="p"),
            rec("process_role", pid, machine=m, title="sglang::scheduler_TP0"),
            rec("group_created", pid, machine=m, group="tp", ranks=[0, 1], env=ENV, torch_comm="lazy-nccl",
                group_overrides={})]


MARKERS = st.lists(st.tuples(st.sampled_from(["proc-", "nccl-reads-"]), st.sampled_from(HOSTS), st.integers(1, 3),
                             st.booleans(), st.booleans(), st.sampled_from([".disk-full", ".disk-full-required",
                                                                            ".disk-fullx", ".jsonl-disk-full"])),
                   max_size=4, unique_by=lambda m: (m[0], m[1], m[2], m[5]))


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(MARKERS, st.booleans())
def test_disk_full_markers_are_reported_with_their_host_and_fail_only_under_audit_required(tmp_path_factory, markers,
                                                                                       two_dirs):
    base = tmp_path_factory.mktemp("dirs")
    dirs = [base / "d0", base / "d1"] if two_dirs else [base / "d0"]
    for d in dirs:
        d.mkdir()
        (d / "launch.json").write_text(json.dumps({"profile": {"name": "p", "env": ENV}}))
        write_lines(d / "proc-ok-1-99.jsonl", _scheduler(99, "ok"))
    placed = []
    for prefix, host, pid, with_file, in_second, suffix in markers:
        d = dirs[1] if in_second and two_dirs else dirs[0]
        name = f"{prefix}{_name_host(host)}-{pid}.jsonl"
        if with_file and prefix == "proc-":  # the marked file is there, and names its process's host
            write_lines(d / name, _scheduler(pid, host))
        (d / (name + suffix if suffix.startswith(".disk") else name.removesuffix(".jsonl") + suffix)).write_bytes(b"")
        placed.append((d, host, name, suffix))
    expected: set[tuple[str, str, str, bool]] = set()
    for d, host, name, suffix in placed:  # the reference, on what the directories hold in the end
        if suffix in (".disk-full", ".disk-full-required"):
            shown = host if (d / name).exists() else f"{_name_host(host)} (from the file name)"
            expected.add((shown, name, str(d) if two_dirs else "", suffix.endswith("required")))
    launch = read_launches(dirs) if two_dirs else read_launch_records(dirs[0])
    got = {(f.host, f.file, f.directory, f.required) for f in launch.disk_full}
    assert got == expected
    assert len(launch.disk_full) == len(expected)  # each once
    listed = [u for u in launch.unreadable if "disk full on" in u.reason]
    assert sorted((u.file, u.directory, "audit_required" in u.reason) for u in listed) == sorted(
        (e[1], e[2], e[3]) for e in expected)
    for host, name, where, required in expected:
        (entry,) = [u for u in listed if (u.file, u.directory, "audit_required" in u.reason) == (name, where, required)]
        assert entry.reason.startswith(f"disk full on {host}: ")
        (full,) = [f for f in launch.disk_full if (f.file, f.directory, f.required) == (name, where, required)]
        place = f"{where}/{name}" if where else name
        assert full.text().startswith(f"disk full on {host}: a write to {place} failed")
    report = load_report(dirs)
    required = {e for e in expected if e[3]}
    disk_problems = [p for p in report.problems if p.startswith("disk full on")]
    assert len(disk_problems) == len(required)
    if required:
        assert report.verdict == "fail"
    elif expected:
        assert report.verdict != "ok"


def test_a_single_file_is_read_with_the_table_it_is_given_and_never_through_a_symlink(tmp_path):
    reads = write_lines(tmp_path / "nccl-reads-h-100.jsonl", [reads_header(),
                                                                     reads_line("env_init", abi="v2", nccl_version="2")])
    records, bad = read_record_file(reads, READS)
    assert [r["event"] for r in records] == ["reads_log", "env_init"] and bad == []
    records, bad = read_record_file(reads)  # as audit records: not one line fits that table
    assert records == [] and len(bad) == 2 and all(u.file == reads.name for u in bad)
    os.symlink(reads, tmp_path / "link.jsonl")
    records, bad = read_record_file(tmp_path / "link.jsonl")
    assert records is None and [(u.file, u.line) for u in bad] == [("link.jsonl", None)] and "symbolic link" in bad[0].reason


class Level(enum.IntEnum):
    ONE = 1


class Name(str, enum.Enum):
    A = "a"


@pytest.mark.parametrize("field_type, value, ok", [
    ("int", Level.ONE, True), ("num", Level.ONE, True), ("str", Name.A, True), ("int", True, False),
    ("num", False, False), ("num", float("nan"), False), ("str", 1, False), ("bool", 1, False),
])
def test_a_type_check_accepts_any_value_of_its_type_and_never_a_boolean_for_a_number(field_type, value, ok):
    assert (check_of(field_type)(value) is None) == ok


def test_a_budget_exceeded_names_its_kind_and_limit():
    budget = Budget({"files": 3})
    budget.take("files", 3)
    with pytest.raises(BudgetExceeded) as err:
        budget.take("files", 1)
    assert (err.value.kind, err.value.limit) == ("files", 3) and "--budget files=N" in str(err.value)


def test_a_set_of_directories_with_no_valid_record_is_refused_naming_each(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
        (d / "proc-h-1.jsonl").write_text("junk\n")
    with pytest.raises(CannotJudge, match=rf"no valid audit record could be read in {dirs[0]}, {dirs[1]} "):
        read_launches(dirs)


def test_paths_are_strings_or_paths(tmp_path: Path):
    d = tmp_path / "one"
    d.mkdir()
    write_lines(d / "proc-h-1.jsonl", _scheduler(1, "h"))
    assert read_launches([str(d)]).run_dirs == read_launches([d]).run_dirs == [str(d)]
