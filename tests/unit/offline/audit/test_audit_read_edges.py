"""The launch directory reader's decisions at their edges (offline/audit/read.py, records.py): which
reads log belongs to which process and which is refused (naming the file and the line), which launch
sub-directory is picked, what several launch directories merge into, and the exact words of a refusal."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from sglang_eagle_nccl.offline.audit.read import find_launch_dir, merge, read_launch_records
from sglang_eagle_nccl.offline.audit.records import (
    CannotJudge,
    Unreadable,
    entry_kind,
    list_entries,
    pid_from_file_name,
    read_meta,
    read_record_file,
)
from support.audit_records import ident, reads_file, reads_header, reads_line, rec, write_lines

ENV = {"NCCL_PROTO": "LL"}
META = {"profile": {"name": "p", "env": ENV, "policy": {"sglang_wins": []}}}
FIX = "Fix: give the launch directory printed at start, or its audit root"


def started(pid: int = 100, **fields) -> dict:
    return rec("process_start", pid, expected_env=ENV, env=ENV, profile="p", **fields)


def declares_log(pid: int = 100) -> dict:
    return rec("nccl_reads_log", pid, file=reads_file(pid))


def a_read(name: str = "NCCL_PROTO", value: str = "LL", pid: int = 100) -> dict:
    return reads_line(
        "read", pid, name=name, value=value, source="profile", environment=value, disagrees=False
    )


def launch_dir(path: Path, procs: dict[str, list], meta: dict | None = META) -> Path:
    path.mkdir(parents=True)
    if meta is not None:
        (path / "launch.json").write_text(json.dumps(meta))
    for name, lines in procs.items():
        write_lines(path / name, lines)
    return path


# --- NCCL's reads log: whose it is, and which of its lines are refused ---------------------------------


def test_a_declared_reads_log_is_read_whole_into_its_process(tmp_path):
    run = launch_dir(tmp_path / "run", {"proc-h-100.jsonl": [started(), declares_log()]})
    counts = [{"name": "NCCL_PROTO", "value": "LL", "source": "profile", "environment": "LL", "count": 4}]
    write_lines(
        run / reads_file(),
        [
            reads_header(),
            reads_line("env_init", abi="v2", nccl_version="2.28.9"),
            reads_line(
                "read", name="NCCL_PROTO", value="LL", source="profile", environment="Simple", disagrees=True
            ),
            reads_line("tuner_init", abi=3, nranks=8, nnodes=2, rules=1, group="tp", comm_id="c1"),
            reads_line("counts", reads=counts, unrecorded=2),
        ],
    )
    launch = read_launch_records(run)
    assert launch.unreadable == []
    (got,) = launch.reads.values()
    who = ident(100)
    assert got.to_dict() == {
        "process": f"h/{who['boot_id']}/{who['pidns']}/100/{who['start']}",
        "pid": 100,
        "host": "h",
        "file": reads_file(),
        "nccl_version": "2.28.9",
        "env_plugin_abi": "v2",
        "reads": [
            {
                "name": "NCCL_PROTO",
                "value": "LL",
                "source": "profile",
                "environment": "Simple",
                "disagrees": True,
                "count": 4,
            }
        ],
        "tuner_inits": [{"abi": 3, "nranks": 8, "nnodes": 2, "rules": 1, "group": "tp", "comm_id": "c1"}],
        "unrecorded": 2,
        "places": [reads_file()],
        "conflicts": [],
    }


def test_lines_of_another_pid_or_a_second_identity_line_are_refused_by_line_number(tmp_path):
    run = launch_dir(tmp_path / "run", {"proc-h-100.jsonl": [started(), declares_log()]})
    write_lines(
        run / reads_file(), [reads_header(), a_read(pid=200), {**reads_header(), "time": 2.0}, a_read("NCCL_ALGO", "Ring")]
    )
    launch = read_launch_records(run)
    name = reads_file()
    assert launch.unreadable == [
        Unreadable(name, None, "record 2 (read) is not from pid 100, whose reads log this is"),
        Unreadable(name, None, "record 3 (reads_log) is not from pid 100, whose reads log this is"),
    ]
    # the lines after a refused one are still read
    (got,) = launch.reads.values()
    assert [r["name"] for r in got.reads] == ["NCCL_ALGO"]


def test_a_reads_log_without_its_identity_line_first_is_refused_by_name(tmp_path):
    run = launch_dir(tmp_path / "run", {"proc-h-100.jsonl": [started(), declares_log()]})
    write_lines(run / reads_file(), [a_read()])
    launch = read_launch_records(run)
    assert launch.reads == {}
    assert launch.unreadable == [
        Unreadable(reads_file(), None, "no identity line first: cannot tell whose NCCL reads these are")
    ]


def test_a_reads_log_of_no_audited_process_is_refused_by_name(tmp_path):
    run = launch_dir(tmp_path / "run", {"proc-h-100.jsonl": [started()]})
    write_lines(run / reads_file(300), [reads_header(300), a_read(pid=300)])
    launch = read_launch_records(run)
    assert launch.reads == {}
    assert launch.unreadable == [
        Unreadable(
            reads_file(300), None, "NCCL's reads log of a process that left no audit records (not judged)"
        )
    ]


def test_a_reads_log_its_process_did_not_declare_is_refused_by_name(tmp_path):
    run = launch_dir(tmp_path / "run", {"proc-h-100.jsonl": [started()]})
    write_lines(run / reads_file(), [reads_header(), a_read()])
    launch = read_launch_records(run)
    assert launch.reads == {}
    assert launch.unreadable == [
        Unreadable(
            reads_file(),
            None,
            "a reads log pid 100 did not declare creating (not judged: not written by the plugin for that process)",
        )
    ]


# --- one launch directory --------------------------------------------------------------------------------


def test_two_files_of_one_process_that_disagree_are_two_versions_each_with_its_bad_lines(tmp_path):
    run = launch_dir(
        tmp_path / "run",
        {
            "proc-h-100.jsonl": [started(), "not json"],
            "proc-h-100-b.jsonl": [rec("process_role", title="x"), "{"],
        },
    )
    first, second = read_launch_records(run).processes  # in an order fixed by their content
    assert [first.files, second.files] == [["proc-h-100.jsonl"], ["proc-h-100-b.jsonl"]]
    assert first.bad_lines == second.bad_lines == 1
    assert first.conflicts == [["proc-h-100-b.jsonl"]] and second.conflicts == [["proc-h-100.jsonl"]]


def test_a_file_that_is_a_prefix_of_another_copy_counts_as_the_longer_one(tmp_path):
    run = launch_dir(
        tmp_path / "run",
        {"proc-h-100.jsonl": [started(), declares_log()], "proc-h-100 (copy).jsonl": [started()]},
    )
    launch = read_launch_records(run)
    (proc,) = launch.processes
    assert proc.conflicts == [] and proc.places == ["proc-h-100.jsonl", "proc-h-100 (copy).jsonl"]
    assert [r["event"] for r in proc.records] == ["process_start", "nccl_reads_log"]
    (note,) = launch.copies
    assert note.to_dict()["prefixes"] == ["proc-h-100 (copy).jsonl"] and not note.conflict


def test_a_directory_without_record_files_is_an_empty_launch_not_a_refusal(tmp_path):
    empty = read_launch_records(launch_dir(tmp_path / "empty", {}, meta=None))
    assert (empty.meta, empty.processes, empty.unreadable, empty.metas) == ({}, [], [], [])
    only_meta = read_launch_records(launch_dir(tmp_path / "meta", {}))
    assert (only_meta.meta, only_meta.metas) == (META, [META])


def test_metas_lists_no_launch_json_when_there_is_none(tmp_path):
    launch = read_launch_records(launch_dir(tmp_path / "run", {"proc-h-100.jsonl": [started()]}, meta=None))
    assert launch.meta == {} and launch.metas == []


@pytest.mark.parametrize("bad", [5, 6])
def test_the_refusal_of_an_unreadable_launch_names_its_first_five_problems(tmp_path, bad):
    run = launch_dir(tmp_path / "run", {"proc-h-1.jsonl": [f"junk {n}" for n in range(bad)]}, meta=None)
    _, problems = read_record_file(run / "proc-h-1.jsonl")
    assert len(problems) == bad
    lines = "; ".join(u.text() for u in problems[:5]) + ("; ..." if bad == 6 else "")
    with pytest.raises(CannotJudge) as caught:
        read_launch_records(run)
    assert f"no valid audit record could be read in {run} ({lines}). Fix: audit" in str(caught.value)


# --- several launch directories as one -------------------------------------------------------------------


def test_merge_reconciles_copies_lists_places_and_chooses_the_meta_by_content(tmp_path):
    first = started(ts=2.0)
    same_reordered = dict(reversed(list(first.items())))
    meta_b = {"profile": {"name": "other", "env": {"NCCL_PROTO": "Simple"}}}
    a = launch_dir(tmp_path / "a", {"proc-h-100.jsonl": [first, "junk"]})
    b = launch_dir(
        tmp_path / "b",
        {"proc-h-100-copy.jsonl": [same_reordered, rec("process_role", title="sglang::x", ts=1.0), "junk"]},
        meta=meta_b,
    )
    for order in ([a, b], [b, a]):
        merged = merge([read_launch_records(d) for d in order])
        assert merged.meta == META  # by content (canonical JSON: "LL" < "Simple"), never by position
        assert merged.metas == [META, meta_b]
        assert merged.run_dirs == [str(a), str(b)]
        assert [u.place for u in merged.unreadable] == [f"{a}/proc-h-100.jsonl", f"{b}/proc-h-100-copy.jsonl"]
        (proc,) = merged.processes  # the same record in another key order: one line, a prefix of b's copy
        assert proc.files == ["proc-h-100-copy.jsonl", "proc-h-100.jsonl"]
        assert proc.places == [f"{b}/proc-h-100-copy.jsonl", f"{a}/proc-h-100.jsonl"]
        assert proc.bad_lines == 1
        assert [r["event"] for r in proc.records] == ["process_start", "process_role"]


def test_merge_of_launches_without_launch_json_has_an_empty_object_as_meta(tmp_path):
    a = launch_dir(tmp_path / "a", {"proc-h-100.jsonl": [started()]}, meta=None)
    merged = merge([read_launch_records(a)])
    assert isinstance(merged.meta, dict) and merged.meta == {}
    assert merge([]).meta == {}


# --- finding the launch ----------------------------------------------------------------------------------


def test_a_missing_audit_directory_is_refused_with_the_systems_words(tmp_path):
    missing = tmp_path / "missing"
    with pytest.raises(CannotJudge) as caught:
        find_launch_dir(missing)
    assert f"audit directory {missing} cannot be used: No such file or directory. {FIX}" in str(caught.value)


def test_a_path_with_a_nul_byte_is_refused_not_a_crash():
    with pytest.raises(CannotJudge) as caught:
        find_launch_dir("bad\0path")
    assert f"cannot be used: embedded null byte. {FIX}" in str(caught.value)


def test_a_file_next_to_the_launch_sub_directory_is_passed_over(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a-notes.txt").write_text("not a launch")
    launch = launch_dir(root / "launch1", {"proc-h-100.jsonl": [started()]})
    (root / "z-newer-but-empty").mkdir()  # a directory holding no records is no launch, however new
    assert find_launch_dir(root) == launch


def test_the_newest_launch_sub_directory_is_picked_by_time_not_by_name(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    newer = launch_dir(root / "a", {"proc-h-100.jsonl": [started()]})
    older = launch_dir(root / "b", {"proc-h-100.jsonl": [started()]})
    os.utime(older, (1_000_000, 1_000_000))
    os.utime(newer, (2_000_000, 2_000_000))
    assert find_launch_dir(root) == newer


@contextlib.contextmanager
def unprivileged():
    """Root reads any directory: drop the effective uid (kept as the saved one) for the block."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_a_sub_directory_that_cannot_be_listed_is_passed_over():
    root = Path(tempfile.mkdtemp())
    try:
        root.chmod(0o755)
        locked = root / "a"
        locked.mkdir(mode=0o755)
        (locked / "proc-h-1.jsonl").write_text("")
        locked.chmod(0)
        launch = launch_dir(root / "b", {"proc-h-100.jsonl": [started()]})
        launch.chmod(0o755)
        with unprivileged():
            got = find_launch_dir(root)
        assert got == launch
    finally:
        (root / "a").chmod(0o755)
        shutil.rmtree(root)


