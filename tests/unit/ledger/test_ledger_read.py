"""Reading a launch's ledger files (offline/audit/ledger_read.py): the launch profile from launch.json,
files that are not regular never opened, several directories as one launch, identity (not file name)
telling processes apart."""

from __future__ import annotations

import json
import os

from sglang_eagle_nccl.contract import ledger as contract
from sglang_eagle_nccl.offline.audit.ledger_read import read_ledger


def _dir(tmp_path, name: str):
    d = tmp_path / name
    d.mkdir(mode=0o700)
    return d


def _write(d, name: str, pid: int, lines: list[dict]) -> None:
    head = {"kind": "process", "identity": {"host": "h", "boot_id": "b", "pidns": "1", "pid": pid, "start": "7"},
            "role": "scheduler_TP0", "sglang_version": "0.5.23"}
    (d / contract.file_name(name)).write_text("\n".join(json.dumps(x) for x in [head, *lines]) + "\n")


STEP = {"kind": "step", "phase": "decode", "mode": "eager", "batch": 1, "tokens": 1}


def test_the_launch_profile_and_the_process_header_are_read(tmp_path) -> None:
    d = _dir(tmp_path, "launch")
    (d / "launch.json").write_text(json.dumps({"profile": {"tuner_rules": [{"collective": "allreduce"}]}}))
    _write(d, "a", 1, [{**STEP, "count": 2}, {"kind": "process", "identity": {"host": "h", "boot_id": "b",
           "pidns": "1", "pid": 1, "start": "7"}, "models": {"target": {"layers": 2}}}])
    got = read_ledger([str(d)])
    assert got.profile == {"tuner_rules": [{"collective": "allreduce"}]} and got.files == 1
    (proc,) = got.processes.values()
    assert (proc.role, proc.sglang_version, proc.models) == ("scheduler_TP0", "0.5.23", {"target": {"layers": 2}})
    assert list(proc.counts.values()) == [2]


def test_one_process_in_two_directories_counts_once_with_its_largest_count(tmp_path) -> None:
    a, b = _dir(tmp_path, "node0"), _dir(tmp_path, "node1")
    _write(a, "x", 1, [{**STEP, "count": 2}])
    _write(b, "y", 1, [{**STEP, "count": 5}])
    _write(b, "z", 2, [{**STEP, "count": 1}])
    got = read_ledger([str(b), str(a), str(a)])
    assert got.files == 3
    assert sorted(list(p.counts.values())[0] for p in got.processes.values()) == [1, 5]


def test_a_symlink_or_a_missing_directory_is_listed_never_read(tmp_path) -> None:
    d = _dir(tmp_path, "launch")
    _write(d, "real", 1, [{**STEP, "count": 3}])
    os.symlink(d / contract.file_name("real"), d / contract.file_name("link"))
    (d / "proc-other.jsonl").write_text("not a ledger file\n")
    got = read_ledger([str(d), str(tmp_path / "gone")])
    assert got.files == 1 and len(got.processes) == 1
    assert len(got.unreadable) == 2
    assert any("link" in u and "symbolic link" in u for u in got.unreadable)
    assert any("gone" in u for u in got.unreadable)


def test_a_launch_json_that_is_not_json_leaves_no_profile(tmp_path) -> None:
    d = _dir(tmp_path, "launch")
    (d / "launch.json").write_text("{not json")
    _write(d, "a", 1, [{**STEP, "count": 1}])
    assert read_ledger([str(d)]).profile == {}


def test_a_symlinked_launch_json_is_not_followed(tmp_path) -> None:
    d = _dir(tmp_path, "launch")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"profile": {"tuner_rules": [{"collective": "allreduce"}]}}))
    os.symlink(elsewhere, d / "launch.json")
    _write(d, "a", 1, [{**STEP, "count": 1}])
    assert read_ledger([str(d)]).profile == {}


def test_a_launch_json_without_a_profile_object_leaves_none(tmp_path) -> None:
    d = _dir(tmp_path, "launch")
    (d / "launch.json").write_text(json.dumps({"profile": ["not", "an", "object"]}))
    _write(d, "a", 1, [{**STEP, "count": 1}])
    assert read_ledger([str(d)]).profile == {}


def test_the_first_launch_json_read_is_kept(tmp_path) -> None:
    a, b = _dir(tmp_path, "a"), _dir(tmp_path, "b")
    (a / "launch.json").write_text(json.dumps({"profile": {"name": "first"}}))
    (b / "launch.json").write_text(json.dumps({"profile": {"name": "second"}}))
    assert read_ledger([str(b), str(a)]).profile == {"name": "first"}


def test_zero_counts_blank_lines_and_line_numbers(tmp_path) -> None:
    d = _dir(tmp_path, "launch")
    head = {"kind": "process", "identity": {"host": "h", "boot_id": "b", "pidns": "1", "pid": 1, "start": "7"}}
    path = d / contract.file_name("a")
    path.write_text("\n".join([json.dumps(head), "", json.dumps({**STEP, "count": 0}), "{cut",
                               json.dumps({**STEP, "tokens": 2, "count": 4})]) + "\n")
    got = read_ledger([str(d)])
    (proc,) = got.processes.values()
    assert sorted(proc.counts.values()) == [0, 4]
    assert len(got.unreadable) == 1 and got.unreadable[0].startswith(f"{path}:4: ")
    assert proc.identity == head["identity"] and all("count" not in f for f in proc.lines.values())


def test_invalid_utf8_is_replaced_not_fatal(tmp_path) -> None:
    d = _dir(tmp_path, "launch")
    _write(d, "a", 1, [{**STEP, "count": 2}])
    with open(d / contract.file_name("a"), "ab") as f:
        f.write(b'{"kind": "step", "phase": "\xff"}\n')
    got = read_ledger([str(d)])
    assert len(got.processes) == 1 and len(got.unreadable) == 1
