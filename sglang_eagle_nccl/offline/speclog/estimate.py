"""Back-of-envelope math for speculative decoding (EAGLE / EAGLE-3 and friends).

Pure functions, standard library only. The model, per request stream:

* With speculation a request advances ``A`` tokens (the mean "accept len" SGLang logs,
  which counts the bonus token, so ``A >= 1``) per cycle, and a cycle costs ``V`` ms:
  draft + verify wall time. Tokens/s with speculation = ``A / (V / 1000)``.
* Without speculation it advances one token per decode step of ``D`` ms:
  tokens/s = ``1000 / D``.
* Speculation wins when ``A / V > 1 / D``, i.e. when ``A > V / D`` (the break-even
  accept length), or equivalently when the cycle is shorter than ``A * D``.

Ignored: prefill, scheduling gaps, sampling, and the effect of batch size (compare a
speculative cycle with a decode step measured at the same number of running requests).

Example, from the EAGLE-3 debugging session that motivated this project: accept length
2, verify cycle 29-30 ms, decode step 12 ms -> 67-69 tok/s with speculation against
83 tok/s without; speculation only wins above accept length 2.4-2.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ASSUMPTIONS",
    "BREAK_EVEN_TOLERANCE",
    "Estimate",
    "estimate",
    "fmt_ms",
    "implied_cycle_ms",
]

#: Speedups within this relative distance of 1.0 are reported as break-even.
BREAK_EVEN_TOLERANCE = 0.02

ASSUMPTIONS = (
    "per request stream; cycle = draft + verify wall time (verify_ms); accept length counts "
    "the bonus token; prefill, scheduling gaps and batch-size effects are ignored"
)


def _check_number(name: str, flag: str, value: object, *, minimum: float, inclusive: bool, fix: str) -> float:
    """Return ``value`` as a float, or raise ValueError naming the argument, value and fix."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} ({flag}) must be a number, got {value!r}; {fix}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} ({flag}) must be a finite number, got {value!r}; {fix}")
    if (number < minimum) if inclusive else (number <= minimum):
        bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
        raise ValueError(f"{name} ({flag}) must be {bound}, got {value!r}; {fix}")
    return number


def fmt_ms(ms: float) -> str:
    """Format milliseconds compactly: 29.0 -> '29', 28.94 -> '28.9'."""
    text = f"{ms:.1f}"
    return text[:-2] if text.endswith(".0") else text


def implied_cycle_ms(accept_len: float, tok_s: float, running_req: float = 1.0) -> float:
    """Wall time of one verify cycle implied by SGLang's decode-log numbers.

    ``tok_s`` is the logged "gen throughput (token/s)", summed over ``running_req``
    requests; each request advances ``accept_len`` tokens per cycle, so one cycle takes
    ``accept_len * running_req / tok_s`` seconds. With ``accept_len=1`` this is the decode
    step time of a non-speculative server.
    """
    accept = _check_number(
        "accept_len",
        "--accept-len",
        accept_len,
        minimum=1.0,
        inclusive=True,
        fix="use the mean 'accept len' from the decode log (1 for a non-speculative server)",
    )
    rate = _check_number(
        "tok_s",
        "gen throughput",
        tok_s,
        minimum=0.0,
        inclusive=False,
        fix="use a decode log line where tokens were generated (gen throughput > 0)",
    )
    running = _check_number(
        "running_req",
        "#running-req",
        running_req,
        minimum=0.0,
        inclusive=False,
        fix="use a decode log line with at least one running request",
    )
    return 1000.0 * accept * running / rate


