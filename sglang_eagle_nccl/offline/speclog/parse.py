"""Read SGLang server logs into runs: one per launch, with the decode samples, start-up timings and
CUDA-graph events of each, and the numbers its decode lines imply (:func:`summarise`). Judging a
run is :mod:`.analyze`.

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
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl.offline.speclog.estimate import Estimate

__all__ = [
    "DecodeSample",
    "GraphEvent",
    "LogUnreadable",
    "MAX_LOG_BYTES",
    "RunReport",
    "open_log",
    "split_runs",
    "summarise",
]

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


def split_runs(lines: Iterable[str], source: str) -> list[_Raw]:
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


# --------------------------------------------------------------------------- the numbers of a run


def summarise(raw: _Raw) -> RunReport:
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


# --------------------------------------------------------------------------- reading a log file

# A day of an SGLang server's log at the default level is tens of MiB; the cap bounds what a wrong
# path (a core dump, a sparse file) makes this command hold in memory.
MAX_LOG_BYTES = 256 * 1024 * 1024


class LogUnreadable(ValueError):
    """A log that is not read: a FIFO, a device, a directory, over MAX_LOG_BYTES, unreadable."""


def open_log(name: str) -> io.TextIOWrapper:
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
