"""Judging records against the profile in force at that moment; '–' for what does not exist;
launches where nothing real was audited do not pass; the writer never raises."""

from __future__ import annotations

import json

from sglang_eagle_nccl.contract.launch_dir import open_launch
from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
from sglang_eagle_nccl.offline.audit.judge import judge
from sglang_eagle_nccl.offline.audit.read import read_launch
from sglang_eagle_nccl.offline.audit.render import format_text
from support.audit_records import ident
from support.jsonl import read_jsonl


def _launch(tmp_path, records_by_pid):
    run_dir = open_launch(
        str(tmp_path), {"profile": {"name": "p", "env": {"NCCL_ALGO": "Ring"}}}, required=True
    )
    for pid, records in records_by_pid.items():
        with open(f"{run_dir}/proc-h-{pid}.jsonl", "w") as fh:
            for r in records:
                fh.write(json.dumps({"ts": 0, "role": "child", **ident(pid), **r}) + "\n")
    meta, procs = read_launch(run_dir)
    return judge(meta, procs, run_dir)


def _start(env, **extra):
    return {
        "event": "process_start",
        "role": "launcher",
        "expected_env": env,
        "env": env,
        "group_envs": {},
        "sglang_wins": [],
        **extra,
    }


def _sched(env):
    group = {
        "event": "group_created",
        "group": "world",
        "env": env,
        "device_group_backend": "gloo",
        "torch_comm": "none",
    }
    return [
        {"event": "process_role", "title": "sglang::scheduler_TP0"},
        {"event": "scheduler_start", "env": env, "ranks": {}},
        group,
    ]


def test_records_after_a_profile_change_are_judged_against_the_new_profile(tmp_path):
    old, new = {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}
    changed = {
        "event": "profile_changed",
        "expected_env": new,
        "group_envs": {},
        "sglang_wins": [],
        "env": new,
    }
    ok = _launch(tmp_path / "a", {1: [_start(old), changed, *_sched(new)]})
    assert ok.verdict == "ok", ok.problems
    # Records that end before a restore still hold the old value: that is a failure, not a pass.
    stale = _launch(tmp_path / "b", {1: [_start(old), changed, *_sched(old)]})
    assert stale.verdict == "fail"
    assert any("NCCL_ALGO=Ring (profile: Tree)" in n for p in stale.processes for n in p.notes)


def test_what_does_not_exist_is_a_dash_never_a_check(tmp_path):
    env = {"NCCL_ALGO": "Ring"}
    group = {
        "event": "group_created",
        "group": "tp",
        "env": env,
        "device_group_backend": "gloo",
        "torch_comm": "none",
    }
    pynccl = {"event": "pynccl_created", "group": "tp", "env": env, "available": False}
    report = _launch(tmp_path, {1: [_start(env), *_sched(env), group, pynccl]})
    assert {c.verdict for c in report.communicators} == {"absent"} and report.verdict == "ok"
    text = format_text(report, verbose=True)
    assert "  – scheduler" in text and "✓ scheduler" not in text.split("Communicators")[1]


def test_values_print_as_nccl_users_write_them(tmp_path):
    report = _launch(tmp_path, {1: [_start({"NCCL_ALGO": "Ring"}), *_sched({})]})
    assert any("NCCL_ALGO=(unset) (profile: Ring)" in n for p in report.processes for n in p.notes)
    assert "None" not in format_text(report, verbose=True)


def test_only_helper_processes_is_not_a_pass(tmp_path):
    env = {"NCCL_ALGO": "Ring"}
    report = _launch(tmp_path, {1: [_start(env, role="child")], 2: [_start(env, role="child")]})
    assert report.verdict == "fail"
    assert any("nothing real was audited" in p for p in report.problems)


def test_helpers_are_summarised_in_one_line(tmp_path):
    env = {"NCCL_ALGO": "Ring"}
    helpers = {pid: [_start(env, role="child")] for pid in range(10, 29)}
    report = _launch(tmp_path, {1: [_start(env), *_sched(env)], **helpers})
    text = format_text(report, verbose=True)
    assert "19 helper process(es) that never imported SGLang" in text
    assert text.count("child") <= 2


def test_eagle_groups_not_held_by_the_worker_are_unknown(tmp_path):
    env = {"NCCL_ALGO": "Ring"}
    eagle = {
        "event": "eagle_groups",
        "worker": "EAGLEWorkerV2",
        "draft": {},
        "verify": {},
        "draft_note": "shares the target's groups (its parallel layout names no group of its own)",
    }
    report = _launch(tmp_path, {1: [_start(env), *_sched(env), eagle]})
    text = format_text(report, verbose=True)
    assert "draft on shares the target's groups" in text and "verify on unknown" in text


def test_writer_never_raises_on_unencodable_fields(tmp_path):
    class Hostile:
        def __str__(self):
            raise RuntimeError("no")

        def __repr__(self):
            raise RuntimeError("no")

    run_dir = open_launch(str(tmp_path), {"profile": {}}, required=True)
    writer = AuditWriter(run_dir)
    # The record cannot be encoded: an audit_error record takes its place, and that one is written.
    assert writer.write("group_created", odd=Hostile()) is True
    assert writer.write("bad\ud800surrogate", text="\ud800") is True
    lines = read_jsonl(writer.file_path)
    assert lines[0]["event"] == "audit_error" and lines[0]["lost_event"] == "group_created"


def test_writer_without_a_launch_keeps_records_until_it_joins_one(tmp_path):
    writer = AuditWriter(None)
    assert writer.write("process_start", expected_env={}) is False
    run_dir = open_launch(str(tmp_path), {"profile": {}}, required=True)
    assert writer.attach(run_dir)
    assert read_jsonl(writer.file_path)[0]["event"] == "process_start"


def _launcher_writes(**flags):
    return {
        "event": "sglang_env_writes",
        "where": "_set_envs_and_config",
        "writes": [],
        "server_flags": {"tp_size": 2, "dp_size": 1, "pp_size": 1, "nnodes": 2, **flags},
    }


def test_a_ray_driver_expects_every_rank_of_every_node(tmp_path):
    """Two nodes, TP=2: a node's own launcher spawns one scheduler, but a Ray driver creates both as
    actors that join its launch, so one scheduler on record means the other ran without the plugin."""
    env = {"NCCL_ALGO": "Ring"}
    actor = {"event": "ray_actor_env", "actor_role": "scheduler", "env": env, "node_rank": 1}
    per_node = _launch(
        tmp_path / "node", {1: [_start(env), _launcher_writes()], 2: [_start(env), *_sched(env)]}
    )
    assert per_node.verdict == "ok", per_node.problems  # one rank per node: as expected
    for name, driver in (
        ("use_ray", [_start(env), _launcher_writes(use_ray=True)]),
        ("actors", [_start(env), _launcher_writes(), actor]),
    ):
        one = _launch(tmp_path / name, {1: driver, 2: [_start(env), *_sched(env)]})
        assert one.verdict == "fail" and any(
            "expected 2 scheduler process(es) in this launch (tp x dp x pp: the Ray driver starts every rank)"
            in p
            for p in one.problems
        ), one.problems
        both = _launch(
            tmp_path / f"{name}-2",
            {1: driver, 2: [_start(env), *_sched(env)], 3: [_start(env), *_sched(env)]},
        )
        assert both.verdict == "ok", both.problems