@dataclass(frozen=True)
class Estimate:
    """Result of :func:`estimate`: speculative vs plain decoding, per request stream."""

    accept_len: float
    verify_ms: float
    decode_ms: float
    spec_tok_s: float
    baseline_tok_s: float
    speedup: float
    break_even_accept_len: float
    max_cycle_ms_to_win: float

    @property
    def outcome(self) -> str:
        """'wins', 'loses' or 'break-even' (speedup within BREAK_EVEN_TOLERANCE of 1)."""
        if abs(self.speedup - 1.0) <= BREAK_EVEN_TOLERANCE:
            return "break-even"
        return "wins" if self.speedup > 1.0 else "loses"

    @property
    def verdict(self) -> str:
        """One line, e.g. 'verify cycle 29 ms vs decode 12 ms: speculation loses below
        accept length 2.4 (accept length 2.00 gives 69.0 tok/s vs 83.3 tok/s, 0.83x)'."""
        head = f"verify cycle {fmt_ms(self.verify_ms)} ms vs decode {fmt_ms(self.decode_ms)} ms: "
        tail = (
            f"(accept length {self.accept_len:.2f} gives {self.spec_tok_s:.1f} tok/s "
            f"vs {self.baseline_tok_s:.1f} tok/s, {self.speedup:.2f}x)"
        )
        be = f"{self.break_even_accept_len:.1f}"
        if self.outcome == "loses":
            return f"{head}speculation loses below accept length {be} {tail}"
        if self.outcome == "wins":
            return f"{head}speculation wins above accept length {be} {tail}"
        return f"{head}speculation is about break-even at accept length {be} {tail}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of inputs, results, outcome, verdict and assumptions."""
        return {
            "accept_len": self.accept_len,
            "verify_ms": self.verify_ms,
            "decode_ms": self.decode_ms,
            "spec_tok_s": round(self.spec_tok_s, 3),
            "baseline_tok_s": round(self.baseline_tok_s, 3),
            "speedup": round(self.speedup, 4),
            "break_even_accept_len": round(self.break_even_accept_len, 4),
            "max_cycle_ms_to_win": round(self.max_cycle_ms_to_win, 3),
            "outcome": self.outcome,
            "verdict": self.verdict,
            "assumptions": ASSUMPTIONS,
        }

    def format_text(self) -> str:
        """Human-readable multi-line summary ending with the verdict."""
        return "\n".join(
            [
                f"with speculation:    {self.spec_tok_s:7.1f} tok/s  "
                f"(accept length {self.accept_len:.2f} per {fmt_ms(self.verify_ms)} ms cycle)",
                f"without speculation: {self.baseline_tok_s:7.1f} tok/s  "
                f"(one token per {fmt_ms(self.decode_ms)} ms decode step)",
                f"speedup:             {self.speedup:7.2f}x",
                f"break-even accept length: {self.break_even_accept_len:.2f} "
                f"(verify {fmt_ms(self.verify_ms)} ms / decode {fmt_ms(self.decode_ms)} ms)",
                f"to win at accept length {self.accept_len:.2f} the cycle must be under "
                f"{fmt_ms(self.max_cycle_ms_to_win)} ms",
                f"verdict: {self.verdict}",
                f"assumptions: {ASSUMPTIONS}",
            ]
        )


def estimate(accept_len: float, verify_ms: float, decode_ms: float) -> Estimate:
    """Estimate whether speculative decoding beats plain decoding, per request stream.

    accept_len: mean tokens a request advances per speculative cycle ("accept len" in the
    SGLang decode log; >= 1 because the verified bonus token counts).
    verify_ms: wall time of one speculative cycle, draft + verify, in milliseconds.
    decode_ms: wall time of one plain (non-speculative) decode step, in milliseconds.

    Returns tokens/s with speculation (accept_len / (verify_ms / 1000)) and without
    (1000 / decode_ms), the speedup, the break-even accept length (verify_ms / decode_ms)
    and a one-line verdict. Raises ValueError for accept_len < 1 or non-positive times.
    """
    accept = _check_number(
        "accept_len",
        "--accept-len",
        accept_len,
        minimum=1.0,
        inclusive=True,
        fix="pass the mean 'accept len' from the SGLang decode log, e.g. --accept-len 2.0 "
        "(it counts the bonus token, so it is at least 1)",
    )
    verify = _check_number(
        "verify_ms",
        "--verify-ms",
        verify_ms,
        minimum=0.0,
        inclusive=False,
        fix="pass the draft + verify cycle time in milliseconds, e.g. --verify-ms 29",
    )
    decode = _check_number(
        "decode_ms",
        "--decode-ms",
        decode_ms,
        minimum=0.0,
        inclusive=False,
        fix="pass the non-speculative decode step time in milliseconds, e.g. --decode-ms 12",
    )
    spec_tok_s = accept / (verify / 1000.0)
    baseline_tok_s = 1000.0 / decode
    return Estimate(
        accept_len=accept,
        verify_ms=verify,
        decode_ms=decode,
        spec_tok_s=spec_tok_s,
        baseline_tok_s=baseline_tok_s,
        speedup=spec_tok_s / baseline_tok_s,
        break_even_accept_len=verify / decode,
        max_cycle_ms_to_win=accept * decode,
    )
