"""Per-host decisions of the NCCL debug cross-check (offline/audit/nccl_cross_check.py) and what one node
sends when a launch is gathered through Ray (offline/ray_collect.py: read_node, the name rule, the summary)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.nccl_cross_check import cross_check, nccl_host, per_process
from sglang_eagle_nccl.offline.ray_collect import MAX_FILES, Collected, NodeFiles, _wanted, read_node
from support.audit_records import rec, write_lines

ENV = {"NCCL_PROTO": "LL"}
META = {"profile": {"name": "p", "env": ENV, "policy": {"sglang_wins": []}}}


def started(pid: int, expected: dict, env: dict | None = None, host: str = "h") -> dict:
    return rec(
        "process_start", pid, machine={"host": host}, expected_env=expected, env=env or expected, profile="p"
    )


def launch(path: Path, procs: dict[int, dict], meta: dict | None = META) -> Path:
    path.mkdir(parents=True)
    if meta is not None:
        (path / "launch.json").write_text(json.dumps(meta))
    for pid, first in procs.items():
        write_lines(path / f"proc-h-{pid}.jsonl", [first])
    return path


def debug_dir(path: Path, lines: dict[tuple[str, int], str]) -> Path:
    """NCCL_DEBUG_FILE output: one file per (host, pid), NCCL_PROTO as NCCL says it read it."""
    path.mkdir(parents=True)
    for (host, pid), proto in lines.items():
        (path / f"nccl.{host}.{pid}.log").write_text(
            f"{host}:{pid}:{pid} [0] NCCL INFO NCCL_PROTO set by environment to {proto}.\n"
        )
    return path


def found(result: dict) -> list[tuple]:
    return [(d["kind"], d["host"], d["pid"], d["expected"], d["reported"]) for d in result["disagreements"]]


# --- nccl_cross_check ---------------------------------------------------------------------------------------


def test_nccl_host_is_the_name_cut_at_its_first_dot():
    assert nccl_host("node1.cluster.example") == "node1"
    assert nccl_host("node1") == "node1"


def test_per_process_keys_by_nccls_host_name_and_pid_the_env_and_the_expectation(tmp_path):
    run = launch(tmp_path / "run", {100: started(100, ENV, {"NCCL_PROTO": "Simple"}, host="n1.example")})
    assert per_process([str(run)]) == (
        {("n1", 100): {"NCCL_PROTO": "Simple"}},
        {("n1", 100): ENV},
    )


def test_a_process_nccl_logged_that_was_not_audited_is_held_to_the_launch_profile_per_host(tmp_path):
    run = launch(tmp_path / "run", {100: started(100, ENV)})
    debug = debug_dir(tmp_path / "debug", {("h", 100): "LL", ("h", 999): "Simple", ("h2", 100): "LL"})
    result = cross_check(load_report(run), str(debug))
    assert set(result) == {"ok", "processes", "disagreements", "text"}
    assert result["ok"] is False and result["processes"] == 3
    assert found(result) == [
        ("different", "h", 999, "LL", "Simple"),
        ("process_not_audited", "h", 999, None, None),
        ("process_not_audited", "h2", 100, None, None),
    ]
    assert result["text"].startswith(f"NCCL's own debug output ({debug})\n")
    assert "h:100 NCCL" in result["text"]  # one line per process NCCL logged
    assert "no NCCL debug files found" not in result["text"]


def test_each_process_is_held_to_its_own_expectation_not_the_launch_profile(tmp_path):
    per_node = {"NCCL_PROTO": "Simple"}
    run = launch(tmp_path / "run", {100: started(100, per_node)})
    agree = cross_check(load_report(run), str(debug_dir(tmp_path / "debug", {("h", 100): "Simple"})))
    assert (agree["ok"], agree["disagreements"]) == (True, [])


def test_every_launch_directory_of_the_report_is_audited(tmp_path):
    a = launch(tmp_path / "a", {100: started(100, ENV)})
    b = launch(tmp_path / "b", {200: started(200, ENV)})
    debug = debug_dir(tmp_path / "debug", {("h", 100): "LL", ("h", 200): "LL"})
    result = cross_check(load_report([a, b]), str(debug))
    assert (result["ok"], result["disagreements"]) == (True, [])


def test_a_launch_profile_without_env_holds_processes_to_their_own(tmp_path):
    run = launch(tmp_path / "run", {100: started(100, ENV)}, meta={"profile": {"name": "p"}})
    result = cross_check(load_report(run), str(debug_dir(tmp_path / "debug", {("h", 100): "LL"})))
    assert (result["ok"], result["disagreements"]) == (True, [])


# --- ray_collect: what a node sends ----------------------------------------------------------------------


def test_only_launch_directory_names_are_wanted():
    assert _wanted("launch.json") and _wanted("proc-h-1.jsonl") and _wanted("nccl-reads-h-1.jsonl")
    assert not _wanted("proc-h-1.txt")
    assert not _wanted("other-h-1.jsonl")
    assert not _wanted("proc-a/b.jsonl")  # a name sent back by another process may carry a path


def test_a_node_outside_ray_sends_its_files_under_the_local_node_id(tmp_path):
    run = tmp_path / "launch"
    run.mkdir()
    (run / "proc-h-1.jsonl").write_text("{}\n")
    (run / "proc-h-1.txt").write_text("no")
    (run / "other-h-1.jsonl").write_text("no")
    before = time.monotonic()
    out = read_node(str(run))
    took = time.monotonic() - before
    assert set(out) == {"node_id", "host", "files", "problems", "seconds"}
    assert out["node_id"] == "local"
    assert out["files"] == {"proc-h-1.jsonl": b"{}\n"} and out["problems"] == []
    assert 0 <= out["seconds"] <= took


def test_a_missing_launch_directory_is_named_with_the_systems_words(tmp_path):
    missing = tmp_path / "missing"
    out = read_node(str(missing))
    assert out["problems"] == [f"no launch directory {missing} on this node (No such file or directory)"]


def test_a_node_sends_max_files_and_says_so_only_past_it(tmp_path):
    run = tmp_path / "launch"
    run.mkdir()
    for n in range(MAX_FILES):
        (run / f"proc-h-{n:05d}.jsonl").write_bytes(b"")
    out = read_node(str(run))
    assert len(out["files"]) == MAX_FILES and out["problems"] == []
    (run / f"proc-h-{MAX_FILES:05d}.jsonl").write_bytes(b"")
    out = read_node(str(run))
    assert len(out["files"]) == MAX_FILES
    assert f"proc-h-{MAX_FILES:05d}.jsonl" not in out["files"]
    assert out["problems"] == [f"more than {MAX_FILES} record files: the rest were not sent"]


def test_the_summary_names_each_node_by_host_and_short_id():
    nodes = [
        NodeFiles("0123456789abcdef", "n1", 0.5, {"a": b"", "b": b""}),
        NodeFiles("fedcba9876543210", "n2", 1.25),
    ]
    got = Collected("/dest", nodes, [], 2.0, "10.0.0.1:6379").summary()
    assert got == (
        "gathered through the Ray cluster at 10.0.0.1:6379 from 2 node(s) in 2.00s: "
        "n1 (01234567): 2 file(s) in 0.50s, n2 (fedcba98): 0 file(s) in 1.25s"
    )
    assert Collected("/dest", nodes, [], 2.0).summary().startswith("gathered through the Ray cluster at an unnamed "
                                                                   "address from 2 node(s)")
