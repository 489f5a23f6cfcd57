"""`analyze` on real SGLang log lines captured from the CPU end-to-end runs (0.5.23 and 0.5.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_eagle_nccl.offline.speclog.analyze import analyze_logs

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "sglang_logs"


def _one(name: str, **kw):
    (report,) = analyze_logs([str(FIX / name)], **kw)
    return report.to_dict()


@pytest.mark.parametrize(
    "name,version_tp,speculative",
    [
        ("real-cpu-0.5.23-engine-tp2-plain.log", 2, False),
        ("real-cpu-0.5.23-engine-tp2-eagle3.log", 2, True),
        ("real-cpu-0.5.23-http-tp2-eagle.log", 2, True),
        ("real-cpu-0.5.4-engine-tp2-plain.log", 2, False),
        ("real-cpu-0.5.4-http-tp2-plain.log", 2, False),
    ],
)
def test_real_logs_parse(name, version_tp, speculative):
    r = _one(name)
    assert r["tp_size"] == version_tp
    assert r["speculative"] is speculative
    assert r["decode_lines"] >= 10 and r["tok_s"] > 0
    assert r["eager_lines"] == r["decode_lines"]  # CPU runs have no CUDA graphs


def test_real_eagle3_log_against_real_baseline_names_the_bottleneck():
    reports = analyze_logs(
        [
            str(FIX / "real-cpu-0.5.23-engine-tp2-plain.log"),
            str(FIX / "real-cpu-0.5.23-engine-tp2-eagle3.log"),
        ]
    )
    spec = next(r.to_dict() for r in reports if r.to_dict()["speculative"])
    assert spec["speculative_algorithm"] == "EAGLE3"
    assert spec["mean_accept_len"] == pytest.approx(1.0)  # random dummy draft: nothing accepted
    assert spec["baseline_source"].startswith("run 1 of") and "plain" in spec["baseline_source"]
    assert spec["estimate"]["outcome"] == "loses"
    assert spec["startup_graph_timings"]["target_verify"] == 0.0
    assert any(f.startswith("verify runs without CUDA graph") for f in spec["findings"])
    assert "speculation loses below accept length" in spec["verdict"]


def test_audit_problems_are_reported_as_findings():
    r = _one(
        "real-cpu-0.5.23-engine-tp2-eagle3.log",
        audit_problems=["NCCL profile not in force on rank 1 (group tp, pid 42)"],
    )
    assert any("NCCL profile not in force on rank 1" in f for f in r["findings"])
