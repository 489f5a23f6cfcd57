"""Edges of the audit's judge (offline/audit/judge.py) that the decision tests left open (issue 19 mutants).

Each test holds one decision to its exact value: which variable a note names and how several are joined,
what a record's missing optional field means, which processes count as SGLang ranks, the order of the
launch-wide problems, the keys of the JSON report. Records are written by the real writer (AuditWriter).
"""

from __future__ import annotations

import json

from sglang_eagle_nccl.offline.audit.judge import (
    differences,
    expectations,
    judge_launch,
    load_report,
)
from sglang_eagle_nccl.offline.audit.read import key_text, merge, read_launch_records
from support.audit_records import HOST
from support.written_launch import new_launch, write_process, write_reads_log

ENV = {"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "4194304"}
PROFILE = {"name": "p", "env": ENV, "policy": {"sglang_wins": []}}
BOTH_UNSET = "NCCL_BUFFSIZE=(unset) (profile: 4194304); NCCL_PROTO=(unset) (profile: LL)"
LAZY = "torch NCCL communicator is created lazily at the first collective, with the process environment"


def start(env=None, **extra):
    fields = {
        "expected_env": dict(ENV),
        "env": dict(ENV if env is None else env),
        "profile": "p",
        "group_envs": {},
        "sglang_wins": [],
        **extra,
    }
    return "process_start", fields


def scheduler(env=None):
    return [
        ("process_role", {"title": "sglang::scheduler_TP0"}),
        ("scheduler_start", {"env": dict(ENV if env is None else env), "ranks": {}, "overwrites": []}),
    ]


def group(kind: str, env=None, **extra):
    base = {"group": "tp", "unique_name": "tp:0", "ranks": [0, 1], "global_rank": 0}
    if kind == "gpu":
        base.update(device_group_backend="nccl", torch_comm="lazy-nccl")
    else:
        base.update(device_group_backend="gloo", torch_comm="none")
    return "group_created", {**base, "env": dict(ENV if env is None else env), **extra}


def run_of(tmp_path, processes, *, profile=None, roles=None, machines=None):
    run = new_launch(tmp_path / "audit", profile or PROFILE)
    for pid, events in processes.items():
        write_process(
            run, pid, events, role=(roles or {}).get(pid, "child"), machine=(machines or {}).get(pid)
        )
    return run


def report_of(tmp_path, processes, **kw):
    return load_report(run_of(tmp_path, processes, **kw))


def proc(report, pid=100):
    (p,) = [p for p in report.processes if p.pid == pid]
    return p


# --- differences / expectations -------------------------------------------------------------------------


def test_a_kept_variable_is_skipped_and_the_ones_after_it_still_compared():
    expected = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
    assert differences(expected, {}, skip=["NCCL_ALGO"]) == ["NCCL_PROTO=(unset) (profile: LL)"]
    assert differences(expected, {"NCCL_PROTO": "LL"}, skip=["NCCL_ALGO"]) == []


def test_a_launch_profile_that_is_not_a_mapping_gives_no_per_group_values():
    records = [{"event": "process_start", "expected_env": dict(ENV)}]
    ((_, exp),) = list(expectations(records, ["not", "a", "mapping"]))
    assert exp is not None and exp.groups == {} and dict(exp.env) == ENV


def test_a_process_start_without_group_envs_takes_the_launch_profiles_groups(tmp_path):
    profile = {**PROFILE, "groups": {"tp": {"NCCL_BUFFSIZE": "8388608"}}}
    name, fields = start()
    del fields["group_envs"]
    report = report_of(tmp_path, {100: [(name, fields), *scheduler(), group("gpu")]}, profile=profile)
    (c,) = report.communicators
    # the profile's per-group value is what the group had to hold (and cannot reach torch's lazy one)
    assert c.verdict == "fail"
    assert "missing/different: NCCL_BUFFSIZE=4194304 (profile: 8388608)" in c.notes
    assert (
        "per-group override NCCL_BUFFSIZE=8388608 reaches only the eager PyNccl communicator; "
        "torch's lazy one uses the process environment" in c.notes
    )


# --- the environment in force, and the notes that name every variable ------------------------------------------


def test_every_missing_variable_at_process_start_is_named_in_one_note(tmp_path):
    report = report_of(tmp_path, {100: [start({}), *scheduler(), group("cpu")]})
    assert proc(report).notes == [f"profile not in force at process_start: {BOTH_UNSET}"]
    assert report.problems == [
        f"scheduler_TP0 pid 100 on h: profile not in force at process_start: {BOTH_UNSET}"
    ]


def test_a_process_with_two_failures_lists_both_in_its_problem(tmp_path):
    wrong = {**ENV, "NCCL_PROTO": "Simple"}
    report = report_of(tmp_path, {100: [start(wrong), *scheduler(wrong), group("cpu")]})
    note = "NCCL_PROTO=Simple (profile: LL)"
    assert report.problems == [
        f"scheduler_TP0 pid 100 on h: profile not in force at process_start: {note}; "
        f"profile not in force at scheduler_start: {note}"
    ]


def test_a_restored_overwrite_names_sglangs_value_and_the_profiles(tmp_path):
    restored = (
        "env_restored",
        {
            "env": dict(ENV),
            "overwrites": [
                {"name": "NCCL_PROTO", "profile_value": "LL", "restored": True, "foreign_value": "Simple"}
            ],
        },
    )
    launcher = [start(), ("process_role", {"title": "sglang::launcher"}), restored]
    report = report_of(tmp_path, {1: launcher, 100: [start(), *scheduler(), group("cpu")]})
    p = proc(report, 1)
    assert p.verdict == "ok" and p.notes == ["SGLang wrote NCCL_PROTO=Simple; restored LL"]


# --- communicators that NCCL does not create (absent) ------------------------------------------------------


def test_a_cpu_group_built_without_the_profile_names_every_variable(tmp_path):
    report = report_of(tmp_path, {100: [start(), *scheduler(), group("cpu", env={})]})
    (c,) = report.communicators
    assert c.verdict == "absent"
    assert proc(report).notes == [f"profile not in force when group 'tp' was created: {BOTH_UNSET}"]


def test_a_cpu_group_may_hold_sglangs_kept_value(tmp_path):
    kept = {**ENV, "NCCL_PROTO": "Simple"}
    events = [start(sglang_wins=["NCCL_PROTO"]), *scheduler(), group("cpu", env=kept)]
    report = report_of(tmp_path, {100: events})
    assert proc(report).verdict == "ok" and proc(report).notes == []
    assert report.verdict == "ok", report.problems


def test_a_cpu_group_is_held_to_its_own_per_group_values(tmp_path):
    per_group = {"tp": {"NCCL_BUFFSIZE": "8388608"}}
    held = {**ENV, "NCCL_BUFFSIZE": "8388608"}
    report = report_of(tmp_path, {100: [start(group_envs=per_group), *scheduler(), group("cpu", env=held)]})
    assert proc(report).verdict == "ok" and proc(report).notes == []
    assert report.verdict == "ok", report.problems


def test_a_pynccl_record_that_does_not_say_available_is_not_a_communicator(tmp_path):
    eager = ("pynccl_created", {"group": "tp", "env": dict(ENV), "world_size": 2, "rank": 0})
    report = report_of(tmp_path, {100: [start(), *scheduler(), group("cpu"), eager]})
    (c,) = [c for c in report.communicators if c.kind == "pynccl"]
    assert c.verdict == "absent"
    assert c.notes == ["not created: PyNccl's library is unavailable here (no GPU / no libnccl)"]


# --- NCCL communicators -------------------------------------------------------------------------------------


def test_a_gpu_group_missing_two_variables_names_both_and_fails_with_its_notes(tmp_path):
    report = report_of(tmp_path, {100: [start(), *scheduler(), group("gpu", env={})]})
    (c,) = report.communicators
    assert c.verdict == "fail" and c.notes == [LAZY, f"missing/different: {BOTH_UNSET}"]
    assert (
        f"scheduler_TP0 pid 100 on h group 'tp': {LAZY}; missing/different: {BOTH_UNSET}" in report.problems
    )


def test_a_gpu_group_before_any_profile_fails_without_crashing(tmp_path):
    report = report_of(tmp_path, {100: [*scheduler(), group("gpu")]})
    (c,) = report.communicators
    assert c.verdict == "fail"
    assert c.notes == [LAZY, "no profile in force when it was created (no process_start record before it)"]


def test_two_per_group_overrides_are_both_named(tmp_path):
    per_group = {"tp": {"NCCL_BUFFSIZE": "8388608", "NCCL_IB_HCA": "mlx5"}}
    held = {**ENV, **per_group["tp"]}
    report = report_of(tmp_path, {100: [start(group_envs=per_group), *scheduler(), group("gpu", env=held)]})
    (c,) = report.communicators
    assert c.verdict == "warn"
    assert c.notes[1] == (
        "per-group override NCCL_BUFFSIZE=8388608, NCCL_IB_HCA=mlx5 reaches only the eager PyNccl "
        "communicator; torch's lazy one uses the process environment"
    )


def test_a_process_cached_variable_dropped_after_the_first_communicator_warns(tmp_path):
    first = {**ENV, "NCCL_DEBUG": "INFO"}
    report = report_of(
        tmp_path,
        {100: [start(), *scheduler(), group("gpu", env=first), group("gpu", env=dict(ENV), group="dp")]},
    )
    later = [c for c in report.communicators if c.group == "dp"][0]
    assert later.verdict == "warn"
    assert later.notes[-1] == (
        "process-cached variable changed after the first NCCL communicator of this process "
        "(NCCL keeps the first value): NCCL_DEBUG: INFO -> (unset)"
    )


def test_two_changed_process_cached_variables_are_both_named(tmp_path):
    first = {**ENV, "NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5"}
    second = {**ENV, "NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5_1"}
    report = report_of(
        tmp_path,
        {100: [start(), *scheduler(), group("gpu", env=first), group("gpu", env=second, group="dp")]},
    )
    later = [c for c in report.communicators if c.group == "dp"][0]
    assert later.notes[-1].endswith(
        "(NCCL keeps the first value): NCCL_DEBUG: INFO -> WARN; NCCL_IB_HCA: mlx5 -> mlx5_1"
    )


def test_a_tuner_rule_without_a_group_warns_no_group(tmp_path):
    profile = {
        **PROFILE,
        "tuner_rules": [
            {"collective": "AllReduce", "algorithm": "Ring"},
            {"collective": "AllReduce", "group": "tp"},
        ],
    }
    report = report_of(
        tmp_path, {100: [start(), *scheduler(), group("gpu"), group("gpu", group="dp")]}, profile=profile
    )
    by_group = {c.group: c for c in report.communicators}
    assert by_group["dp"].verdict == "ok" and by_group["dp"].notes == [LAZY]
    assert by_group["tp"].verdict == "warn" and by_group["tp"].notes[1].startswith(
        "tuner rules for group 'tp'"
    )


# --- which processes are SGLang ranks -----------------------------------------------------------------------


def test_a_scheduler_named_process_is_a_rank_even_without_its_start_record(tmp_path):
    events = [start(), ("process_role", {"title": "sglang::scheduler_TP0"})]
    report = report_of(tmp_path, {100: events})
    assert proc(report).sglang_rank is True
    assert report.problems == [
        "scheduler_TP0 pid 100 on h recorded no communicator: it built no SGLang group and left no record of why (its own output says where it stopped)"
    ]


def test_a_process_that_recorded_scheduler_start_is_a_rank_whatever_its_name(tmp_path):
    events = [
        start(),
        ("process_role", {"title": "sglang::worker"}),
        ("scheduler_start", {"env": dict(ENV), "ranks": {}, "overwrites": []}),
    ]
    report = report_of(tmp_path, {100: events})
    p = proc(report)
    assert p.role == "worker" and p.sglang_rank is True
    assert report.problems == ["worker pid 100 on h recorded no communicator: it built no SGLang group and left no record of why (its own output says where it stopped)"]


# --- launch-wide rules ----------------------------------------------------------------------------------------


def _writes(**flags):
    return (
        "sglang_env_writes",
        {
            "where": "_set_envs_and_config",
            "writes": [{"name": "NCCL_CUMEM_ENABLE", "kind": "set", "before": None, "after": "0"}],
            "server_flags": flags,
        },
    )


def test_missing_schedulers_are_reported_launch_wide_first_then_per_host_name(tmp_path):
    launchers = {
        1: [start(), ("process_role", {"title": "sglang::launcher"}), _writes(tp_size=2)],
        2: [start(), ("process_role", {"title": "sglang::launcher"}), _writes(tp_size=4, use_ray=True)],
        3: [start(), ("process_role", {"title": "sglang::launcher"}), _writes(tp_size=1)],
    }
    machines = {1: {"host": "A"}, 3: {"host": "B"}}
    report = report_of(tmp_path, launchers, machines=machines)
    assert report.problems[:3] == [
        "expected 4 scheduler process(es) in this launch (tp x dp x pp: the Ray driver starts every rank), "
        "found audit records from 0: a process ran without the plugin",
        "expected 2 scheduler process(es) on host A (tp x dp x pp / nnodes), "
        "found audit records from 0: a process ran without the plugin",
        "expected 1 scheduler process(es) on host B (tp x dp x pp / nnodes), "
        "found audit records from 0: a process ran without the plugin",
    ]


def test_nccl_reads_notes_follow_the_processs_own_notes(tmp_path):
    run = new_launch(tmp_path, PROFILE)
    read = {
        "event": "read",
        "name": "NCCL_PROTO",
        "value": "Simple",
        "source": "environment",
        "environment": "Simple",
        "disagrees": False,
    }
    name = write_reads_log(run, 100, [read])
    wrong = {**ENV, "NCCL_PROTO": "Simple"}
    write_process(run, 100, [start(wrong), ("nccl_reads_log", {"file": name})])
    report = load_report(run)
    notes = proc(report).notes
    assert notes[0] == "profile not in force at process_start: NCCL_PROTO=Simple (profile: LL)"
    assert len(notes) > 1 and all(n.startswith("NCCL's own reads: ") for n in notes[1:])


# --- what the report holds (and its JSON keys) ---------------------------------------------------------------


def test_the_report_names_the_profile_and_its_eagle_groups_by_process(tmp_path):
    draft = {"tp": {"group": "tp", "unique_name": "tp:0", "ranks": [0, 1]}}
    verify = {"tp": {"group": "tp", "unique_name": "tp:1", "ranks": [0, 1]}}
    eagle = ("eagle_groups", {"worker": "EAGLEWorker", "draft": draft, "verify": verify, "draft_note": "n"})
    run = run_of(tmp_path, {100: [start(), *scheduler(), group("cpu"), eagle]})
    report = load_report(run)
    assert report.profile == "p" and report.run_dir == run
    (p,) = report.processes
    assert report.eagle == [
        {
            "pid": 100,
            "host": "h",
            "process": p.process,
            "worker": "EAGLEWorker",
            "draft": draft,
            "verify": verify,
            "draft_note": "n",
        }
    ]
    out = json.loads(json.dumps(report.to_dict()))
    assert set(out) == {
        "run_dir",
        "run_dirs",
        "picked",
        "profile",
        "verdict",
        "hosts",
        "processes",
        "communicators",
        "eagle",
        "sglang_writes",
        "problems",
        "unreadable",
        "cut_lines",
        "copies",
        "nccl_reads",
        "allreduce_paths",
        "agreements",
    }
    assert (out["run_dir"], out["picked"], out["profile"], out["problems"]) == (run, None, "p", [])
    assert out["eagle"] == report.eagle and out["sglang_writes"] == [] and out["allreduce_paths"] == {}
    assert out["processes"][0]["machine"] == [HOST["host"], HOST["boot_id"], HOST["pidns"]]
    as_dict = p.to_dict()  # a list, under the dataclass's own key (JSON would hide a tuple)
    assert as_dict["machine"] == [HOST["host"], HOST["boot_id"], HOST["pidns"]] and set(as_dict) == set(
        vars(p)
    )


def test_the_json_report_carries_writes_paths_problems_and_what_was_picked(tmp_path):
    paths = {"group": "tp", "world_size": 2}
    launcher = [start(), ("process_role", {"title": "sglang::launcher"}), _writes(tp_size=2)]
    ranks = [start(), *scheduler(), group("cpu", allreduce_paths=paths)]
    run_of(tmp_path, {1: launcher, 100: ranks})
    report = load_report(tmp_path / "audit")
    out = report.to_dict()
    assert out["picked"] == report.picked and report.picked.startswith("newest launch under ")
    assert (
        out["sglang_writes"] == report.sglang_writes
        and out["sglang_writes"][0]["name"] == "NCCL_CUMEM_ENABLE"
    )
    assert out["allreduce_paths"] == {"tp": paths}
    assert out["problems"] == report.problems and out["problems"][0].startswith("expected 2 scheduler")


def test_launches_picked_under_two_roots_are_both_said(tmp_path):
    one = run_of(tmp_path / "r1", {100: [start(), *scheduler(), group("cpu")]})
    two = run_of(tmp_path / "r2", {101: [start(), *scheduler(), group("cpu")]})
    report = load_report([tmp_path / "r1" / "audit", tmp_path / "r2" / "audit"])
    assert report.picked == (
        f"newest launch under {tmp_path / 'r1' / 'audit'}: {one.rsplit('/', 1)[-1]}; "
        f"newest launch under {tmp_path / 'r2' / 'audit'}: {two.rsplit('/', 1)[-1]}"
    )


def test_nothing_read_is_judged_with_an_empty_run_dir():
    report = judge_launch(merge([]))
    assert report.run_dir == "" and report.run_dirs == [] and report.verdict == "fail"
    assert report.to_dict()["run_dirs"] == [""]


def test_the_same_profile_written_in_another_key_order_is_one_launch(tmp_path):
    run = run_of(tmp_path, {100: [start(), *scheduler(), group("cpu")]})
    records = read_launch_records(run)
    reordered = {**PROFILE, "env": dict(reversed(list(ENV.items())))}
    records.metas = [{"profile": dict(PROFILE)}, {"profile": reordered}]
    report = judge_launch(records)
    assert report.verdict == "ok" and report.problems == []


def test_process_keys_in_the_json_report_are_the_key_text(tmp_path):
    run = run_of(tmp_path, {100: [start(), *scheduler(), group("cpu")]})
    records = read_launch_records(run)
    report = judge_launch(records)
    assert report.to_dict()["hosts"][0]["processes"] == [key_text(records.processes[0].key)]
