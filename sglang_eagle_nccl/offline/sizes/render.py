"""The size report as the `sizes` and `tuner --model-config` commands print it: sizes, formula, and
the predicted path and tuner rule of each phase.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import fmt_bytes, path_info

__all__ = [
    "format_size_report",
]


def _path_text(p: Mapping[str, Any]) -> str:
    if p["path"] == "depends":
        parts = [f"{ic}: {_one_path(r)}" for ic, r in p["by_interconnect"].items()]
        return "depends on the interconnect -- " + "; ".join(parts)
    return _one_path(p)


def _one_path(r: Mapping[str, Any]) -> str:
    if r.get("path") is None:
        return "undetermined"
    text = r["title"] + (f" [{r['impl']}]" if r.get("impl") else "")
    if r.get("reaches_nccl") is True:
        text += " -> NCCL"
    elif r.get("reaches_nccl") is False:
        text += " (no NCCL)"
    if r.get("may_instead"):
        text += " (unless " + ", ".join(path_info(m).title for m in r["may_instead"]) + " takes it)"
    return text


def format_size_report(report: Mapping[str, Any]) -> str:
    """Human-readable text for :func:`size_report`: sizes, formula, predicted path per phase."""
    m = report["model"]
    lines = [
        f"model: hidden_size {m['hidden_size']} ({m['hidden_from']}), {m['dtype']} ({m['dtype_from']}), "
        f"{report['bytes_per_token']} bytes per token; TP {report['tp_size']}, batch {report['batch_size']}",
        f"formula: {report['formula']}",
    ]
    if report.get("all_reduces_per_forward"):
        lines.append(f"all-reduces per forward pass: about {report['all_reduces_per_forward']} (2 x {m['num_hidden_layers']} layers + 1)")
    lines.append("")
    width = max(len(p["label"]) for p in report["phases"])
    for p in report["phases"]:
        lines.append(f"{p['label']:<{width}}  {fmt_bytes(p['bytes'])}")
        lines.append(f"{'':<{width}}    = {p['formula']}")
        mode = {"cuda_graph": "inside a CUDA graph", "eager": "eager", "piecewise_cuda_graph": "inside a piecewise CUDA graph"}[p["mode"]]
        if p["path"] is not None:
            lines.append(f"{'':<{width}}    path ({mode}, predicted): {_path_text(p['path'])}")
        else:
            lines.append(f"{'':<{width}}    runs {mode}")
        if "tuner" in p:
            rule = p["tuner"]
            answer = "no rule matches: NCCL decides" if rule is None else (
                f"{rule['rule']}: {rule['algorithm']}/{rule['protocol']}"
                + (f", {rule['channels']} channels" if rule["channels"] else ""))
            lines.append(f"{'':<{width}}    tuner ({report['tuner_profile']}, where NCCL carries it): {answer}")
    if report.get("sglang_version"):
        first = next((p["path"] for p in report["phases"] if p["path"]), None)
        if first:
            lines.append("")
            lines.append(
                f"paths are predictions from SGLang {report['sglang_version']}'s source thresholds and defaults, not "
                f"measurements (rules for {first['rules']['versions']}: {first['rules']['source']})"
            )
            notes = sorted({n for p in report["phases"] if p["path"] for n in p["path"]["notes"]})
            for n in notes:
                lines.append(f"  note: {n}")
    for n in report.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)
