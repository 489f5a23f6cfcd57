"""Audit writers in 16 concurrent spawned processes lose no record and never interleave."""

from __future__ import annotations

import multiprocessing as mp

from sglang_eagle_nccl.contract.launch_dir import new_launch_dir
from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
from support.jsonl import read_jsonl

RECORDS = 300


def _writer(run_dir: str, index: int) -> None:
    w = AuditWriter(run_dir)
    payload = "x" * 2000  # longer than a pipe buffer page would allow to stay atomic by luck
    for i in range(RECORDS):
        assert w.write("tick", writer=index, seq=i, payload=payload)


def test_sixteen_writers_lose_nothing(tmp_path):
    run = new_launch_dir(tmp_path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(run), i)) for i in range(16)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    files = sorted(run.glob("proc-*.jsonl"))
    assert len(files) == 16
    seen = set()
    for f in files:
        for rec in read_jsonl(f):  # an interleaved line would not parse
            seen.add((rec["writer"], rec["seq"]))
    assert len(seen) == 16 * RECORDS


def test_two_launches_sharing_a_root_never_mix(tmp_path):
    a, b = new_launch_dir(tmp_path), new_launch_dir(tmp_path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(d), i)) for i, d in enumerate([a, a, b, b])]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    for d, writers in ((a, {0, 1}), (b, {2, 3})):
        found = {
            r["writer"] for f in d.glob("proc-*.jsonl") for r in read_jsonl(f)
        }
        assert found == writers
