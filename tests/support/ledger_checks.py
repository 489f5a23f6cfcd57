"""What the phase ledger of a real CPU engine run must show (issue 28 item 4), computed here from the
tiny model's shape (tests/support/tiny_models.py) and the sizes `tuner --model-config` predicts
(offline/sizes/report.py), never from the ledger's own code.

Per target forward: SGLang's Llama issues one all-reduce after attention and one after the MLP per
layer, plus one for the vocabulary-parallel embedding: 2 x layers + 1 per step, each of tokens x
hidden x 2 bytes (bfloat16). The EAGLE / EAGLE-3 draft runs its own layer(s) the same way."""

from __future__ import annotations

from pathlib import Path

from sglang_eagle_nccl.knowledge.nccl.tuner_rules import rule_from_dict
from sglang_eagle_nccl.native import library
from sglang_eagle_nccl.offline.audit.ledger_audit import ledger_view
from sglang_eagle_nccl.offline.audit.ledger_read import read_ledger
from sglang_eagle_nccl.offline.sizes.report import size_report
from support import tiny_models

BF16 = 2


def _draft_layers(draft: Path | None) -> int:
    import json

    return json.loads((Path(draft) / "config.json").read_text())["num_hidden_layers"] if draft else 0


def check_ledger(run_dirs: list[str], *, speculative: str | None, target: Path, draft: Path | None,
                 new_tokens: int | None = None, num_draft_tokens: int = 2) -> dict[str, set[str]]:
    """Assert the ledger of a finished TP=2 run; returns the phases each scheduler went through."""
    ledger = read_ledger(run_dirs)
    assert not ledger.unreadable, ledger.unreadable
    schedulers = [p for p in ledger.processes.values() if p.counts]
    assert len(schedulers) == 2, [(p.role, len(p.counts)) for p in ledger.processes.values()]
    view = ledger_view(run_dirs)
    assert view is not None
    layers = tiny_models.NUM_LAYERS
    sizes = {p["label"]: p["bytes"] for p in size_report(
        str(Path(target) / "config.json"), batch_size=1, tp_size=2, num_draft_tokens=num_draft_tokens,
        eagle_topk=1, sglang_version=None)["phases"]}

    all_reduces = [line for line in view.lines if line.op == "all_reduce"]
    phases = {line.phase for line in all_reduces}
    # The CPU path SGLang takes: its shared-memory all-reduce or torch.distributed on gloo, one for all.
    impls = {line.impl for line in all_reduces}
    assert len(impls) == 1 and impls <= {"gloo", "shm"}, impls
    for line in all_reduces:
        assert line.group == "tp:0" and line.ranks == 2 and line.dtype == "bfloat16" and line.mode == "eager", line
        assert line.exact(), line.to_dict()  # both ranks: the same calls per step
        draft_phase = line.phase in ("draft extend", "draft decode")
        per_step = 2 * (_draft_layers(draft) if draft_phase else layers) + 1
        (nbytes,) = line.totals
        assert nbytes == line.tokens * tiny_models.HIDDEN_SIZE * BF16, line.to_dict()
        assert line.per_step[nbytes] == (per_step, per_step), (line.phase, line.per_step, per_step)
        # The join: the compiled tuner library's own answer for this size, rank count and group.
        rules = [rule_from_dict(r, "launch") for r in ledger.profile.get("tuner_rules", [])]
        want = library.query_rules(rules, 6, "AllReduce", nbytes, 2, 1, "tp").describe()
        assert line.decisions[nbytes]["answer"] == want
    if speculative is None:
        assert phases == {"extend", "decode"}, phases
        (decode,) = [line for line in all_reduces if line.phase == "decode" and line.batch == 1]
        assert set(decode.totals) == {sizes["decode step (without speculation)"]}, decode.to_dict()
        if new_tokens is not None:  # one request and nothing else (an Engine; a server also warms up)
            # The first token comes from the prefill: new_tokens - 1 decode forwards, one more where the
            # overlap scheduler runs a step ahead and drops its result (SGLang 0.5.4 on CPU; 0.5.23 does not).
            # The ranks may differ by one step: SGLang ends its schedulers with SIGKILL, and a rank whose
            # results never leave it (rank 1; or the step run ahead, on any rank) can be killed after the
            # step's last all-reduce and before the flush at its end. Rank 0 flushed every step whose
            # token came back (before the token left), so the larger count is never below new_tokens - 1.
            # (CI of 2026-12-03 saw [n, n + 1] on 0.5.4.)
            steps = {(s.phase, s.tokens): s.per_process for s in view.steps}
            counts = steps[("decode", 1)]
            assert len(counts) == 2 and max(counts) in (new_tokens - 1, new_tokens), steps
            assert max(counts) - min(counts) <= 1, steps
            # Each rank's all-reduces are exactly its own steps' (both lists are sorted).
            assert decode.totals == {sizes["decode step (without speculation)"]: [(2 * layers + 1) * n for n in counts]}, \
                decode.to_dict()
    else:
        # SGLang 0.5.23's speculative (v2) worker: extend, target verify, draft extend; no plain decode.
        assert {"extend", "target verify", "draft extend"} <= phases, phases
        assert "decode" not in phases, phases
        verify = [line for line in all_reduces if line.phase == "target verify"]
        assert {b for line in verify for b in line.totals} == {sizes["EAGLE verify step"]}, [v.to_dict() for v in verify]
        assert view.lines[0].phase == "target verify"  # the screen shows it first
    return {p: set() for p in phases}
