"""Tests for sglang_eagle_nccl.offline.speclog.estimate (back-of-envelope speculative-decoding math)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle_nccl.offline.speclog.estimate import (
    ASSUMPTIONS,
    Estimate,
    estimate,
    fmt_ms,
    implied_cycle_ms,
)


def test_seed_example_29ms_verify_gives_69_tok_s_against_83() -> None:
    est = estimate(accept_len=2, verify_ms=29, decode_ms=12)
    assert est.spec_tok_s == pytest.approx(68.97, abs=0.01)
    assert est.baseline_tok_s == pytest.approx(83.33, abs=0.01)
    assert est.break_even_accept_len == pytest.approx(29 / 12)


def test_seed_example_30ms_verify_gives_about_66_tok_s() -> None:
    assert estimate(2, 30, 12).spec_tok_s == pytest.approx(66.67, abs=0.01)


def test_seed_example_verdict_says_speculation_loses_below_2_4() -> None:
    verdict = estimate(2, 29, 12).verdict
    assert verdict.startswith("verify cycle 29 ms vs decode 12 ms: speculation loses below accept length 2.4")


def test_seed_cycle_33ms_from_60_tok_s_loses_against_82_tok_s() -> None:
    cycle = implied_cycle_ms(accept_len=2.0, tok_s=60.0)
    est = estimate(2.0, cycle, 1000 / 82)
    assert cycle == pytest.approx(33.33, abs=0.01)
    assert est.outcome == "loses"
    assert est.speedup == pytest.approx(60 / 82, rel=1e-6)


def test_fast_verify_wins_and_says_so() -> None:
    est = estimate(3, 19, 12)
    assert est.outcome == "wins"
    assert "speculation wins above accept length 1.6" in est.verdict
    assert est.speedup == pytest.approx((3 / 0.019) / (1000 / 12))


def test_speedup_within_tolerance_is_break_even() -> None:
    est = estimate(2.5, 30, 12)
    assert est.outcome == "break-even"
    assert "about break-even" in est.verdict


def test_max_cycle_to_win_is_accept_times_decode() -> None:
    assert estimate(2, 29, 12).max_cycle_ms_to_win == pytest.approx(24.0)


def test_accept_len_below_one_names_argument_value_and_fix() -> None:
    with pytest.raises(ValueError) as exc:
        estimate(0.5, 29, 12)
    msg = str(exc.value)
    assert "accept_len" in msg and "--accept-len" in msg and "0.5" in msg and ">= 1" in msg


VERIFY_FIX = "pass the draft + verify cycle time in milliseconds, e.g. --verify-ms 29"
DECODE_FIX = "pass the non-speculative decode step time in milliseconds, e.g. --decode-ms 12"


@pytest.mark.parametrize(
    ("kwargs", "name", "shown", "fix"),
    [
        ({"verify_ms": 0}, "verify_ms", "0", VERIFY_FIX),
        ({"verify_ms": -3.0}, "verify_ms", "-3.0", VERIFY_FIX),
        ({"decode_ms": 0.0}, "decode_ms", "0.0", DECODE_FIX),
        ({"decode_ms": float("nan")}, "decode_ms", "nan", DECODE_FIX),
        ({"verify_ms": float("inf")}, "verify_ms", "inf", VERIFY_FIX),
    ],
)
def test_bad_times_name_argument_and_value(kwargs: dict[str, float], name: str, shown: str, fix: str) -> None:
    args = {"accept_len": 2.0, "verify_ms": 29.0, "decode_ms": 12.0, **kwargs}
    with pytest.raises(ValueError) as exc:
        estimate(**args)
    message = str(exc.value)
    assert message.startswith(f"{name} (--{name.replace('_', '-')}) must be ") and f"got {shown};" in message
    assert message.endswith(f"; {fix}")  # the fix, in the plugin's words


@pytest.mark.parametrize("bad", ["2", None, True])
def test_non_numbers_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="accept_len"):
        estimate(bad, 29, 12)  # type: ignore[arg-type]


def test_estimate_is_frozen() -> None:
    est = estimate(2, 29, 12)
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.accept_len = 3  # type: ignore[misc]


def test_to_dict_is_json_ready_and_complete() -> None:
    d = estimate(2, 29, 12).to_dict()
    json.dumps(d)
    assert d["outcome"] == "loses"
    assert d["spec_tok_s"] == pytest.approx(68.966, abs=1e-3)
    assert d["break_even_accept_len"] == pytest.approx(2.4167, abs=1e-4)
    assert d["assumptions"] == ASSUMPTIONS


def test_format_text_shows_numbers_verdict_and_assumptions() -> None:
    text = estimate(2, 29, 12).format_text()
    assert "69.0 tok/s" in text and "83.3 tok/s" in text
    assert "break-even accept length: 2.42" in text
    assert "verdict: verify cycle 29 ms" in text
    assert "cycle = draft + verify" in text


def test_implied_cycle_scales_with_running_requests() -> None:
    assert implied_cycle_ms(2.0, 60.0, running_req=4) == pytest.approx(133.33, abs=0.01)


def test_implied_cycle_rejects_zero_throughput() -> None:
    with pytest.raises(ValueError, match="tok_s"):
        implied_cycle_ms(2.0, 0.0)


def test_fmt_ms_drops_trailing_zero() -> None:
    assert (fmt_ms(29.0), fmt_ms(28.94), fmt_ms(12.17)) == ("29", "28.9", "12.2")


_pos = st.floats(min_value=0.1, max_value=1e4, allow_nan=False, allow_infinity=False)


@given(accept=st.floats(min_value=1.0, max_value=64.0), verify=_pos, decode=_pos)
def test_wins_exactly_when_accept_len_beats_break_even(accept: float, verify: float, decode: float) -> None:
    est = estimate(accept, verify, decode)
    assert isinstance(est, Estimate)
    assert math.isclose(est.spec_tok_s * verify / 1000.0, accept, rel_tol=1e-9)
    if est.outcome == "wins":
        assert accept > est.break_even_accept_len
    elif est.outcome == "loses":
        assert accept < est.break_even_accept_len