# --- records.py: the file rules ---------------------------------------------------------------------------


def test_entry_kind_names_a_file_a_directory_and_a_vanished_entry(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "gone").write_text("x")
    entries = {e.name: e for e in list_entries(tmp_path)}
    (tmp_path / "gone").unlink()
    assert entry_kind(entries["f"]) == "file"
    assert entry_kind(entries["d"]) == "dir"
    assert entry_kind(entries["gone"]) == "No such file or directory"


def test_list_entries_refuses_a_missing_directory_with_the_systems_words(tmp_path):
    missing = tmp_path / "missing"
    with pytest.raises(CannotJudge) as caught:
        list_entries(missing)
    assert str(caught.value) == (
        f"cannot list {missing}: No such file or directory. Fix: check the path and that you may read it"
    )


def test_pid_from_file_name_takes_the_last_dash_part_or_the_whole_name():
    assert pid_from_file_name("proc-h-a-7.jsonl") == 7
    assert pid_from_file_name("12345") == 12345
    assert pid_from_file_name("proc-h-x.jsonl") is None


def test_read_meta_says_why_launch_json_was_not_read(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    assert read_meta(not_a_dir) == ({}, [Unreadable("launch.json", None, "Not a directory")])

    linked = tmp_path / "linked"
    linked.mkdir()
    (tmp_path / "elsewhere.json").write_text(json.dumps(META))
    (linked / "launch.json").symlink_to(tmp_path / "elsewhere.json")
    assert read_meta(linked) == ({}, [Unreadable("launch.json", None, "a symbolic link, not a regular file")])

    binary = tmp_path / "binary"
    binary.mkdir()
    (binary / "launch.json").write_bytes(b'{"launcher": "\xff"}')
    assert read_meta(binary) == ({}, [Unreadable("launch.json", None, "not UTF-8 text")])
