"""The phase of a forward is a function of SGLang's forward-mode name and the draft flag only (rule in
inproc/evidence/ledger_phases.py), checked against a table written here for every mode name SGLang
0.4.3 -> 0.5.23 has, and against generated names no release has."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle_nccl.contract.ledger import OUTSIDE, PHASES
from sglang_eagle_nccl.inproc.evidence.ledger_phases import phase_of

# (mode name, run by a draft runner) -> phase; written from the releases' ForwardMode enums.
REFERENCE = {
    ("EXTEND", False): "extend", ("EXTEND", True): "draft extend",
    ("DECODE", False): "decode", ("DECODE", True): "draft decode",
    ("MIXED", False): "mixed", ("MIXED", True): "mixed",
    ("IDLE", False): "idle", ("IDLE", True): "idle",
    ("TARGET_VERIFY", False): "target verify", ("TARGET_VERIFY", True): "target verify",
    ("DRAFT_EXTEND", False): "draft extend", ("DRAFT_EXTEND", True): "draft extend",
    ("DRAFT_EXTEND_V2", False): "draft extend", ("DRAFT_EXTEND_V2", True): "draft extend",
    ("SPLIT_PREFILL", False): "extend", ("SPLIT_PREFILL", True): "draft extend",
    ("PREBUILT", False): "extend", ("PREBUILT", True): "draft extend",
    ("DLLM_EXTEND", False): "extend", ("DLLM_EXTEND", True): "draft extend",
}


@pytest.mark.parametrize(("mode", "draft"), sorted(REFERENCE))
def test_every_known_mode(mode: str, draft: bool) -> None:
    assert phase_of(mode, draft) == REFERENCE[(mode, draft)]
    assert phase_of(mode, draft) in PHASES


@given(st.from_regex(r"[A-Z][A-Z0-9_]{0,20}", fullmatch=True), st.booleans())
def test_an_unknown_mode_is_shown_as_named_never_guessed(mode: str, draft: bool) -> None:
    got = phase_of(mode, draft)
    if (mode, draft) in REFERENCE:
        assert got == REFERENCE[(mode, draft)]
    else:
        assert got == mode.lower().replace("_", " ")
        assert got not in PHASES or got in ("decode", "idle", "mixed")


@pytest.mark.parametrize("mode", [None, ""])
def test_no_mode_is_outside_a_forward(mode: str | None) -> None:
    assert phase_of(mode, False) == OUTSIDE
