"""The ledger view's rules (offline/audit/ledger_join.py): per step exact or a range, the screen's order,
one tuner query per distinct (op, bytes, ranks, group) -- checked against small references written here.
Lines are parsed from text, as the reader gets them from a launch directory."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.contract import ledger as contract
from sglang_eagle_nccl.offline.audit.ledger_join import NCCL_COLLECTIVES, phase_rank, summarize
from sglang_eagle_nccl.offline.audit.ledger_read import LaunchLedger, parse_lines
from sglang_eagle_nccl.offline.audit.ledger_render import format_ledger, size_text


def _ident(pid: int) -> dict:
    return {"host": "h", "boot_id": "b", "pidns": "1", "pid": pid, "start": "7"}


def _file(pid: int, lines: list[dict]) -> str:
    return "\n".join(json.dumps(x) for x in [{"kind": "process", "identity": _ident(pid), "role": "scheduler"}, *lines])


def _step(phase: str, n: int, mode: str = "eager", batch: int = 1, tokens: int = 3) -> dict:
    return {"kind": "step", "phase": phase, "mode": mode, "batch": batch, "tokens": tokens, "count": n}


def _coll(phase: str, n: int, nbytes: int = 384, impl: str = "pynccl", op: str = "all_reduce", mode: str = "eager",
          group: str = "tp:0", batch: int = 1, tokens: int = 3) -> dict:
    return {"kind": "collective", "phase": phase, "mode": mode, "batch": batch, "tokens": tokens, "op": op,
            "group": group, "ranks": 2, "bytes": nbytes, "dtype": "bfloat16", "impl": impl, "count": n}


def _ledger(*files: str) -> LaunchLedger:
    out = LaunchLedger()
    for i, text in enumerate(files):
        parse_lines(text, f"f{i}", out)
    return out


def test_equal_ranks_give_an_exact_value_and_different_ones_a_range() -> None:
    same = _ledger(_file(1, [_step("decode", 4), _coll("decode", 20)]), _file(2, [_step("decode", 4), _coll("decode", 20)]))
    (line,) = summarize(same).lines
    assert line.per_step == {384: (5.0, 5.0)} and line.exact() and line.totals == {384: [20, 20]}
    differ = _ledger(_file(1, [_step("decode", 4), _coll("decode", 20)]), _file(2, [_step("decode", 5), _coll("decode", 20)]))
    (line,) = summarize(differ).lines
    assert line.per_step == {384: (4.0, 5.0)} and not line.exact()
    assert line.to_dict()["sizes"][0]["calls_per_step"] == [4, 5]


def test_a_process_without_steps_of_the_context_leaves_no_per_step_value() -> None:
    ledger = _ledger(_file(1, [_step("decode", 4), _coll("decode", 20)]), _file(2, [_coll("decode", 20)]))
    (line,) = summarize(ledger).lines
    assert line.per_step == {384: None} and not line.exact()


@settings(max_examples=30, deadline=None)
@given(st.permutations(list(contract.PHASES) + ["some new mode", contract.OUTSIDE]))
def test_the_screen_order_is_target_verify_first_then_the_known_phases(order: list[str]) -> None:
    ledger = _ledger(_file(1, [x for p in order for x in (_step(p, 1), _coll(p, 1))]))
    got = [line.phase for line in summarize(ledger).lines]
    assert got == [*contract.PHASES, "some new mode", contract.OUTSIDE]
    assert got[0] == "target verify"


def test_modes_order_eager_capture_replay_and_batches_ascend() -> None:
    lines = [_coll("decode", 1, mode=m, batch=b) for m in ("replay", "eager", "capture") for b in (8, 1)]
    got = [(line.mode, line.batch) for line in summarize(_ledger(_file(1, lines))).lines]
    assert got == [("eager", 1), ("eager", 8), ("capture", 1), ("capture", 8), ("replay", 1), ("replay", 8)]


def test_each_distinct_query_is_asked_once_and_joined_to_its_size() -> None:
    asked: list[tuple] = []

    def decide(collective: str, nbytes: int, nranks: int, nnodes: int, group: str) -> dict:
        asked.append((collective, nbytes, nranks, nnodes, group))
        return {"answer": f"{collective}:{nbytes}:{group}"}

    ledger = _ledger(
        _file(1, [_step("decode", 1), _coll("decode", 2), _coll("decode", 1, nbytes=1024),
                  _coll("decode", 1, op="all_gather"), _step("target verify", 1), _coll("target verify", 2),
                  _coll("decode", 1, op="barrier")]),
        _file(2, [_step("decode", 1), _coll("decode", 2)]),
    )
    view = summarize(ledger, decide)
    assert sorted(asked) == sorted({("AllReduce", 384, 2, 1, "tp"), ("AllReduce", 1024, 2, 1, "tp"),
                                    ("AllGather", 384, 2, 1, "tp")})
    for line in view.lines:
        for nbytes, d in line.decisions.items():
            assert d["answer"] == f"{NCCL_COLLECTIVES[line.op]}:{nbytes}:tp"
    barrier = [line for line in view.lines if line.op == "barrier"]
    assert barrier and barrier[0].decisions == {}


def test_phase_rank_puts_unknown_phases_between_known_ones_and_outside() -> None:
    assert phase_rank("target verify") < phase_rank("decode") < phase_rank("idle") < phase_rank("zzz")
    assert phase_rank("aaa") < phase_rank("zzz") < phase_rank(contract.OUTSIDE)


def test_bad_lines_are_listed_and_change_no_count() -> None:
    text = _file(1, [_step("decode", 2), _coll("decode", 4)])
    bad = "\n".join([
        json.dumps(_coll("decode", 5)),  # before any process line
        text,
        json.dumps({**_coll("decode", 9), "count": "9"}),
        json.dumps({**_coll("decode", 9), "count": True}),
        json.dumps({**_coll("decode", 9), "count": -1}),
        json.dumps({"kind": "process"}),
        json.dumps({"kind": "elsewhere"}),
        "[1, 2]",
        '{"kind": "collective", "phase": "decode", "cou',
    ])
    got = _ledger(bad)
    assert len(got.unreadable) == 8, got.unreadable
    (line,) = summarize(got).lines
    assert line.totals == {384: [4]} and line.per_step == {384: (2.0, 2.0)}


def test_size_text() -> None:
    assert [size_text(n) for n in (0, 256, 1023, 1024, 43008, 1536, 3 << 20, 5 << 30)] == [
        "0 B", "256 B", "1023 B", "1 KiB", "42 KiB", "1.5 KiB", "3 MiB", "5 GiB"]


def test_the_screen_answers_the_seed_question() -> None:
    ledger = _ledger(_file(1, [_step("target verify", 4), _coll("target verify", 8, nbytes=43008, impl="torch_nccl"),
                               _step("decode", 2, mode="replay"), _coll("decode", 3, impl="pynccl", mode="capture")]),
                     _file(2, [_step("target verify", 4), _coll("target verify", 8, nbytes=43008, impl="torch_nccl")]))
    ledger.processes[next(iter(ledger.processes))].models = {"target": {"layers": 4}}
    view = summarize(ledger, lambda c, b, r, n, g: {"answer": "rule 1: ring/LL"})
    text = format_ledger(view, {("tp:0", "torch_nccl"): "torch nccl group, created lazily, profile ✓"})
    lines = text.splitlines()
    assert lines[1].startswith("target verify (eager, 3 tokens, batch 1); 4 steps per rank:")
    assert lines[2] == ("  2 all-reduces per step of 42 KiB bfloat16 on tp:0 (2 ranks) via torch ProcessGroupNCCL "
                        "(torch nccl group, created lazily, profile ✓) → rule 1: ring/LL")
    assert "decode (capture, 3 tokens, batch 1):" in text
    assert "3 all-reduces in all of 384 B" in text
    assert "decode (graph replay, 3 tokens, batch 1); 2 steps per rank: no collective" in text


def test_per_layer_is_shown_when_the_model_says_how_many_layers() -> None:
    ledger = _ledger(_file(1, [_step("decode", 2), _coll("decode", 18), _step("draft extend", 1),
                               _coll("draft extend", 3, impl="gloo")]))
    ledger.processes[next(iter(ledger.processes))].models = {"target": {"layers": 4}, "draft": {"layers": 1}}
    text = format_ledger(summarize(ledger))
    assert "2 all-reduces per layer (× 4 layers + 1) = 9 per step of 384 B" in text
    assert "3 all-reduces per step of 384 B bfloat16 on tp:0 (2 ranks) via gloo (torch.distributed on CPU)" in text


def test_nothing_recorded_says_how_to_turn_it_on() -> None:
    assert "--nccl-ledger" in format_ledger(summarize(LaunchLedger()))


def test_only_nccl_communicators_get_a_note() -> None:
    from types import SimpleNamespace

    from sglang_eagle_nccl.offline.audit.judge import CommVerdict
    from sglang_eagle_nccl.offline.audit.ledger_render import comm_notes

    comms = [
        CommVerdict(1, "scheduler", "group", "tp", "tp:0", [0, 1], 0, "nccl", "ok"),
        CommVerdict(1, "scheduler", "pynccl", "tp", "tp:0", [0, 1], 0, None, "fail", ["NCCL_PROTO=Simple, expected LL"]),
        CommVerdict(1, "scheduler", "group", "world", "world:0", [0, 1], 0, "gloo", "absent"),
    ]
    got = comm_notes(SimpleNamespace(communicators=comms))
    assert set(got) == {("tp:0", "torch_nccl"), ("tp:0", "pynccl")}
    assert got[("tp:0", "torch_nccl")].endswith("created lazily at its first collective, profile ✓")
    assert got[("tp:0", "pynccl")].endswith("profile ✗: NCCL_PROTO=Simple, expected LL")


def test_the_json_form_of_a_line_and_a_view() -> None:
    ledger = _ledger(_file(1, [_step("decode", 2), _coll("decode", 5), _step("extend", 3), _coll("extend", 1)]),
                     _file(2, [_step("decode", 3), _coll("decode", 5), _coll("decode", 1, nbytes=8, mode="capture")]))
    view = summarize(ledger, lambda c, b, r, n, g: {"answer": f"{b}"})
    got = view.to_dict()
    assert got["processes"] == 2 and got["unreadable"] == [] and got["decision_note"] is None
    assert got["steps"][0] == {"phase": "decode", "mode": "eager", "batch": 1, "tokens": 3, "per_process": [2, 3],
                               "replays": []}
    assert got["lines"][0] == {
        "phase": "decode", "mode": "eager", "batch": 1, "tokens": 3, "op": "all_reduce", "group": "tp:0",
        "impl": "pynccl", "implementation": "PyNccl", "ranks": 2, "dtype": "bfloat16", "nccl": True, "exact": False,
        "sizes": [{"bytes": 384, "calls_per_step": [1.667, 2.5], "totals": [5, 5], "decision": {"answer": "384"},
                   "actual": None, "differs": False}],
    }
    extend = [x for x in got["lines"] if x["phase"] == "extend"][0]
    assert extend["sizes"][0]["calls_per_step"] == 0.333 and extend["exact"] is True
    capture = [x for x in got["lines"] if x["mode"] == "capture"][0]
    assert capture["sizes"][0]["calls_per_step"] is None and capture["sizes"][0]["totals"] == [1]


def test_whole_ratios_are_whole_numbers() -> None:
    ledger = _ledger(_file(1, [_step("decode", 2), _coll("decode", 6), _coll("decode", 5, impl="gloo")]))
    by = {x["impl"]: x["sizes"][0]["calls_per_step"] for x in summarize(ledger).to_dict()["lines"]}
    assert by == {"pynccl": 3, "gloo": 2.5} and isinstance(by["pynccl"], int)
    assert [x["nccl"] for x in summarize(ledger).to_dict()["lines"]] == [False, True]


def test_inside_a_context_lines_sort_by_op_group_and_implementation() -> None:
    lines = [_coll("decode", 1, op="all_reduce", group="tp:0", impl="pynccl"),
             _coll("decode", 1, op="all_reduce", group="tp:0", impl="ca"),
             _coll("decode", 1, op="all_reduce", group="attn_tp:0", impl="pynccl"),
             _coll("decode", 1, op="all_gather", group="tp:0", impl="pynccl")]
    got = [(x.op, x.group, x.impl) for x in summarize(_ledger(_file(1, lines[::-1]))).lines]
    assert got == [("all_gather", "tp:0", "pynccl"), ("all_reduce", "attn_tp:0", "pynccl"),
                   ("all_reduce", "tp:0", "ca"), ("all_reduce", "tp:0", "pynccl")]


def test_steps_sort_like_the_screen_and_a_replay_alone_has_no_steps() -> None:
    ledger = _ledger(_file(1, [
        _step("decode", 2), _step("target verify", 1), _step("decode", 1, batch=None, tokens=None),
        _step("decode", 1, mode="some new mode"), _step("decode", 1, tokens=None),
        {"kind": "replay", "phase": "decode", "mode": "replay", "batch": 8, "tokens": 8, "runner": "A", "count": 2},
        {"kind": "replay", "phase": "decode", "mode": "replay", "batch": 8, "tokens": 8, "runner": "B", "count": 3},
    ]))
    got = [(s.phase, s.mode, s.batch, s.tokens, s.per_process, s.replays) for s in summarize(ledger).steps]
    assert got == [
        ("target verify", "eager", 1, 3, [1], []),
        ("decode", "eager", None, None, [1], []),
        ("decode", "eager", 1, None, [1], []),
        ("decode", "eager", 1, 3, [2], []),
        ("decode", "replay", 8, 8, [], [5]),
        ("decode", "some new mode", 1, 3, [1], []),
    ]


def test_an_unknown_implementation_is_shown_by_its_name_and_missing_sizes_as_zero() -> None:
    line = _coll("decode", 2, impl="future_impl")
    other = _coll("decode", 1, impl="future_impl", nbytes=0)
    del line["bytes"], line["ranks"], other["ranks"]
    view = summarize(_ledger(_file(1, [_step("decode", 1), line, other])))
    (got,) = view.to_dict()["lines"]
    assert got["implementation"] == "future_impl" and got["ranks"] == 0
    assert got["sizes"] == [{"bytes": 0, "calls_per_step": 3, "totals": [3], "decision": None, "actual": None,
                             "differs": False}]
    assert view.to_dict()["models"] == {}


def test_the_view_carries_the_models() -> None:
    ledger = _ledger(_file(1, [_step("decode", 1), _coll("decode", 1)]))
    next(iter(ledger.processes.values())).models = {"target": {"layers": 3}}
    assert summarize(ledger).to_dict()["models"] == {"target": {"layers": 3}}
