"""ci/gpu-check step (b)'s ledger judging, fed by the real ledger pipeline (writer -> launch directory
-> reader -> view), not by hand-written sections."""

from __future__ import annotations

import importlib

import pytest

from sglang_eagle_nccl.contract.launch_dir import identity
from sglang_eagle_nccl.inproc.evidence.ledger import Ledger
from sglang_eagle_nccl.offline.audit.ledger_join import summarize
from sglang_eagle_nccl.offline.audit.ledger_read import read_ledger
from support.gpu_check_pkg import gpu_check  # noqa: F401 - puts ci/ on sys.path

judge_ledger = importlib.import_module("gpu_check.ledger_check").judge_ledger


def _section(tmp_path, phases=("extend", "target verify"), replay=False, impl="gloo") -> dict:
    run_dir = tmp_path / "launch"
    run_dir.mkdir(mode=0o700)
    ledger = Ledger()
    ledger.attach(lambda: (str(run_dir), {"identity": identity()}))
    for phase in phases:
        ctx = ledger.enter(phase, "eager", 1, 3)
        if replay:
            ledger.mark_replay("FullCudaGraphBackend")
        ledger.collective("all_reduce", "tp:0", 2, 384, "bfloat16", impl)
        ledger.leave(ctx, completed=True)
    assert ledger.flush()
    return summarize(read_ledger([str(run_dir)])).to_dict()


def test_a_rehearsal_with_extend_and_verify_passes(tmp_path) -> None:
    problems, notes, details = judge_ledger(_section(tmp_path), rehearsal=True)
    assert problems == [] and details["ledger_phases"] == ["extend", "target verify"]


@pytest.mark.parametrize("missing", ["extend", "target verify"])
def test_a_missing_phase_is_a_problem(tmp_path, missing: str) -> None:
    phases = [p for p in ("extend", "target verify", "draft extend") if p != missing]
    problems, _, _ = judge_ledger(_section(tmp_path, phases), rehearsal=True)
    assert len(problems) == 1 and f"'{missing}'" in problems[0]


@pytest.mark.parametrize("replay", [True, False])
def test_on_a_gpu_replays_must_be_counted(tmp_path, replay: bool) -> None:
    problems, _, details = judge_ledger(_section(tmp_path, replay=replay), rehearsal=False)
    assert details["ledger_replays"] == (2 if replay else 0)
    assert (problems == []) is replay


def test_an_unidentified_implementation_is_a_problem(tmp_path) -> None:
    problems, _, _ = judge_ledger(_section(tmp_path, impl="unidentified"), rehearsal=True)
    assert len(problems) == 1 and "no identified implementation" in problems[0]


def test_no_ledger_at_all_is_a_problem() -> None:
    problems, _, details = judge_ledger(None, rehearsal=True)
    assert len(problems) == 1 and details == {}


def test_nccl_lines_without_an_actual_tuner_answer_fail_on_a_gpu_only(tmp_path) -> None:
    section = _section(tmp_path, impl="torch_nccl")
    assert all(s["actual"] is None for ln in section["lines"] for s in ln["sizes"])  # not looked up: no answers
    problems, _, _ = judge_ledger(section, rehearsal=False)
    assert any("recorded no answer" in p for p in problems)
    problems, notes, _ = judge_ledger(section, rehearsal=True)
    assert not any("recorded no answer" in p for p in problems)
    assert any("no actual tuner answer is expected" in n for n in notes)
