"""What one node sends back when its launch directory is gathered through Ray (offline/ray_collect.py):
the record files a launch directory holds, read under the audit's rules -- never a symlink, a FIFO or
anything else a node's directory happens to contain."""

from __future__ import annotations

import os

from sglang_eagle_nccl.offline.ray_collect import read_node


def test_a_node_sends_only_the_launch_directorys_record_files(tmp_path):
    run = tmp_path / "launch"
    run.mkdir()
    (run / "launch.json").write_text("{}")
    (run / "proc-h-1.jsonl").write_text("{}\n")
    (run / "nccl-reads-h-1.jsonl").write_text("{}\n")
    (run / "notes.txt").write_text("not a record")
    (run / "proc-link.jsonl").symlink_to("/etc/hostname")
    os.mkfifo(run / "proc-fifo.jsonl")
    (run / "proc-dir.jsonl").mkdir()
    out = read_node(str(run))
    assert sorted(out["files"]) == ["launch.json", "nccl-reads-h-1.jsonl", "proc-h-1.jsonl"]
    problems = " ".join(out["problems"])
    assert "proc-link.jsonl: a symbolic link" in problems and "proc-fifo.jsonl: a FIFO" in problems
    assert "proc-dir.jsonl: a directory" in problems
    assert out["host"] == os.uname().nodename and out["seconds"] >= 0


def test_a_node_without_the_launch_directory_says_so(tmp_path):
    out = read_node(str(tmp_path / "missing"))
    assert out["files"] == {} and "no launch directory" in out["problems"][0]
