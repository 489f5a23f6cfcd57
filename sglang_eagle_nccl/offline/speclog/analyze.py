"""Read SGLang server logs and diagnose speculative-decoding runs.

For every server run in the given logs (a file may hold several runs; a run starts at
the ``server_args=...`` line the launcher prints) this reports tokens/s, mean accept
length, the implied verify-cycle time (accept length / per-request tokens/s), the plain
decode step it has to beat, and the likely bottleneck: verify without CUDA graph, NCCL
settings not in force (from the plugin's audit), or simply a cycle too slow for the
accept length.

Lines understood (SGLang 0.4.3 ... 0.5.23; see tests/fixtures/sglang_logs for the exact
formats and their source lines):

* ``Decode batch ... [accept len: A, accept rate: R,] [cuda graph: B,] gen throughput
  (token/s): T, ...``: one line per ``--decode-log-interval`` forward passes.
  ``cuda graph: False`` on a speculative run means the target *verify* pass ran eagerly.
* ``server_args=ServerArgs(...)`` / ``server_args={...}``: run start, speculative
  algorithm, tp size, ``disable_cuda_graph``.
* ``Capture ... cuda graph begin/end`` (target, draft, ``target verify``) and
  ``Capture cuda graph failed``.
* ``Engine startup timings (s): ... cuda_graph={... target_verify=...}`` (0.5.17+).
* ``Cuda graph is disabled because ...`` / ``Disable ... CUDA graph because ...`` and
  graph fallbacks.

Any prefix before the ``[date time TPn]`` stamp (Ray actor, docker compose), ANSI colour
codes and several records glued onto one line are tolerated; lines starting with ``#``
are comments. Standard library only.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl.offline.speclog.estimate import Estimate, estimate, fmt_ms

__all__ = [
    "DecodeSample",
    "GraphEvent",
    "RunReport",
    "analyze_logs",
    "format_text",
    "parse_log_lines",
    "reports_to_json",
]

#: Spec and baseline runs whose mean running-request counts differ by more than this
#: fraction are compared with a warning.
BATCH_MISMATCH = 0.25

# --------------------------------------------------------------------------- patterns

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_STAMP = re.compile(
    r"\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?P<rank>(?:\s+[A-Z][A-Z_]*\d+)*)\s*\]\s?"
)
_STAMP_START = re.compile(r"(?=\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")

_SERVER_ARGS = re.compile(r"\bserver_args=(?:ServerArgs\(|\{\s*['\"}])")
_DECODE = re.compile(r"\bDecode batch\b")
_F_RUNNING = re.compile(r"#running-req:\s*([0-9]{1,12})\b")  # ASCII and bounded: int() never sees a 5000-digit run
_F_ACCEPT_LEN = re.compile(r"(?:^|[,.]|\])\s*accept len:\s*([0-9]{1,15}(?:\.[0-9]{1,15})?)(?![0-9])")
_F_ACCEPT_RATE = re.compile(r"(?:^|[,.]|\])\s*accept rate:\s*([0-9]{1,15}(?:\.[0-9]{1,15})?)(?![0-9])")
_F_GRAPH = re.compile(r"\b((?:cuda|cpu|npu|xpu|musa) graph):\s*(True|False)\b")
_F_GEN_TPUT = re.compile(r"gen throughput \(token/s\):\s*([0-9]{1,15}(?:\.[0-9]{1,15})?)(?![0-9])")

_STARTUP = re.compile(r"Engine startup timings \(s\):(?P<body>.*)")
_STARTUP_GRAPH = re.compile(r"cuda_graph=\{(?P<inner>[^}]*)\}")
_KV_NUM = re.compile(r"(\w+)=([0-9]{1,15}(?:\.[0-9]{1,15})?)(?![0-9])")

_CAPTURE = re.compile(
    r"Capture (?P<what>[\w -]*?)\s*(?:cuda|cpu|npu|xpu|musa) graph (?P<phase>begin|end)\b",
    re.IGNORECASE,
)
_CAPTURE_SECS = re.compile(r"(?:Time elapsed: |elapsed=)([0-9]{1,15}(?:\.[0-9]{1,15})?)(?![0-9]) ?s\b")
_CAPTURE_FAILED = re.compile(r"Capture (?:[\w -]*?)(?:cuda|cpu|npu) graph failed", re.IGNORECASE)
_DISABLED = re.compile(
    r"^(?:(?:cuda|cpu|npu) graph\b[^.]{0,60}?\b(?:is|are)\s+disabled\b"
    r"|disabl(?:e|es|ed|ing)\s+(?:[\w-]+\s+){0,3}?(?:cuda|cpu|npu)[ _]graph)",
    re.IGNORECASE,
)
_FALLBACK = re.compile(r"\bfall(?:s|ing)?[ -]?back\b", re.IGNORECASE)
_GRAPHISH = re.compile(r"\b(?:cuda|cpu|npu)[ _]?graph|\beager\b", re.IGNORECASE)
_READY = re.compile(r"The server is fired up and ready to roll")


def _arg(text: str, key: str) -> str | None:
    """Value of ``key`` in a ServerArgs repr or dict repr, unquoted, or None."""
    m = re.search(rf"(?<![\w.]){re.escape(key)}['\"]?\s*[=:]\s*(?P<v>'[^']*'|\"[^\"]*\"|[^,)}}\s]+)", text)
    if not m:
        return None
    value = m.group("v")
    if value[:1] in "'\"":
        value = value[1:-1]
    return value


def _spec_name(value: str | None) -> str | None:
    if value is None or value in {"None", "", "null"}:
        return None
    return value.rsplit(".", 1)[-1]  # SpeculativeAlgorithm.EAGLE3 -> EAGLE3


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class DecodeSample:
    """One ``Decode batch`` log line."""

    line_no: int
    rank: str
    running_req: int
    gen_tok_s: float
    accept_len: float | None = None
    accept_rate: float | None = None
    graph: bool | None = None
    graph_label: str | None = None  # 'cuda graph', 'cpu graph', ... as logged


@dataclass(frozen=True)
class GraphEvent:
    """A CUDA-graph start-up event.

    kind: 'captured', 'capture_failed', 'disabled' or 'fallback'.
    role: 'verify' (target model of a speculative run), 'target', 'draft', 'prefill'
    or 'all' (a whole-server disable).
    """

    line_no: int
    kind: str
    role: str
    seconds: float | None
    text: str


@dataclass(frozen=True)
class RunReport:
    """Diagnosis of one SGLang server run.

    ``cycle_ms`` is the median verify-cycle time of a speculative run, or the decode step
    of a plain run, implied by each decode log line as accept_len * running_req /
    gen_throughput. ``tok_s`` is the median logged gen throughput (all running requests);
    medians keep the first line after an idle gap from skewing the result.
    """

    source: str
    run_index: int
    first_line: int
    last_line: int
    recognised_lines: int = 0
    speculative_algorithm: str | None = None
    speculative: bool = False
    model_path: str | None = None
    tp_size: int | None = None
    disable_cuda_graph: bool | None = None
    ready: bool = False
    decode_lines: int = 0
    decode_rank: str | None = None
    tok_s: float | None = None
    tok_s_per_request: float | None = None
    mean_running_req: float | None = None
    mean_accept_len: float | None = None
    mean_accept_rate: float | None = None
    cycle_ms: float | None = None
    graph_lines: int = 0
    eager_lines: int = 0
    graph_label: str | None = None
    startup_timings: Mapping[str, float] = field(default_factory=dict)
    startup_graph_timings: Mapping[str, float] = field(default_factory=dict)
    graph_events: tuple[GraphEvent, ...] = ()
    baseline_decode_ms: float | None = None
    baseline_source: str | None = None
    estimate: Estimate | None = None
    findings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """'run 2 of path/to.log'."""
        return f"run {self.run_index} of {self.source}"

    @property
    def verdict(self) -> str | None:
        """The estimate's one-line verdict, when a baseline was available."""
        return self.estimate.verdict if self.estimate else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (floats rounded, estimate nested)."""

        def r(x: float | None, nd: int = 3) -> float | None:
            return None if x is None else round(x, nd)

        return {
            "source": self.source,
            "run_index": self.run_index,
            "first_line": self.first_line,
            "last_line": self.last_line,
            "recognised_lines": self.recognised_lines,
            "speculative": self.speculative,
            "speculative_algorithm": self.speculative_algorithm,
            "model_path": self.model_path,
            "tp_size": self.tp_size,
            "disable_cuda_graph": self.disable_cuda_graph,
            "ready": self.ready,
            "decode_lines": self.decode_lines,
            "decode_rank": self.decode_rank,
            "tok_s": r(self.tok_s),
            "tok_s_per_request": r(self.tok_s_per_request),
            "mean_running_req": r(self.mean_running_req),
            "mean_accept_len": r(self.mean_accept_len),
            "mean_accept_rate": r(self.mean_accept_rate),
            "cycle_ms": r(self.cycle_ms),
            "graph_lines": self.graph_lines,
            "eager_lines": self.eager_lines,
            "graph_label": self.graph_label,
            "startup_timings": dict(self.startup_timings),
            "startup_graph_timings": dict(self.startup_graph_timings),
            "graph_events": [dataclasses.asdict(e) for e in self.graph_events],
            "baseline_decode_ms": r(self.baseline_decode_ms),
            "baseline_source": self.baseline_source,
            "estimate": self.estimate.to_dict() if self.estimate else None,
            "verdict": self.verdict,
            "findings": list(self.findings),
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- parsing


@dataclass
class _Raw:
    """Mutable accumulator for one run while lines are read."""

    source: str
    run_index: int
    first_line: int
    last_line: int = 0
    recognised: int = 0
    significant: bool = False  # saw anything beyond the start line
    server_args: str | None = None
    ready: bool = False
    samples: list[DecodeSample] = field(default_factory=list)
    startup: dict[str, float] = field(default_factory=dict)
    startup_graph: dict[str, float] = field(default_factory=dict)
    events: list[GraphEvent] = field(default_factory=list)
    malformed_decode: int = 0


def _records(raw_line: str) -> list[str]:
    """Clean one physical line and split records glued together by concurrent writers."""
    line = _ANSI.sub("", raw_line).replace("\r", "").rstrip("\n")
    parts = [p for p in _STAMP_START.split(line) if p.strip()]
    return parts or [line]


def _message(record: str) -> tuple[str, str]:
    """(rank label, message text) of one record; rank '' without a stamp or rank."""
    m = _STAMP.search(record)
    if not m:
        return "", record.strip()
    return " ".join(m.group("rank").split()), record[m.end() :].strip()


def _decode_sample(line_no: int, rank: str, msg: str) -> DecodeSample | None:
    running = _F_RUNNING.search(msg)
    tput = _F_GEN_TPUT.search(msg)
    if not running or not tput:
        return None
    accept = _F_ACCEPT_LEN.search(msg)
    rate = _F_ACCEPT_RATE.search(msg)
    graph = _F_GRAPH.search(msg)
    return DecodeSample(
        line_no=line_no,
        rank=rank,
        running_req=int(running.group(1)),
        gen_tok_s=float(tput.group(1)),
        accept_len=float(accept.group(1)) if accept else None,
        accept_rate=float(rate.group(1)) if rate else None,
        graph=(graph.group(2) == "True") if graph else None,
        graph_label=graph.group(1) if graph else None,
    )


def _capture_role(what: str) -> str:
    w = what.lower()
    if "draft" in w:
        return "draft"
    if "prefill" in w or "piecewise" in w:
        return "prefill"
    if "verify" in w:
        return "verify"
    return "target"


def _text_role(msg: str) -> str:
    m = msg.lower()
    if "draft" in m:
        return "draft"
    if "prefill" in m or "piecewise" in m:
        return "prefill"
    if "verify" in m:
        return "verify"
    if "decode" in m:
        return "target"
    return "all"


def _split_runs(lines: Iterable[str], source: str) -> list[_Raw]:
    runs: list[_Raw] = []
    cur: _Raw | None = None

    def ensure(line_no: int) -> _Raw:
        nonlocal cur
        if cur is None:
            cur = _Raw(source=source, run_index=len(runs) + 1, first_line=line_no)
            runs.append(cur)
        return cur

    for line_no, raw_line in enumerate(lines, start=1):
        if raw_line.lstrip().startswith("#"):
            continue
        for record in _records(raw_line):
            rank, msg = _message(record)
            if not msg:
                continue
            if _SERVER_ARGS.search(msg):
                # Every launch is a new run. SGLang logs a few lines (e.g. "Cuda graph is disabled
                # because ...") while resolving arguments, just before printing server_args: a run
                # that has no server_args and no decode line yet belongs to this launch.
                if cur is not None and cur.server_args is None and not cur.samples:
                    run = cur
                else:
                    cur = None
                    run = ensure(line_no)
                run.server_args = msg
                run.recognised += 1
                run.last_line = line_no
                continue
            kind = _classify(msg)
            if kind is None:
                continue
            run = ensure(line_no)
            run.recognised += 1
            run.significant = True
            run.last_line = line_no
            if kind == "decode":
                sample = _decode_sample(line_no, rank, msg)
                if sample is None:
                    run.malformed_decode += 1
                else:
                    run.samples.append(sample)
            elif kind == "startup":
                body = _STARTUP.search(msg)
                text = body.group("body") if body else ""
                inner = _STARTUP_GRAPH.search(text)
                if inner:
                    run.startup_graph.update({k: float(v) for k, v in _KV_NUM.findall(inner.group("inner"))})
                    text = text[: inner.start()] + text[inner.end() :]
                run.startup.update({k: float(v) for k, v in _KV_NUM.findall(text)})
            elif kind == "ready":
                run.ready = True
            elif kind == "capture":
                m = _CAPTURE.search(msg)
                assert m is not None
                if m.group("phase").lower() == "begin":
                    continue
                role = _capture_role(m.group("what"))
                secs = _CAPTURE_SECS.search(msg)
                run.events.append(
                    GraphEvent(line_no, "captured", role, float(secs.group(1)) if secs else None, msg)
                )
            elif kind == "capture_failed":
                run.events.append(GraphEvent(line_no, "capture_failed", _text_role(msg), None, msg))
            elif kind == "disabled":
                run.events.append(GraphEvent(line_no, "disabled", _text_role(msg), None, msg))
            elif kind == "fallback":
                run.events.append(GraphEvent(line_no, "fallback", _text_role(msg), None, msg))
    return runs


def _classify(msg: str) -> str | None:
    if _DECODE.search(msg):
        return "decode"
    if _STARTUP.search(msg):
        return "startup"
    if _READY.search(msg):
        return "ready"
    if _CAPTURE_FAILED.search(msg):
        return "capture_failed"
    if _CAPTURE.search(msg):
        return "capture"
    if _DISABLED.search(msg):
        return "disabled"
    if _FALLBACK.search(msg) and _GRAPHISH.search(msg):
        return "fallback"
    return None


# --------------------------------------------------------------------------- diagnosis


def _summarise(raw: _Raw) -> RunReport:
    """Numbers of one run, without baseline pairing or findings."""
    sargs = raw.server_args or ""
    spec_name = _spec_name(_arg(sargs, "speculative_algorithm")) if sargs else None
    tp = _arg(sargs, "tp_size") if sargs else None
    disabled_flags = [_arg(sargs, k) for k in ("disable_cuda_graph", "disable_decode_cuda_graph")]
    backend_decode = _arg(sargs, "cuda_graph_backend_decode") if sargs else None
    disable_cuda_graph: bool | None = None
    if sargs:
        disable_cuda_graph = any(v == "True" for v in disabled_flags) or backend_decode == "disabled"

    notes: list[str] = []
    samples = [s for s in raw.samples if s.running_req > 0 and s.gen_tok_s > 0]
    ranks = list(dict.fromkeys(s.rank for s in samples))
    rank = ranks[0] if ranks else None
    if len(ranks) > 1:
        notes.append(
            f"decode lines from {len(ranks)} ranks ({', '.join(r or '-' for r in ranks)}); using {rank or '-'}"
        )
        samples = [s for s in samples if s.rank == rank]
    if raw.malformed_decode:
        notes.append(
            f"{raw.malformed_decode} 'Decode batch' line(s) without #running-req/gen throughput ignored"
        )

    speculative = spec_name is not None or any(s.accept_len is not None for s in samples)
    report = RunReport(
        source=raw.source,
        run_index=raw.run_index,
        first_line=raw.first_line,
        last_line=raw.last_line,
        recognised_lines=raw.recognised,
        speculative_algorithm=spec_name,
        speculative=speculative,
        model_path=(_arg(sargs, "model_path") or None) if sargs else None,
        tp_size=int(tp) if tp and tp.isascii() and tp.isdigit() and len(tp) <= 9 else None,
        disable_cuda_graph=disable_cuda_graph,
        ready=raw.ready,
        startup_timings=dict(raw.startup),
        startup_graph_timings=dict(raw.startup_graph),
        graph_events=tuple(raw.events),
        notes=tuple(notes),
    )
    if not samples:
        return report

    accepts = [s.accept_len if s.accept_len is not None else 1.0 for s in samples]
    cycles = [1000.0 * a * s.running_req / s.gen_tok_s for a, s in zip(accepts, samples, strict=True)]
    rates = [s.accept_rate for s in samples if s.accept_rate is not None]
    tok_s = statistics.median(s.gen_tok_s for s in samples)
    per_req = statistics.median(s.gen_tok_s / s.running_req for s in samples)
    flags = [s.graph for s in samples if s.graph is not None]
    return dataclasses.replace(
        report,
        decode_lines=len(samples),
        decode_rank=rank,
        tok_s=tok_s,
        tok_s_per_request=per_req,
        mean_running_req=statistics.fmean(s.running_req for s in samples),
        mean_accept_len=statistics.fmean(accepts) if speculative else None,
        mean_accept_rate=statistics.fmean(rates) if rates else None,
        cycle_ms=statistics.median(cycles),
        graph_lines=sum(1 for f in flags if f),
        eager_lines=sum(1 for f in flags if not f),
        graph_label=next((s.graph_label for s in samples if s.graph_label), None),
    )


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
    reports = [_summarise(raw) for raw in _split_runs(lines, source)]
    return _diagnose(reports, tuple(audit_problems), base)


# A day of an SGLang server's log at the default level is tens of MiB; the cap bounds what a wrong
# path (a core dump, a sparse file) makes this command hold in memory.
MAX_LOG_BYTES = 256 * 1024 * 1024


class LogUnreadable(ValueError):
    """A log that is not read: a FIFO, a device, a directory, over MAX_LOG_BYTES, unreadable."""


def _open_log(name: str) -> io.TextIOWrapper:
    """The log as text lines, read like any file from outside: regular files only, bounded.

    ``open()`` would wait forever on a FIFO and read ``/dev/zero`` until memory runs out; the
    guarded reader refuses both at once. Decoded as before (UTF-8, undecodable bytes replaced,
    universal newlines).
    """
    from sglang_eagle_nccl.contract.files import UnreadableFile, read_regular_file

    try:
        data = read_regular_file(name, MAX_LOG_BYTES, follow_symlinks=True)
    except UnreadableFile as exc:
        raise LogUnreadable(
            f"{name}: cannot read this log: {exc.reason}. Fix: pass SGLang server log files (regular files of at most "
            f"{MAX_LOG_BYTES // (1024 * 1024)} MiB; cut a larger one, e.g. tail -c 200M server.log > part.log)"
        ) from None
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace")


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
        with _open_log(name) as fh:
            runs = [_summarise(raw) for raw in _split_runs(fh, name)]
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
