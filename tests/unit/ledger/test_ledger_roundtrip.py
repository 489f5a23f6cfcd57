"""Aggregation rule (inproc/evidence/ledger.py) and the reader's rule (offline/audit/ledger_read.py):
generated runs of steps and collectives go through the real writer into a real launch directory,
flushed at random points; the reader's counts and the per-step view equal a reference count made
here, whatever the flush points, the order of the lines, a duplicated file or a cut last line."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.contract import ledger as contract
from sglang_eagle_nccl.contract.launch_dir import file_stem, identity
from sglang_eagle_nccl.inproc.evidence.ledger import Ledger
from sglang_eagle_nccl.offline.audit.ledger_join import summarize
from sglang_eagle_nccl.offline.audit.ledger_read import LaunchLedger, parse_lines, read_ledger
from support.jsonl import read_jsonl

PHASES = ["target verify", "decode", "extend", "draft extend"]
collective = st.tuples(st.sampled_from(["all_reduce", "all_gather"]), st.sampled_from(["tp:0", "attn_tp:0"]),
                       st.sampled_from([256, 640, 43008]), st.sampled_from(["gloo", "shm", "pynccl"]))
step = st.tuples(st.sampled_from(PHASES), st.sampled_from([1, 2]), st.sampled_from([3, 5, 8]),
                 st.lists(collective, max_size=6), st.booleans(), st.booleans())
runs = st.lists(step, min_size=1, max_size=25)


def _run(ledger: Ledger, steps: list) -> tuple[Counter, Counter]:
    """Feed the writer; count the reference at the same time (completed steps only)."""
    ref_steps: Counter = Counter()
    ref_colls: Counter = Counter()
    for phase, batch, tokens, colls, completed, flush in steps:
        ctx = ledger.enter(phase, "eager", batch, tokens)
        for op, group, nbytes, impl in colls:
            ledger.collective(op, group, 2, nbytes, "bfloat16", impl)
            ref_colls[(phase, batch, tokens, op, group, nbytes, impl)] += 1
        ledger.leave(ctx, completed=completed)
        if completed:
            ref_steps[(phase, batch, tokens)] += 1
        if flush:
            assert ledger.flush()
    return ref_steps, ref_colls


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "launch"
    d.mkdir(mode=0o700)
    return str(d)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs, st.randoms())
def test_reader_counts_equal_the_reference(run_dir: str, steps: list, rnd: random.Random) -> None:
    for name in os.listdir(run_dir):
        os.unlink(os.path.join(run_dir, name))
    ledger = Ledger()
    ledger.attach(lambda: (run_dir, {"identity": identity(), "role": "scheduler"}))
    ref_steps, ref_colls = _run(ledger, steps)
    assert ledger.flush()
    got = read_ledger([run_dir])
    assert got.files == 1 and not got.unreadable
    (proc,) = got.processes.values()
    steps_got = {(f["phase"], f["batch"], f["tokens"]): n for k, n in proc.counts.items()
                 if (f := proc.lines[k])["kind"] == "step"}
    colls_got = {(f["phase"], f["batch"], f["tokens"], f["op"], f["group"], f["bytes"], f["impl"]): n
                 for k, n in proc.counts.items() if (f := proc.lines[k])["kind"] == "collective"}
    assert steps_got == dict(ref_steps)
    assert colls_got == dict(ref_colls)

    # The set of lines decides: shuffled, duplicated and with a cut line appended, the same counts.
    text = open(os.path.join(run_dir, contract.file_name(file_stem()))).read().splitlines()
    header, rest = text[0], text[1:]
    rnd.shuffle(rest)
    again = LaunchLedger()
    parse_lines("\n".join([header, *rest, *rest[: len(rest) // 2], header[:-5]]), "copy", again)
    (proc2,) = again.processes.values()
    assert proc2.counts == proc.counts

    # Per step: the reference count divided by the reference steps of the same context.
    view = summarize(got)
    for line in view.lines:
        for nbytes, ratio in line.per_step.items():
            ctx = (line.phase, line.batch, line.tokens)
            n = ref_colls[ctx + (line.op, line.group, nbytes, line.impl)]
            if ref_steps[ctx]:
                assert ratio == (n / ref_steps[ctx], n / ref_steps[ctx])
            else:
                assert ratio is None


def test_a_collective_outside_any_forward_has_no_per_step_value(run_dir: str) -> None:
    ledger = Ledger()
    ledger.attach(lambda: (run_dir, {"identity": identity()}))
    ledger.collective("broadcast", "tp:0", 2, 8, "int64", "gloo")
    ledger.collective("broadcast", "tp:0", 2, 8, "int64", "gloo")
    assert ledger.flush()
    view = summarize(read_ledger([run_dir]))
    (line,) = view.lines
    assert line.phase == contract.OUTSIDE and line.per_step == {8: None} and line.totals == {8: [2]}


def test_a_replay_turns_the_step_into_a_replay_step(run_dir: str) -> None:
    ledger = Ledger()
    ledger.attach(lambda: (run_dir, {"identity": identity()}))
    for _ in range(3):
        ctx = ledger.enter("decode", "eager", 4, 4)
        ledger.mark_replay("FullCudaGraphBackend")
        ledger.leave(ctx, completed=True)
    ctx = ledger.enter("decode", "eager", 4, 4)
    ledger.leave(ctx, completed=True)
    assert ledger.flush()
    view = summarize(read_ledger([run_dir]))
    by = {(s.phase, s.mode): (s.per_process, s.replays) for s in view.steps}
    assert by == {("decode", "eager"): ([1], []), ("decode", "replay"): ([3], [3])}


def test_a_file_it_did_not_create_is_never_written(run_dir: str) -> None:
    open(os.path.join(run_dir, contract.file_name(file_stem())), "w").write("planted\n")
    ledger = Ledger()
    ledger.attach(lambda: (run_dir, {"identity": identity()}))
    ledger.collective("all_reduce", "tp:0", 2, 8, "float32", "gloo")
    assert not ledger.flush()
    assert ledger.failure is not None
    assert open(os.path.join(run_dir, contract.file_name(file_stem()))).read() == "planted\n"


def test_nothing_is_written_before_the_process_has_a_launch_directory(run_dir: str) -> None:
    where: list = []
    ledger = Ledger()
    ledger.attach(lambda: where[0] if where else None)
    ledger.collective("all_reduce", "tp:0", 2, 8, "float32", "gloo")
    assert not ledger.flush()
    where.append((run_dir, {"identity": identity()}))
    assert ledger.flush()
    assert read_ledger([run_dir]).files == 1


def test_contexts_nest_and_the_innermost_counts(run_dir: str) -> None:
    ledger = Ledger()
    outer = ledger.enter("target verify", "eager", 1, 2)
    inner = ledger.enter("draft decode", "eager", 1, 1)
    ledger.collective("all_reduce", "tp:0", 2, 128, "bfloat16", "gloo")
    ledger.leave(inner, completed=True)
    assert ledger.context() is outer
    ledger.collective("all_reduce", "tp:0", 2, 256, "bfloat16", "gloo")
    ledger.leave(outer, completed=False)
    assert ledger.context() is None
    phases = sorted((f["kind"], f["phase"], f.get("bytes")) for f in ledger.fields.values())
    assert phases == [("collective", "draft decode", 128), ("collective", "target verify", 256),
                      ("step", "draft decode", None)]


def test_outside_a_forward_a_collective_is_eager_and_a_replay_is_counted(run_dir: str) -> None:
    ledger = Ledger()
    ledger.collective("broadcast", "tp:0", 2, 8, "int64", "gloo")
    ledger.collective("all_reduce", "tp:0", 2, 8, "bfloat16", "pynccl", "capture")
    ledger.mark_replay("FullCudaGraphBackend")
    got = sorted((f["kind"], f["phase"], f["mode"], f.get("runner")) for f in ledger.fields.values())
    assert got == [("collective", contract.OUTSIDE, "capture", None), ("collective", contract.OUTSIDE, "eager", None),
                   ("replay", contract.OUTSIDE, "replay", "FullCudaGraphBackend")]


def test_the_writers_keys_are_the_contracts_keys(run_dir: str) -> None:
    ledger = Ledger()
    ctx = ledger.enter("decode", "eager", 4, 4)
    ledger.collective("all_gather", "tp:0", 8, 4096, "float16", "torch_nccl")
    ledger.mark_replay("BreakableCudaGraphBackend")
    ledger.leave(ctx, completed=True)
    ledger.leave(ctx, completed=False)  # a context already left: nothing to pop, nothing raised
    assert ledger.counts and all(contract.key_of(ledger.fields[k]) == k for k in ledger.counts)
    coll = next(f for f in ledger.fields.values() if f["kind"] == "collective")
    assert (coll["ranks"], coll["dtype"], coll["bytes"], coll["impl"], coll["mode"]) == (8, "float16", 4096,
                                                                                         "torch_nccl", "eager")


def test_the_models_are_written_once_each_time_they_change(run_dir: str) -> None:
    ledger = Ledger()
    ledger.attach(lambda: (run_dir, {"identity": identity()}))
    ledger.models["target"] = {"layers": 2, "hidden": 64}
    ledger.collective("all_reduce", "tp:0", 2, 8, "float32", "gloo")
    assert ledger.flush() and ledger.flush()
    ledger.models["draft"] = {"layers": 1, "hidden": 64}
    assert ledger.flush()
    path = os.path.join(run_dir, contract.file_name(file_stem()))
    lines = read_jsonl(path)
    heads = [x for x in lines if x["kind"] == "process"]
    assert [x.get("models") for x in heads] == [None, {"target": {"layers": 2, "hidden": 64}},
                                                {"target": {"layers": 2, "hidden": 64},
                                                 "draft": {"layers": 1, "hidden": 64}}]
    (proc,) = read_ledger([run_dir]).processes.values()
    assert proc.models == {"target": {"layers": 2, "hidden": 64}, "draft": {"layers": 1, "hidden": 64}}


def test_the_file_stays_where_it_was_first_written(run_dir: str, tmp_path) -> None:
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    where = [run_dir]
    ledger = Ledger()
    ledger.attach(lambda: (where[0], {"identity": identity()}))
    ledger.collective("all_reduce", "tp:0", 2, 8, "float32", "gloo")
    assert ledger.flush()
    where[0] = str(other)
    ledger.collective("all_reduce", "tp:0", 2, 8, "float32", "gloo")
    assert ledger.flush()
    assert os.listdir(other) == []
    (proc,) = read_ledger([run_dir]).processes.values()
    assert list(proc.counts.values()) == [2]


def test_after_a_failure_the_ledger_stops_writing_and_says_why(run_dir: str) -> None:
    open(os.path.join(run_dir, contract.file_name(file_stem())), "w").write("planted\n")
    ledger = Ledger()
    ledger.attach(lambda: (run_dir, {"identity": identity()}))
    ledger.collective("all_reduce", "tp:0", 2, 8, "float32", "gloo")
    assert not ledger.flush()
    assert "already exists" in ledger.failure
    ledger.collective("all_reduce", "tp:0", 2, 8, "float32", "gloo")
    assert not ledger.flush()
