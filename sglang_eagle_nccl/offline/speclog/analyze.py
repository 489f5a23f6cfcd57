"""Diagnose speculative-decoding runs of SGLang server logs.

For every server run in the given logs (a file may hold several runs; a run starts at
the ``server_args=...`` line the launcher prints) this reports tokens/s, mean accept
length, the implied verify-cycle time (accept length / per-request tokens/s), the plain
decode step it has to beat, and the likely bottleneck: verify without CUDA graph, NCCL
settings not in force (from the plugin's audit), or simply a cycle too slow for the
accept length.

Runs are read by :mod:`.parse` and shown by :mod:`.render`. Standard library only.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence

from sglang_eagle_nccl.offline.speclog.estimate import Estimate, estimate
from sglang_eagle_nccl.offline.speclog.parse import RunReport, open_log, split_runs, summarise

__all__ = [
    "BATCH_MISMATCH",
    "analyze_logs",
    "parse_log_lines",
]

#: Spec and baseline runs whose mean running-request counts differ by more than this
#: fraction are compared with a warning.
BATCH_MISMATCH = 0.25

# --------------------------------------------------------------------------- diagnosis


def _verify_graph_evidence(rep: RunReport) -> list[str]:
    """Why the target (verify) pass of ``rep`` ran without a CUDA graph; empty if no sign."""
    evidence: list[str] = []
    label = rep.graph_label or "cuda graph"
    if rep.eager_lines:
        total = rep.eager_lines + rep.graph_lines
        if rep.graph_lines == 0:
            evidence.append(f"'{label}: False' on all {total} decode log lines")
        else:
            evidence.append(
                f"'{label}: False' on {rep.eager_lines} of {total} decode log lines "
                "(batches above --cuda-graph-max-bs run eagerly)"
            )
    if rep.disable_cuda_graph:
        evidence.append("server started with CUDA graphs disabled (disable_cuda_graph / decode backend)")
    g = rep.startup_graph_timings
    if "target_verify" in g and g["target_verify"] == 0.0 and g.get("decode", 0.0) == 0.0:
        evidence.append("start-up timings show target_verify=0.00 s (no verify graph captured)")
    for ev in rep.graph_events:
        if ev.kind == "capture_failed" and ev.role != "draft":
            evidence.append(f"line {ev.line_no}: {ev.text[:120]}")
        elif ev.kind in {"disabled", "fallback"} and ev.role in {"all", "target", "verify"}:
            evidence.append(f"line {ev.line_no}: {ev.text[:120]}")
    return list(dict.fromkeys(evidence))


def _verify_graph_seen(rep: RunReport) -> bool:
    """Positive evidence that the target (verify) pass had a CUDA graph."""
    if rep.graph_lines:
        return True
    if rep.startup_graph_timings.get("target_verify", 0.0) > 0.0:
        return True
    return any(ev.kind == "captured" and ev.role in {"verify", "target"} for ev in rep.graph_events)


def _draft_graph_evidence(rep: RunReport) -> list[str]:
    evidence: list[str] = []
    g = rep.startup_graph_timings
    if g.get("target_verify", 0.0) > 0.0 and g.get("draft_decode", 1.0) == 0.0:
        evidence.append("start-up timings show draft_decode=0.00 s")
    for ev in rep.graph_events:
        if ev.role == "draft" and ev.kind in {"disabled", "capture_failed", "fallback"}:
            evidence.append(f"line {ev.line_no}: {ev.text[:120]}")
    return evidence


def _pick_baseline(
    rep: RunReport, candidates: Sequence[RunReport], order: Mapping[int, int]
) -> RunReport | None:
    """The non-speculative run most like ``rep``, never one of another model: same tp
    size, same file, closest number of running requests, nearest in the logs, in that order."""

    def same(a: object, b: object) -> float:
        return 0.5 if a is None or b is None else float(a != b)

    def key(c: RunReport) -> tuple[float, ...]:
        return (
            same(c.tp_size, rep.tp_size),
            float(c.source != rep.source),
            abs((c.mean_running_req or 0.0) - (rep.mean_running_req or 0.0)),
            float(abs(order[id(c)] - order[id(rep)])),
        )

    usable = [c for c in candidates if c.cycle_ms is not None and same(c.model_path, rep.model_path) < 1.0]
    return min(usable, key=key) if usable else None


def _diagnose(
    reports: list[RunReport], audit_problems: Sequence[str], baseline_decode_ms: float | None
) -> list[RunReport]:
    baselines = [r for r in reports if not r.speculative and r.cycle_ms is not None]
    order = {id(r): i for i, r in enumerate(reports)}
    audit = [f"audit: {p}" for p in audit_problems if p and p.strip()]
    out: list[RunReport] = []
    for rep in reports:
        findings: list[str] = []
        notes = list(rep.notes)
        base_ms: float | None = None
        base_src: str | None = None
        est: Estimate | None = None
        if rep.recognised_lines and not rep.decode_lines:
            findings.append(
                "no decode batch lines in this run: the server never decoded, or the run was shorter "
                "than --decode-log-interval (default 40) forward passes"
            )
        if rep.speculative:
            evidence = _verify_graph_evidence(rep)
            if evidence:
                findings.append("verify runs without CUDA graph (" + "; ".join(evidence) + ")")
            draft = _draft_graph_evidence(rep)
            if draft:
                findings.append("draft model runs without CUDA graph (" + "; ".join(draft) + ")")
            findings.extend(audit)
            if baseline_decode_ms is not None:
                base_ms, base_src = baseline_decode_ms, "baseline_decode_ms argument"
            else:
                base = _pick_baseline(rep, baselines, order)
                if base is None and baselines:
                    notes.append(
                        "non-speculative runs found are for other models ("
                        + ", ".join(sorted({str(b.model_path) for b in baselines}))
                        + "): not used as baseline"
                    )
                if base is not None:
                    base_ms, base_src = base.cycle_ms, base.label
                    if base.tp_size and rep.tp_size and base.tp_size != rep.tp_size:
                        notes.append(f"baseline ran with tp {base.tp_size}, this run with tp {rep.tp_size}")
                    if (
                        rep.mean_running_req
                        and base.mean_running_req
                        and abs(rep.mean_running_req - base.mean_running_req)
                        > BATCH_MISMATCH * max(rep.mean_running_req, base.mean_running_req)
                    ):
                        notes.append(
                            f"batch sizes differ ({rep.mean_running_req:.1f} running requests here vs "
                            f"{base.mean_running_req:.1f} in {base.label}): comparison is approximate"
                        )
            if rep.cycle_ms is not None and rep.mean_accept_len is not None:
                if base_ms is None:
                    notes.append(
                        "no baseline decode step to compare with: add a log of the same server without "
                        "speculation, or pass baseline_decode_ms (--baseline-decode-ms)"
                    )
                elif rep.mean_accept_len < 1.0:
                    findings.append(
                        f"mean accept length {rep.mean_accept_len:.2f} < 1: log looks inconsistent"
                    )
                else:
                    est = estimate(rep.mean_accept_len, rep.cycle_ms, base_ms)
                    if est.outcome != "wins":
                        findings.append(est.verdict)
                        if not evidence:
                            how = (
                                "although it ran on a CUDA graph"
                                if _verify_graph_seen(rep)
                                else "and the log shows no sign of an eager verify"
                            )
                            findings.append(
                                f"verify cycle is {est.break_even_accept_len:.1f}x a decode step {how}: "
                                "check that the NCCL settings reach the communicators of every rank "
                                "(plugin audit dir) and compare the NCCL env of the verify and decode paths"
                            )
        else:
            if rep.eager_lines:
                total = rep.eager_lines + rep.graph_lines
                findings.append(
                    f"decode runs without CUDA graph ('{rep.graph_label or 'cuda graph'}: False' on "
                    f"{rep.eager_lines} of {total} decode log lines)"
                )
            elif rep.disable_cuda_graph:
                findings.append("decode runs without CUDA graph (server started with CUDA graphs disabled)")
            if rep.recognised_lines:
                findings.extend(audit)
            if rep.cycle_ms is not None:
                base_ms, base_src = rep.cycle_ms, "this run (no speculation)"
        out.append(
            dataclasses.replace(
                rep,
                baseline_decode_ms=base_ms,
                baseline_source=base_src,
                estimate=est,
                findings=tuple(dict.fromkeys(findings)),
                notes=tuple(notes),
            )
        )
    return out


def _check_baseline(baseline_decode_ms: float | None) -> float | None:
    if baseline_decode_ms is None:
        return None
    if (
        isinstance(baseline_decode_ms, bool)
        or not isinstance(baseline_decode_ms, (int, float))
        or not (0.0 < float(baseline_decode_ms) < float("inf"))
    ):
        raise ValueError(
            f"baseline_decode_ms (--baseline-decode-ms) must be a positive number of milliseconds, "
            f"got {baseline_decode_ms!r}; pass the decode step of the same server without speculation, "
            "e.g. 12.2, or leave it out and give a non-speculative log"
        )
    return float(baseline_decode_ms)


def parse_log_lines(
    lines: Iterable[str],
    *,
    source: str = "<lines>",
    audit_problems: Sequence[str] = (),
    baseline_decode_ms: float | None = None,
) -> list[RunReport]:
    """Parse SGLang server log lines into one diagnosed RunReport per server run.

    A run starts at each ``server_args=`` line (lines before the first one form a run of
    their own). Baseline pairing only looks at runs inside ``lines``; use analyze_logs to
    pair across files. Returns [] when no SGLang line is recognised.
    """
    base = _check_baseline(baseline_decode_ms)
    reports = [summarise(raw) for raw in split_runs(lines, source)]
    return _diagnose(reports, tuple(audit_problems), base)


def analyze_logs(
    paths: Sequence[str | os.PathLike[str]],
    *,
    audit_problems: Sequence[str] = (),
    baseline_decode_ms: float | None = None,
) -> list[RunReport]:
    """Analyse SGLang server logs (LOG...) and diagnose every server run in them.

    Per run: tokens/s, mean accept length, implied verify-cycle time, the baseline decode
    step it has to beat (from a non-speculative run in any of the logs, closest in
    running requests, or from baseline_decode_ms), and the likely bottleneck: verify
    without CUDA graph, NCCL audit problems (audit_problems, as computed from the
    plugin's audit dir), or a cycle too slow for the accept length.

    A file in which nothing is recognised yields a report saying so. Raises ValueError
    for an empty path list, a bad baseline_decode_ms or a log that cannot be read (:class:`LogUnreadable`).
    """
    if not paths:
        raise ValueError("no log files given: pass at least one SGLang server log (LOG...)")
    base = _check_baseline(baseline_decode_ms)
    reports: list[RunReport] = []
    for path in paths:
        name = os.fspath(path)
        with open_log(name) as fh:
            runs = [summarise(raw) for raw in split_runs(fh, name)]
        if not runs:
            runs = [
                RunReport(
                    source=name,
                    run_index=1,
                    first_line=0,
                    last_line=0,
                    notes=(
                        "no SGLang log lines recognised: expected 'Decode batch' lines from the server's "
                        "stderr (started with the default --log-level info)",
                    ),
                )
            ]
        reports.extend(runs)
    return _diagnose(reports, tuple(audit_problems), base)
