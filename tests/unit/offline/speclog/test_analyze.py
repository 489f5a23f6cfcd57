"""Tests for sglang_eagle_nccl.offline.speclog: parse (SGLang server-log parsing), analyze (per-run diagnosis)
and render (text, JSON).

Fixtures in tests/fixtures/sglang_logs are written from the format strings of the real
SGLang wheels; each names the source file and line of every format it uses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.offline.speclog.analyze import analyze_logs, parse_log_lines
from sglang_eagle_nccl.offline.speclog.parse import RunReport
from sglang_eagle_nccl.offline.speclog.render import format_text, reports_to_json

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "sglang_logs"
V043 = FIXTURES / "sglang-0.4.3_tp2_baseline_then_eagle.log"
V054 = FIXTURES / "sglang-0.5.4_tp8_eagle3_disable_cuda_graph.log"
V0510_BASE = FIXTURES / "sglang-0.5.10_tp8_baseline.log"
V0510_SPEC = FIXTURES / "sglang-0.5.10_tp8_eagle3.log"
V0523 = FIXTURES / "sglang-0.5.23_tp4_eagle3_graph_then_no_graph.log"

# Line formats as SGLang 0.5.10 prints them (srt/observability/scheduler_metrics_mixin.py:608).
BASE_LINE = (
    "[2026-11-29 10:00:{s:02d} TP0] Decode batch, #running-req: {n}, #token: 500, token usage: 0.01, "
    "cuda graph: True, gen throughput (token/s): {t:.2f}, #queue-req: 0, "
)
SPEC_LINE = (
    "[2026-11-29 10:05:{s:02d} TP0] Decode batch, #running-req: {n}, #token: 900, token usage: 0.01, "
    "accept len: {a:.2f}, accept rate: 0.67, cuda graph: {g}, gen throughput (token/s): {t:.2f}, #queue-req: 0, "
)
ARGS_LINE = "[2026-11-29 10:0{m}:00] server_args=ServerArgs(model_path='m', tp_size=8, speculative_algorithm={alg}, disable_cuda_graph=False)"


def _base(t: float = 82.0, n: int = 1, count: int = 4) -> list[str]:
    return [BASE_LINE.format(s=i, n=n, t=t) for i in range(count)]


def _spec(a: float = 2.0, t: float = 60.0, n: int = 1, g: str = "True", count: int = 4) -> list[str]:
    return [SPEC_LINE.format(s=i, n=n, a=a, t=t, g=g) for i in range(count)]


def _runs(path: Path) -> list[RunReport]:
    return parse_log_lines(path.read_text().splitlines(), source=path.name)


# ----------------------------------------------------------------------- the seed story


def test_seed_numbers_82_vs_60_tok_s_give_33ms_cycle_and_speculation_loses() -> None:
    lines = [
        ARGS_LINE.format(m=0, alg="None"),
        *_base(82.0),
        ARGS_LINE.format(m=5, alg="'EAGLE3'"),
        *_spec(2.0, 60.0),
    ]
    base, spec = parse_log_lines(lines)
    assert base.cycle_ms == pytest.approx(12.2, abs=0.05)
    assert spec.cycle_ms == pytest.approx(33.3, abs=0.05)
    assert spec.mean_accept_len == pytest.approx(2.0)
    assert spec.verdict is not None
    assert "speculation loses below accept length 2.7" in spec.verdict


def test_seed_fixture_pair_across_files_is_paired_and_loses() -> None:
    spec, base = analyze_logs([V0510_SPEC, V0510_BASE])
    assert base.speculative is False and spec.speculative is True
    assert spec.baseline_source == base.label
    assert spec.tok_s == pytest.approx(60.4, abs=0.2)
    assert spec.cycle_ms == pytest.approx(33.2, abs=0.1)
    assert spec.baseline_decode_ms == pytest.approx(12.17, abs=0.02)
    assert spec.estimate is not None and spec.estimate.outcome == "loses"


def test_slow_verify_on_a_graph_points_at_nccl() -> None:
    spec, _ = analyze_logs([V0510_SPEC, V0510_BASE])
    assert any("although it ran on a CUDA graph" in f and "NCCL" in f for f in spec.findings)


# ----------------------------------------------------------------------- per-version formats


def test_043_file_holds_two_runs_split_on_server_args() -> None:
    runs = _runs(V043)
    assert [r.run_index for r in runs] == [1, 2]
    assert [r.speculative_algorithm for r in runs] == [None, "EAGLE"]
    assert [r.tp_size for r in runs] == [2, 2]


def test_043_decode_numbers_parsed() -> None:
    base, spec = _runs(V043)
    assert base.decode_lines == 7 and spec.decode_lines == 7
    assert base.tok_s == pytest.approx(82.19, abs=0.001)  # median of the 7 lines
    assert spec.mean_accept_len == pytest.approx(2.0, abs=0.01)
    assert spec.tok_s == pytest.approx(60.47, abs=0.01)


def test_043_idle_gap_line_does_not_skew_the_median() -> None:
    base, _ = _runs(V043)  # first decode line reports 3.08 tok/s (it spans the idle gap)
    assert base.cycle_ms == pytest.approx(1000 / 82.21, abs=0.05)


def test_043_spec_run_pairs_with_baseline_in_same_file() -> None:
    base, spec = _runs(V043)
    assert spec.baseline_source == base.label
    assert spec.verdict is not None and "speculation loses" in spec.verdict


def test_043_capture_lines_become_events_with_seconds() -> None:
    base, spec = _runs(V043)
    assert sorted(e.seconds for e in base.graph_events) == [11.87, 11.92]
    assert len(spec.graph_events) == 4  # target + draft (same text in 0.4.3) on two ranks
    assert all(e.kind == "captured" for e in spec.graph_events)


def test_054_disabled_cuda_graph_is_the_first_finding() -> None:
    (run,) = _runs(V054)
    assert run.disable_cuda_graph is True
    assert run.eager_lines == 5 and run.graph_lines == 0
    assert run.findings[0].startswith("verify runs without CUDA graph")
    assert "'cuda graph: False' on all 5 decode log lines" in run.findings[0]


def test_054_forward_ct_in_decode_line_is_parsed() -> None:
    (run,) = _runs(V054)  # "Decode batch [43], #running-req: 1, ..."
    assert run.decode_lines == 5
    assert run.mean_accept_rate == pytest.approx(0.668, abs=0.001)


def test_0510_comment_header_lines_are_ignored() -> None:
    (run,) = _runs(V0510_BASE)
    assert run.first_line == 8  # the server_args line after the 7 header lines
    assert {e.kind for e in run.graph_events} == {"captured", "disabled"}
    assert sum(e.kind == "captured" for e in run.graph_events) == 8


def test_0523_startup_timings_parsed() -> None:
    first, second = _runs(V0523)
    assert first.startup_graph_timings["target_verify"] == 9.87
    assert first.startup_graph_timings["draft_decode"] == 4.12
    assert first.startup_timings["load_weight"] == 20.31
    assert first.startup_timings["tokenizer_e2e"] == 44.39
    assert second.startup_graph_timings["target_verify"] == 0.0


def test_0523_no_verify_graph_at_startup_is_reported() -> None:
    _, second = _runs(V0523)
    assert "target_verify=0.00 s" in second.findings[0]


def test_0523_prefill_graph_disable_does_not_blame_verify() -> None:
    first, _ = _runs(V0523)
    assert any(e.kind == "disabled" and e.role == "prefill" for e in first.graph_events)
    assert not any("verify runs without CUDA graph" in f for f in first.findings)


def test_0523_target_verify_capture_is_a_verify_event() -> None:
    first, _ = _runs(V0523)
    roles = {(e.role, e.seconds) for e in first.graph_events if e.kind == "captured"}
    assert ("verify", 9.87) in roles and ("draft", 4.12) in roles


def test_0523_millisecond_timestamps_and_rank_label() -> None:
    first, _ = _runs(V0523)
    assert first.decode_rank == "TP0"
    assert first.decode_lines == 5


def test_0523_dict_server_args_parsed() -> None:
    first, second = _runs(V0523)
    assert (first.speculative_algorithm, first.model_path, first.tp_size) == ("EAGLE3", "Qwen/Qwen3-32B", 4)
    assert (first.disable_cuda_graph, second.disable_cuda_graph) == (False, True)


# ----------------------------------------------------------------------- baseline pairing


def test_explicit_baseline_is_used_when_logs_have_none() -> None:
    first, second = analyze_logs([V0523], baseline_decode_ms=12.0)
    assert first.baseline_source == "baseline_decode_ms argument"
    assert first.estimate is not None and first.estimate.outcome == "wins"
    assert second.estimate is not None and second.estimate.outcome == "loses"


def test_explicit_baseline_overrides_the_log_baseline() -> None:
    spec, _ = analyze_logs([V0510_SPEC, V0510_BASE], baseline_decode_ms=20.0)
    assert spec.baseline_decode_ms == 20.0


def test_baseline_of_another_model_is_not_used() -> None:
    spec, _ = analyze_logs([V054, V0510_BASE])
    assert spec.estimate is None
    assert any("other models" in n for n in spec.notes)
    assert any("no baseline decode step" in n for n in spec.notes)


def test_baseline_with_closest_batch_size_wins() -> None:
    lines = [
        *_base(82.0, n=1),
        ARGS_LINE.format(m=1, alg="None"),
        *_base(300.0, n=8),
        ARGS_LINE.format(m=5, alg="'EAGLE3'"),
        *_spec(2.0, 400.0, n=8),
    ]
    one, eight, spec = parse_log_lines(lines)
    assert spec.baseline_source == eight.label
    assert spec.baseline_decode_ms == pytest.approx(1000 * 8 / 300)


def test_batch_size_mismatch_is_noted() -> None:
    lines = [*_base(82.0, n=1), ARGS_LINE.format(m=5, alg="'EAGLE3'"), *_spec(2.0, 240.0, n=4)]
    _, spec = parse_log_lines(lines)
    assert any("batch sizes differ" in n for n in spec.notes)


def test_bad_baseline_value_names_argument() -> None:
    with pytest.raises(ValueError, match=r"baseline_decode_ms.*-1"):
        analyze_logs([V0523], baseline_decode_ms=-1)


# ----------------------------------------------------------------------- audit and graph findings


def test_audit_problems_become_findings_and_text() -> None:
    reports = analyze_logs([V0510_SPEC, V0510_BASE], audit_problems=["NCCL profile not in force on rank 3"])
    assert "audit: NCCL profile not in force on rank 3" in reports[0].findings
    assert "audit: NCCL profile not in force on rank 3" in format_text(reports)


def test_some_eager_verify_lines_are_counted() -> None:
    lines = [ARGS_LINE.format(m=5, alg="'EAGLE3'"), *_spec(g="True", count=3), *_spec(g="False", count=2)]
    (run,) = parse_log_lines(lines, baseline_decode_ms=12.0)
    assert (run.graph_lines, run.eager_lines) == (3, 2)
    assert "on 2 of 5 decode log lines" in run.findings[0]


def test_plain_decode_without_graph_is_flagged() -> None:
    lines = [line.replace("cuda graph: True", "cuda graph: False") for line in _base()]
    (run,) = parse_log_lines(lines)
    assert run.findings[0].startswith("decode runs without CUDA graph")


def test_cuda_graph_disabled_message_is_verify_evidence() -> None:
    lines = [
        ARGS_LINE.format(m=5, alg="'EAGLE3'"),
        "[2026-11-29 10:05:00] Cuda graph is disabled because of using torch native attention backend",
        *[line.replace("cuda graph: True, ", "") for line in _spec()],
    ]
    (run,) = parse_log_lines(lines, baseline_decode_ms=12.0)
    assert "torch native attention backend" in run.findings[0]


def test_capture_failure_is_verify_evidence() -> None:
    lines = [
        ARGS_LINE.format(m=5, alg="'EAGLE3'"),
        "Exception: Capture cuda graph failed: CUDA out of memory.",
        "1. disable cuda graph by --disable-cuda-graph",
        *_spec(),
    ]
    (run,) = parse_log_lines(lines)
    assert [e.kind for e in run.graph_events] == ["capture_failed"]


def test_run_without_decode_lines_says_so() -> None:
    lines = [
        ARGS_LINE.format(m=0, alg="'EAGLE3'"),
        "[2026-11-29 10:00:05 TP0] Capture cuda graph end. Time elapsed: 3.00 s",
    ]
    (run,) = parse_log_lines(lines)
    assert run.decode_lines == 0
    assert "no decode batch lines" in run.findings[0]


def test_winning_run_has_no_verdict_finding() -> None:
    (run,) = parse_log_lines(
        [ARGS_LINE.format(m=5, alg="'EAGLE3'"), *_spec(3.0, 150.0)], baseline_decode_ms=12.0
    )
    assert run.estimate is not None and run.estimate.outcome == "wins"
    assert run.findings == ()


# ----------------------------------------------------------------------- robustness


def test_ansi_colour_codes_are_stripped() -> None:
    lines = [f"\x1b[32m{line}\x1b[0m" for line in _spec()]
    (run,) = parse_log_lines(lines, baseline_decode_ms=12.0)
    assert run.decode_lines == 4 and run.mean_accept_len == pytest.approx(2.0)


def test_interleaved_rank_prefixes_and_foreign_prefixes() -> None:
    lines = [
        "(SchedulerActor pid=4242) " + _spec()[0],
        "[2026-11-29 10:05:00 TP3] Load weight end. type=X, avail mem=1.00 GB",
        "sglang-1  | " + _spec()[1],
        "[2026-11-29 10:05:01 TP1] Capture cuda graph end. Time elapsed: 1.00 s",
        _spec()[2],
    ]
    (run,) = parse_log_lines(lines)
    assert run.decode_lines == 3 and run.decode_rank == "TP0"
    assert len(run.graph_events) == 1


def test_two_records_glued_on_one_line_are_both_read() -> None:
    glued = _spec()[0] + "[2026-11-29 10:05:09 TP1] Capture cuda graph end. Time elapsed: 2.50 s"
    (run,) = parse_log_lines([glued])
    assert run.decode_lines == 1
    assert [e.seconds for e in run.graph_events] == [2.5]


def test_decode_lines_from_several_ranks_use_the_first() -> None:
    lines = [*_spec(t=60.0), *[line.replace(" TP0]", " DP1 TP1]") for line in _spec(t=10.0)]]
    (run,) = parse_log_lines(lines)
    assert run.decode_rank == "TP0" and run.tok_s == pytest.approx(60.0)
    assert any("2 ranks" in n for n in run.notes)


def test_block_accept_len_is_not_read_as_accept_len() -> None:
    line = _spec(2.0)[0].replace(
        "accept rate: 0.67, ", "accept rate: 0.67, cap len: 4.00, block accept len: 3.50, "
    )
    (run,) = parse_log_lines([line])
    assert run.mean_accept_len == pytest.approx(2.0)


def test_accept_len_alone_marks_a_run_speculative() -> None:
    (run,) = parse_log_lines(_spec())
    assert run.speculative is True and run.speculative_algorithm is None


def test_garbage_lines_are_ignored() -> None:
    lines = ["\x00\xff binary", "Traceback (most recent call last):", "Decode batch", "", *_base(), "}{[]"]
    (run,) = parse_log_lines(lines)
    assert run.decode_lines == 4
    assert any("without #running-req/gen throughput" in n for n in run.notes)


@settings(max_examples=200)
@given(st.lists(st.text(max_size=200), max_size=20))
def test_arbitrary_text_never_raises(lines: list[str]) -> None:
    reports = parse_log_lines(lines)
    format_text(reports)
    json.dumps(reports_to_json(reports))


# ----------------------------------------------------------------------- empty input and output


def test_empty_lines_give_no_runs_and_a_clear_text() -> None:
    assert parse_log_lines([]) == []
    assert "no SGLang server runs found" in format_text([])


def test_file_without_sglang_lines_gets_a_report_saying_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("hello\nworld\n")
    (run,) = analyze_logs([empty])
    assert run.decode_lines == 0
    assert "no SGLang log lines recognised" in format_text([run])


def test_no_paths_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="no log files given"):
        analyze_logs([])


def test_json_output_is_serialisable_and_carries_the_numbers() -> None:
    data = reports_to_json(analyze_logs([V0510_SPEC, V0510_BASE]))
    text = json.dumps(data)
    assert data[0]["estimate"]["outcome"] == "loses"
    assert data[0]["verdict"] == data[0]["estimate"]["verdict"]
    assert data[0]["cycle_ms"] == pytest.approx(33.18, abs=0.05)
    assert "graph_events" in text


def test_text_output_prints_the_verdict_once() -> None:
    text = format_text(analyze_logs([V0510_SPEC, V0510_BASE]))
    assert text.count("speculation loses below accept length") == 1
    assert "to win at accept length 2.00 the cycle must be under" in text


def test_cpu_graph_label_is_quoted_as_logged() -> None:
    lines = [line.replace("cuda graph: True", "cpu graph: False") for line in _spec()]
    (run,) = parse_log_lines(lines, baseline_decode_ms=12.0)
    assert run.graph_label == "cpu graph"
    assert "'cpu graph: False' on all 4 decode log lines" in run.findings[0]


def test_audit_problems_are_not_pinned_on_a_file_without_sglang_lines(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    (run,) = analyze_logs([empty], audit_problems=["NCCL profile not in force on rank 3"])
    assert run.findings == ()
