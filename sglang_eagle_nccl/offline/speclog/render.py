"""Speculative-decoding runs as the `analyze` command prints them: one text block per run
(:func:`format_text`), or JSON-ready dicts (:func:`reports_to_json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sglang_eagle_nccl.offline.speclog.estimate import fmt_ms
from sglang_eagle_nccl.offline.speclog.parse import RunReport

__all__ = [
    "format_text",
    "reports_to_json",
]

# --------------------------------------------------------------------------- output


def format_text(reports: Sequence[RunReport]) -> str:
    """Human-readable report, one block per run."""
    if not reports:
        return "no SGLang server runs found (no 'server_args=' or 'Decode batch' lines)"
    blocks: list[str] = []
    for rep in reports:
        kind = f"{rep.speculative_algorithm or 'speculative'}" if rep.speculative else "no speculation"
        tp = f", tp {rep.tp_size}" if rep.tp_size else ""
        span = f"lines {rep.first_line}-{rep.last_line}" if rep.first_line else "no lines recognised"
        out = [f"== {rep.label} ({span}): {kind}{tp}"]
        if rep.decode_lines:
            out.append(
                f"   tokens/s: {rep.tok_s:.1f} ({rep.tok_s_per_request:.1f} per request, "
                f"{rep.mean_running_req:.1f} running) over {rep.decode_lines} decode log lines"
            )
            if rep.speculative and rep.mean_accept_len is not None:
                rate = (
                    f" (accept rate {rep.mean_accept_rate:.2f})" if rep.mean_accept_rate is not None else ""
                )
                out.append(f"   mean accept length: {rep.mean_accept_len:.2f}{rate}")
                out.append(
                    f"   implied verify cycle: {fmt_ms(rep.cycle_ms or 0.0)} ms (accept length / per-request tok/s)"
                )
            else:
                out.append(f"   decode step: {fmt_ms(rep.cycle_ms or 0.0)} ms")
            if rep.graph_lines or rep.eager_lines:
                out.append(
                    f"   CUDA graph on {rep.graph_lines} of {rep.graph_lines + rep.eager_lines} decode log lines"
                )
        if rep.speculative:
            if rep.baseline_decode_ms is not None:
                out.append(
                    f"   baseline decode step: {fmt_ms(rep.baseline_decode_ms)} ms "
                    f"({1000.0 / rep.baseline_decode_ms:.1f} tok/s, from {rep.baseline_source})"
                )
            if rep.estimate is not None:
                out.append(f"   verdict: {rep.estimate.verdict}")
                if rep.estimate.outcome != "wins":
                    out.append(
                        f"   to win at accept length {rep.estimate.accept_len:.2f} the cycle must be under "
                        f"{fmt_ms(rep.estimate.max_cycle_ms_to_win)} ms"
                    )
        if rep.startup_graph_timings:
            phases = ", ".join(f"{k}={v:.2f}" for k, v in rep.startup_graph_timings.items())
            out.append(f"   start-up CUDA graph capture (s): {phases}")
        findings = [f for f in rep.findings if f != rep.verdict]  # the verdict is printed above
        if findings:
            out.append("   likely bottleneck:")
            out.extend(f"     - {f}" for f in findings)
        out.extend(f"   note: {n}" for n in rep.notes)
        blocks.append("\n".join(out))
    return "\n\n".join(blocks)


def reports_to_json(reports: Sequence[RunReport]) -> list[dict[str, Any]]:
    """JSON-ready list of dicts, one per run (see RunReport.to_dict)."""
    return [rep.to_dict() for rep in reports]
