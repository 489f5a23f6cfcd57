"""Every decision of the audit's judge, with the exact mark and why (issue 19).

One judge function per event (judge.JUDGES) and the launch-wide rules (expected schedulers, a rank
without a communicator, a process without its start record, nothing real audited), each held to its
verdict, its note and the exit code. The records are written by the real writer (AuditWriter) as
each process of the launch would write them, with the values a GPU run records where only a GPU
reaches a branch: torch's lazy NCCL communicator with per-group overrides, an eager PyNccl
communicator that NCCL created, a process-cached variable changed after the first communicator.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.offline.audit.judge import (
    JUDGES,
    Expectation,
    differences,
    expectations,
    judge,
    load_report,
    machine_of,
    problems_for_analyze,
    shown,
    worst,
)
from sglang_eagle_nccl.offline.audit.read import read_launch_records
from sglang_eagle_nccl.offline.audit.render import format_text
from support.audit_records import HOST, ident
from support.written_launch import new_launch, write_process

ENV = {"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "4194304"}
PROFILE = {"name": "p", "env": ENV, "policy": {"sglang_wins": []}}


def start(env: dict | None = None, **extra) -> tuple[str, dict]:
    env = ENV if env is None else env
    return "process_start", {
        "expected_env": dict(ENV),
        "env": dict(env),
        "profile": "p",
        "group_envs": {},
        "sglang_wins": [],
        **extra,
    }


def scheduler_events(env: dict | None = None, *, tp_rank: int = 0) -> list[tuple[str, dict]]:
    env = ENV if env is None else env
    return [
        ("process_role", {"title": f"sglang::scheduler_TP{tp_rank}"}),
        ("scheduler_start", {"env": dict(env), "ranks": {}, "overwrites": []}),
    ]


def gpu_group(group: str = "tp", env: dict | None = None, **extra) -> tuple[str, dict]:
    """A GroupCoordinator on a GPU: an NCCL device group whose torch communicator is created lazily."""
    return "group_created", {
        "group": group,
        "unique_name": f"{group}:0",
        "ranks": [0, 1],
        "global_rank": 0,
        "env": dict(ENV if env is None else env),
        "device_group_backend": "nccl",
        "torch_comm": "lazy-nccl",
        **extra,
    }


def cpu_group(group: str = "tp", env: dict | None = None, **extra) -> tuple[str, dict]:
    return "group_created", {
        "group": group,
        "unique_name": f"{group}:0",
        "ranks": [0, 1],
        "env": dict(ENV if env is None else env),
        "device_group_backend": "gloo",
        "torch_comm": "none",
        **extra,
    }


def pynccl(
    group: str = "tp", env: dict | None = None, *, available: bool = True, **extra
) -> tuple[str, dict]:
    """SGLang's eager PyNccl communicator; ``available`` is True where libnccl and a GPU exist."""
    return "pynccl_created", {
        "group": group,
        "env": dict(ENV if env is None else env),
        "world_size": 2,
        "rank": 0,
        "available": available,
        "disabled": False,
        **extra,
    }


def launch(
    tmp_path,
    processes: dict[int, list[tuple[str, dict]]],
    *,
    profile: dict | None = None,
    roles: dict[int, str] | None = None,
    machines: dict[int, dict] | None = None,
):
    run = new_launch(tmp_path / "audit", profile or PROFILE)
    for pid, events in processes.items():
        write_process(
            run, pid, events, role=(roles or {}).get(pid, "child"), machine=(machines or {}).get(pid)
        )
    return load_report(run), run


def one_scheduler(tmp_path, *events: tuple[str, dict], env: dict | None = None, **kw):
    """A launch of one scheduler (pid 100) that started with the profile, then ``events``."""
    report, _ = launch(tmp_path, {100: [start(env), *scheduler_events(env), *events]}, **kw)
    return report


def proc(report, pid: int = 100):
    (p,) = [p for p in report.processes if p.pid == pid]
    return p


def comms(report, kind: str | None = None):
    return [c for c in report.communicators if kind is None or c.kind == kind]


def audit(run: str, *args: str):
    result = CliRunner().invoke(main, ["audit", run, *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


# --- a good launch: the baseline every mutation below departs from ----------------------------------------


def test_a_gpu_scheduler_whose_profile_held_passes_with_checked_communicators(tmp_path):
    report = one_scheduler(tmp_path, gpu_group(), pynccl())
    assert report.verdict == "ok" and report.problems == [] and report.exit_code == 0
    group, eager = comms(report, "group"), comms(report, "pynccl")
    assert [c.verdict for c in group] == ["ok"] and [c.verdict for c in eager] == ["ok"]
    assert group[0].notes == [
        "torch NCCL communicator is created lazily at the first collective, with the process environment"
    ]
    assert eager[0].notes == [] and eager[0].rank == 0 and group[0].rank == 0
    assert (group[0].backend, group[0].unique_name, group[0].ranks) == ("nccl", "tp:0", [0, 1])
    p = proc(report)
    assert (p.verdict, p.role, p.sglang_rank, p.loaded_sglang) == ("ok", "scheduler_TP0", True, False)
    text = format_text(report)
    assert (
        text.splitlines()[-1]
        == "Verdict: ✓ the profile is in force in every audited process and communicator"
    )
    result = audit(_run_of(report))
    assert result.exit_code == 0, result.output


def _run_of(report) -> str:
    return report.run_dirs[0]


# --- process_start / profile_changed / scheduler_start: the environment in force ---------------------------


@pytest.mark.parametrize("event", ["process_start", "scheduler_start"])
def test_a_process_record_without_the_profile_fails_the_process(tmp_path, event):
    wrong = {**ENV, "NCCL_PROTO": "Simple"}
    if event == "process_start":
        report, _ = launch(tmp_path, {100: [start(wrong), *scheduler_events(), cpu_group()]})
    else:
        report = one_scheduler(tmp_path, cpu_group())
        report, _ = launch(tmp_path / "b", {100: [start(), *scheduler_events(wrong), cpu_group()]})
    p = proc(report)
    assert p.verdict == "fail" and report.verdict == "fail" and report.exit_code == 1
    assert p.notes == [f"profile not in force at {event}: NCCL_PROTO=Simple (profile: LL)"]
    assert report.problems == [
        f"scheduler_TP0 pid 100 on h: profile not in force at {event}: NCCL_PROTO=Simple (profile: LL)"
    ]


def test_a_variable_missing_from_the_environment_is_shown_unset(tmp_path):
    report, _ = launch(
        tmp_path,
        {
            100: [
                start({"NCCL_PROTO": "LL"}),
                *scheduler_events({"NCCL_PROTO": "LL"}),
                cpu_group(env={"NCCL_PROTO": "LL"}),
            ]
        },
    )
    assert proc(report).notes == [
        "profile not in force at process_start: NCCL_BUFFSIZE=(unset) (profile: 4194304)",
        "profile not in force at scheduler_start: NCCL_BUFFSIZE=(unset) (profile: 4194304)",
        "profile not in force when group 'tp' was created: NCCL_BUFFSIZE=(unset) (profile: 4194304)",
    ]


def test_a_variable_under_sglang_wins_is_not_required_to_hold(tmp_path):
    kept = {**ENV, "NCCL_PROTO": "Simple"}
    report, _ = launch(
        tmp_path,
        {100: [start(kept, sglang_wins=["NCCL_PROTO"]), *scheduler_events(kept), gpu_group(env=kept)]},
    )
    assert report.verdict == "ok", report.problems
    # ... but every other variable still must.
    other = {**kept, "NCCL_BUFFSIZE": "1"}
    report, _ = launch(
        tmp_path / "b", {100: [start(other, sglang_wins=["NCCL_PROTO"]), *scheduler_events(kept)]}
    )
    assert (
        proc(report).notes[0] == "profile not in force at process_start: NCCL_BUFFSIZE=1 (profile: 4194304)"
    )


def test_a_profile_change_is_judged_from_that_record_on(tmp_path):
    new = {"NCCL_PROTO": "Simple"}
    changed = (
        "profile_changed",
        {"expected_env": new, "env": new, "reason": "launch flags", "group_envs": {}, "sglang_wins": []},
    )
    report, _ = launch(tmp_path, {100: [start(), changed, *scheduler_events(new), gpu_group(env=new)]})
    assert report.verdict == "ok", report.problems
    stale = ("profile_changed", {"expected_env": new, "env": ENV, "reason": "launch flags"})
    report, _ = launch(tmp_path / "b", {100: [start(), stale, *scheduler_events(new)]})
    assert proc(report).notes == ["profile not in force at profile_changed: NCCL_PROTO=LL (profile: Simple)"]


# --- env_restored: SGLang's writes in the launcher ---------------------------------------------------------


def _launcher(*events):
    return [start(), ("process_role", {"title": "sglang::launcher"}), *events]


def test_sglang_wins_keeps_sglangs_value_with_a_warning_never_a_pass_or_a_failure(tmp_path):
    kept = {**ENV, "NCCL_PROTO": "Simple"}
    restored = (
        "env_restored",
        {
            "env": kept,
            "overwrites": [
                {"name": "NCCL_PROTO", "profile_value": "LL", "restored": False, "foreign_value": "Simple"}
            ],
        },
    )
    report, _ = launch(
        tmp_path,
        {
            1: [start(sglang_wins=["NCCL_PROTO"]), ("process_role", {"title": "sglang::launcher"}), restored],
            100: [start(), *scheduler_events(), gpu_group()],
        },
        roles={1: "launcher"},
    )
    launcher = proc(report, 1)
    assert launcher.verdict == "warn" and report.verdict == "warn" and report.exit_code == 0
    assert launcher.notes == ["kept SGLang's NCCL_PROTO=Simple (policy sglang_wins; profile LL)"]
    assert report.problems == []
    assert (
        "    ⚠ launcher pid 1: kept SGLang's NCCL_PROTO=Simple (policy sglang_wins; profile LL)"
        in format_text(report)
    )
    assert format_text(report).splitlines()[-1] == "Verdict: ⚠ in force, with warnings above"
    assert audit(_run_of(report)).exit_code == 0


def test_a_restored_overwrite_is_said_and_passes(tmp_path):
    restored = (
        "env_restored",
        {
            "env": ENV,
            "overwrites": [
                {"name": "NCCL_PROTO", "profile_value": "LL", "restored": True, "foreign_value": None}
            ],
        },
    )
    report, _ = launch(
        tmp_path,
        {1: _launcher(restored), 100: [start(), *scheduler_events(), gpu_group()]},
        roles={1: "launcher"},
    )
    assert proc(report, 1).verdict == "ok" and report.verdict == "ok"
    assert proc(report, 1).notes == ["SGLang wrote NCCL_PROTO=(unset); restored LL"]


def test_an_environment_left_wrong_after_the_restore_fails(tmp_path):
    restored = ("env_restored", {"env": {**ENV, "NCCL_PROTO": "Simple"}, "overwrites": []})
    report, _ = launch(
        tmp_path,
        {1: _launcher(restored), 100: [start(), *scheduler_events(), gpu_group()]},
        roles={1: "launcher"},
    )
    assert proc(report, 1).verdict == "fail"
    assert proc(report, 1).notes == ["profile not in force at env_restored: NCCL_PROTO=Simple (profile: LL)"]


# --- communicators (group_created, pynccl_created) -------------------------------------------------------------


def test_torch_lazy_communicator_with_a_per_group_override_is_a_warning(tmp_path):
    profile = {**PROFILE, "groups": {"tp": {"NCCL_PROTO": "Simple"}}}
    tp_env = {**ENV, "NCCL_PROTO": "Simple"}
    report, _ = launch(
        tmp_path,
        {
            100: [
                start(group_envs={"tp": {"NCCL_PROTO": "Simple"}}),
                *scheduler_events(),
                gpu_group("tp", env=tp_env),
                gpu_group("world", env=ENV),
            ]
        },
        profile=profile,
    )
    tp, world = sorted(comms(report, "group"), key=lambda c: c.group != "tp")
    assert (tp.group, tp.verdict, world.verdict) == ("tp", "warn", "ok")
    assert tp.notes[1] == (
        "per-group override NCCL_PROTO=Simple reaches only the eager PyNccl communicator; torch's "
        "lazy one uses the process environment"
    )
    assert report.verdict == "warn" and report.exit_code == 0


def test_the_overrides_recorded_with_the_group_win_over_the_profiles_groups(tmp_path):
    # The hook records what it applied for the group; {} (none applied) means no warning and the
    # process environment is the expectation.
    report = one_scheduler(
        tmp_path,
        gpu_group("tp", group_overrides={}),
        start(group_envs={"tp": {"NCCL_PROTO": "Simple"}}),
        gpu_group("tp", group_overrides={}),
    )
    assert [c.verdict for c in comms(report)] == ["ok", "ok"]
    applied = one_scheduler(
        tmp_path / "b",
        gpu_group("tp", env={**ENV, "NCCL_PROTO": "Simple"}, group_overrides={"NCCL_PROTO": "Simple"}),
    )
    (tp,) = comms(applied)
    assert tp.verdict == "warn" and "per-group override NCCL_PROTO=Simple" in tp.notes[1]


def test_an_override_that_did_not_reach_the_group_fails_it(tmp_path):
    report, _ = launch(
        tmp_path,
        {
            100: [
                start(group_envs={"tp": {"NCCL_PROTO": "Simple"}}),
                *scheduler_events(),
                pynccl("tp", env=ENV),
            ]
        },
    )
    (eager,) = comms(report, "pynccl")
    assert eager.verdict == "fail" and eager.notes == ["missing/different: NCCL_PROTO=LL (profile: Simple)"]
    assert report.problems == [
        "scheduler_TP0 pid 100 on h pynccl 'tp': missing/different: NCCL_PROTO=LL (profile: Simple)"
    ]
    assert report.exit_code == 1


def test_tuner_rules_for_a_group_reach_only_the_eager_communicator(tmp_path):
    rules = [
        {"collective": "AllReduce", "bytes": [0, 1024], "algorithm": "Ring", "protocol": "LL", "group": "tp"}
    ]
    report = one_scheduler(
        tmp_path, gpu_group("tp"), gpu_group("world"), pynccl("tp"), profile={**PROFILE, "tuner_rules": rules}
    )
    by_group = {c.group: c for c in comms(report, "group")}
    assert by_group["tp"].verdict == "warn" and by_group["world"].verdict == "ok"
    assert by_group["tp"].notes[-1] == (
        "tuner rules for group 'tp' reach only the eager PyNccl communicator (labelled while the group was built); "
        "torch's lazy one carries no label and gets size/rank rules only"
    )
    assert comms(report, "pynccl")[0].verdict == "ok"
    unlabelled = one_scheduler(
        tmp_path / "b", gpu_group("tp"), profile={**PROFILE, "tuner_rules": [{**rules[0], "group": None}]}
    )
    assert comms(unlabelled)[0].verdict == "ok"


def test_a_process_cached_variable_changed_after_the_first_communicator_is_a_warning(tmp_path):
    later = {**ENV, "NCCL_BUFFSIZE": "8388608", "NCCL_PROTO": "Simple"}
    profile_later = ("profile_changed", {"expected_env": later, "env": later, "reason": "node rank"})
    report = one_scheduler(
        tmp_path, pynccl("tp"), profile_later, pynccl("world", env=later), gpu_group("pp", env=later)
    )
    first, second, third = sorted(comms(report), key=lambda c: ["tp", "world", "pp"].index(c.group))
    assert first.verdict == "ok" and second.verdict == "warn" and third.verdict == "warn"
    # NCCL_PROTO is read per communicator: only the process-cached NCCL_BUFFSIZE is named.
    assert second.notes == [
        "process-cached variable changed after the first NCCL communicator of this process "
        "(NCCL keeps the first value): NCCL_BUFFSIZE: 4194304 -> 8388608"
    ]


def test_a_process_cached_change_set_as_the_groups_own_override_is_not_warned(tmp_path):
    tp = {**ENV, "NCCL_BUFFSIZE": "1048576"}
    report = one_scheduler(
        tmp_path, pynccl("world"), pynccl("tp", env=tp, group_overrides={"NCCL_BUFFSIZE": "1048576"})
    )
    assert [c.verdict for c in comms(report)] == ["ok", "ok"]


def test_the_first_communicator_is_the_first_nccl_one_not_a_gloo_group(tmp_path):
    changed = {**ENV, "NCCL_BUFFSIZE": "1"}
    report = one_scheduler(
        tmp_path,
        cpu_group("world", env=changed),
        ("profile_changed", {"expected_env": ENV, "env": ENV}),
        pynccl("tp"),
    )
    assert comms(report, "pynccl")[0].verdict == "ok"  # the gloo group set no "first NCCL environment"


def test_what_does_not_exist_is_a_dash(tmp_path):
    report = one_scheduler(tmp_path, cpu_group("tp"), pynccl("tp", available=False))
    group, eager = comms(report, "group")[0], comms(report, "pynccl")[0]
    assert (group.verdict, eager.verdict, report.verdict) == ("absent", "absent", "ok")
    assert group.notes == ["device group backend gloo: no NCCL communicator"]
    assert eager.notes == ["not created: PyNccl's library is unavailable here (no GPU / no libnccl)"]
    assert format_text(report).splitlines()[-1] == (
        "Verdict: ✓ the profile is in force in every audited process (no NCCL communicator existed to check)"
    )
    backendless = one_scheduler(tmp_path / "b", ("group_created", {"group": "x", "env": ENV}))
    assert comms(backendless)[0].notes == ["device group backend ?: no NCCL communicator"]
    named = one_scheduler(tmp_path / "c", ("group_created", {"group": "x", "env": ENV, "backend": "mpi"}))
    assert comms(named)[0].notes == ["device group backend mpi: no NCCL communicator"]
    assert comms(named)[0].backend == "mpi"


def test_a_communicator_with_no_profile_in_force_fails(tmp_path):
    report, _ = launch(tmp_path, {100: [*scheduler_events(), pynccl("tp")]})
    (eager,) = comms(report)
    assert eager.verdict == "fail"
    assert eager.notes == ["no profile in force when it was created (no process_start record before it)"]
    assert proc(report).notes == ["no process_start record"] and proc(report).verdict == "fail"


def test_a_missing_process_start_fails_a_launch_whose_records_are_otherwise_fine(tmp_path):
    # A process that wrote records but no start record: its expectation is unknown, never a pass.
    report, _ = launch(
        tmp_path,
        {100: [*scheduler_events(), cpu_group("tp")], 101: [start(), *scheduler_events(), cpu_group()]},
    )
    assert proc(report, 100).verdict == "fail" and proc(report, 101).verdict == "ok"
    assert "scheduler_TP0 pid 100 on h: no process_start record" in report.problems
    assert report.verdict == "fail" and audit(_run_of(report)).exit_code == 1


def test_an_absent_communicator_still_needs_the_profile_in_its_process(tmp_path):
    report = one_scheduler(tmp_path, cpu_group("tp", env={**ENV, "NCCL_PROTO": "Simple"}))
    assert comms(report)[0].verdict == "absent"
    assert proc(report).notes == [
        "profile not in force when group 'tp' was created: NCCL_PROTO=Simple (profile: LL)"
    ]
    overridden = one_scheduler(
        tmp_path / "b",
        cpu_group("tp", env={**ENV, "NCCL_PROTO": "Simple"}, group_overrides={"NCCL_PROTO": "Simple"}),
    )
    assert proc(overridden).verdict == "ok"  # the group's own override is what it had to hold
    unavailable = one_scheduler(tmp_path / "c", pynccl("tp", env={}, available=False))
    assert proc(unavailable).notes[0].startswith("profile not in force when pynccl 'tp' was created: ")


def test_allreduce_paths_are_kept_per_group_from_the_first_rank(tmp_path):
    first, second = {"custom_allreduce": {"enabled": True}}, {"custom_allreduce": {"enabled": False}}
    report, _ = launch(
        tmp_path,
        {
            100: [start(), *scheduler_events(), cpu_group("tp", allreduce_paths=first)],
            101: [
                start(),
                *scheduler_events(tp_rank=1),
                cpu_group("tp", allreduce_paths=second),
                cpu_group("pp"),
            ],
        },
    )
    assert report.allreduce_paths == {"tp": first}


# --- SGLang's writes and the expected schedulers ---------------------------------------------------------------


def writes(**flags) -> tuple[str, dict]:
    return "sglang_env_writes", {
        "where": "_set_envs_and_config",
        "writes": [{"name": "NCCL_CUMEM_ENABLE", "kind": "set", "before": None, "after": "0"}],
        "server_flags": flags,
    }


def schedulers(n: int, first_pid: int = 100, machine: dict | None = None) -> dict[int, list]:
    return {first_pid + i: [start(), *scheduler_events(tp_rank=i), cpu_group()] for i in range(n)}


@pytest.mark.parametrize(
    "flags,expected",
    [
        ({"tp_size": 2}, 2),
        ({"tp_size": 2, "dp_size": 2}, 4),
        ({"tp_size": 2, "pp_size": 3}, 6),
        ({"tp_size": 4, "nnodes": 2}, 2),
        ({"tp_size": 2, "dp_size": 0, "pp_size": None}, 2),
    ],
)
def test_a_launcher_expects_tp_x_dp_x_pp_over_nnodes_schedulers_on_its_machine(tmp_path, flags, expected):
    short, _ = launch(
        tmp_path / "short", {1: _launcher(writes(**flags)), **schedulers(expected - 1)}, roles={1: "launcher"}
    )
    assert short.verdict == "fail" and short.exit_code == 1
    assert (
        f"expected {expected} scheduler process(es) on host h (tp x dp x pp / nnodes), found audit records from "
        f"{expected - 1}: a process ran without the plugin"
    ) in short.problems
    assert problems_for_analyze(short)[-1].startswith(f"expected {expected} scheduler process(es)")
    full, _ = launch(
        tmp_path / "full", {1: _launcher(writes(**flags)), **schedulers(expected)}, roles={1: "launcher"}
    )
    assert full.verdict == "ok", full.problems
    assert full.sglang_writes == [
        {
            "name": "NCCL_CUMEM_ENABLE",
            "kind": "set",
            "before": None,
            "after": "0",
            "where": "_set_envs_and_config",
            "pid": 1,
            "process": "/".join(
                str(v) for v in (HOST["host"], HOST["boot_id"], HOST["pidns"], 1, ident(1)["start"])
            ),
        }
    ]


@pytest.mark.parametrize("flags", [{"tp_size": True}, {"tp_size": "2"}, {}])
def test_flags_that_are_not_a_tp_size_expect_nothing(tmp_path, flags):
    report, _ = launch(tmp_path, {1: _launcher(writes(**flags)), **schedulers(1)}, roles={1: "launcher"})
    assert report.verdict == "ok", report.problems


def test_writes_outside_set_envs_and_config_are_listed_but_expect_no_schedulers(tmp_path):
    resolve = (
        "sglang_env_writes",
        {
            "where": "ServerArgs.resolve_once",
            "writes": [
                {
                    "name": "NCCL_ALGO",
                    "before": None,
                    "after": "Ring",
                    "for_correctness": "enable_deterministic_inference",
                }
            ],
            "server_flags": {"tp_size": 8},
        },
    )
    report, _ = launch(tmp_path, {1: _launcher(resolve), **schedulers(1)}, roles={1: "launcher"})
    assert report.verdict == "ok", report.problems
    assert report.sglang_writes[0]["where"] == "ServerArgs.resolve_once"
    assert (
        "  NCCL_ALGO: (unset) -> Ring in ServerArgs.resolve_once (for --enable-deterministic-inference)"
        in format_text(report)
    )
    unnamed = ("sglang_env_writes", {"writes": [], "server_flags": {"tp_size": 2}})
    report, _ = launch(tmp_path / "b", {1: _launcher(unnamed), **schedulers(1)}, roles={1: "launcher"})
    assert report.verdict == "fail"  # no "where": SGLang's _set_envs_and_config, which starts the schedulers


def test_expected_schedulers_are_counted_per_machine(tmp_path):
    other = {"host": "h2", "boot_id": "f" * 32}
    processes = {
        1: _launcher(writes(tp_size=2, nnodes=2)),
        2: _launcher(writes(tp_size=2, nnodes=2)),
        100: [start(), *scheduler_events(), cpu_group()],
    }
    report, _ = launch(tmp_path, processes, roles={1: "launcher", 2: "launcher"}, machines={2: other})
    # One rank per node: host h has its scheduler, host h2 none.
    assert report.problems == [
        "expected 1 scheduler process(es) on host h2 (tp x dp x pp / nnodes), found audit "
        "records from 0: a process ran without the plugin"
    ]


def test_a_rank_that_recorded_no_communicator_fails_the_launch(tmp_path):
    report, _ = launch(
        tmp_path,
        {100: [start(), *scheduler_events()], 101: [start(), *scheduler_events(tp_rank=1), cpu_group()]},
    )
    assert report.problems == [
        "scheduler_TP0 pid 100 on h recorded no communicator: it built no SGLang group and left no record of why (its own output says where it stopped)"
    ]
    assert report.verdict == "fail" and proc(report, 100).verdict == "ok"
    assert audit(_run_of(report)).exit_code == 1


def test_a_rank_stopped_by_a_disagreement_is_not_also_missing_its_communicators(tmp_path):
    mismatch = (
        "consistency_mismatch",
        {
            "group": "tp",
            "mismatches": [{"variable": "NCCL_PROTO", "values_by_rank": {"0": "LL", "1": None}}],
            "mode": "error",
        },
    )
    report = one_scheduler(tmp_path, mismatch)
    assert report.problems == [
        "scheduler_TP0 pid 100 on h: ranks disagree in group 'tp' (consistency=error): "
        "NCCL_PROTO: rank 0=LL, rank 1=(unset)"
    ]


def test_a_preflight_rank_is_an_sglang_rank(tmp_path):
    report, _ = launch(tmp_path, {100: [start(), ("process_role", {"title": "sglang::preflight_rank0"})]})
    assert proc(report).sglang_rank is True
    assert report.problems == [
        "preflight_rank0 pid 100 on h recorded no communicator: it built no SGLang group and left no record of why (its own output says where it stopped)"
    ]


# --- refusals, hooks, errors, consistency, patch sets ---------------------------------------------------------


@pytest.mark.parametrize("required,mark", [(True, "fail"), (False, "warn")])
def test_a_hook_not_installed_is_a_failure_when_required_and_a_warning_otherwise(tmp_path, required, mark):
    uncovered = ("hook_uncovered", {"target": "sglang.srt.x:f", "required": required, "reason": "moved"})
    report = one_scheduler(tmp_path, cpu_group(), uncovered)
    assert proc(report).verdict == mark and report.verdict == mark
    assert proc(report).notes == ["hook not installed: sglang.srt.x:f (moved)"]
    assert report.exit_code == (1 if required else 0)
    assert audit(_run_of(report)).exit_code == (1 if required else 0)


def test_an_allow_partial_patch_set_warns_for_each_uncovered_target(tmp_path):
    patch = (
        "patch_set",
        {
            "patch_set": "sglang-0.5.21-latest",
            "sglang_version": "0.5.30",
            "status": "untested",
            "uncovered": [{"target": "a:b", "required": False}, {"target": "c:d"}],
        },
    )
    report = one_scheduler(tmp_path, patch, cpu_group())
    p = proc(report)
    assert (p.verdict, p.patch_set, p.sglang_version, p.loaded_sglang) == (
        "warn",
        "sglang-0.5.21-latest",
        "0.5.30",
        True,
    )
    assert p.notes == ["uncovered (allow_partial): a:b", "uncovered (allow_partial): c:d"]


@pytest.mark.parametrize(
    "message,note",
    [
        ("SGLang sets NCCL_ALGO\nmore", "refused: SGLang sets NCCL_ALGO"),
        ("\n  \nsecond line first", "refused: second line first"),
        (
            None,
            "refused: the profile would override NCCL_ALGO, NCCL_PROTO, which SGLang sets for correctness",
        ),
    ],
)
def test_a_correctness_conflict_fails_with_its_first_line(tmp_path, message, note):
    fields = {
        "variables": ["NCCL_ALGO", "NCCL_PROTO"],
        **({"message": message} if message is not None else {}),
    }
    report = one_scheduler(tmp_path, cpu_group(), ("correctness_conflict", fields))
    assert proc(report).notes == [note] and report.verdict == "fail"


@pytest.mark.parametrize(
    "message,note",
    [
        ("bad value\nsecond", "refused SGLang at sglang_import: bad value"),
        ("\n\nlater line", "refused SGLang at sglang_import: later line"),
        ("  \n", "refused SGLang at sglang_import: (no message)"),
    ],
)
def test_a_refusal_fails_the_process_naming_the_door(tmp_path, message, note):
    report = one_scheduler(tmp_path, cpu_group(), ("refused", {"door": "sglang_import", "message": message}))
    assert proc(report).notes == [note] and proc(report).verdict == "fail"


@pytest.mark.parametrize(
    "error,note",
    [
        ("no GPU\nmore", "refused to start Ray actors: no GPU"),
        ("\n", "refused to start Ray actors: (no message)"),
    ],
)
def test_a_ray_driver_that_refused_fails(tmp_path, error, note):
    report = one_scheduler(tmp_path, cpu_group(), ("ray_refused", {"error": error}))
    assert proc(report).notes == [note] and proc(report).verdict == "fail"


def test_a_ray_actors_replaced_user_values_are_said_not_judged(tmp_path):
    actor = (
        "ray_actor_env",
        {
            "actor_role": "scheduler",
            "actor": "sched-0",
            "env": ENV,
            "replaced_user_values": [
                {"name": "NCCL_PROTO", "user_value": "Simple", "value": "LL"},
                {"name": "NCCL_ALGO", "value": None},
            ],
        },
    )
    report = one_scheduler(tmp_path, cpu_group(), actor)
    assert proc(report).verdict == "ok"
    assert proc(report).notes == [
        "Ray actor sched-0: runtime_env NCCL_PROTO=Simple replaced by LL (the profile's precedence)",
        "Ray actor sched-0: runtime_env NCCL_ALGO=(unset) replaced by (unset) (the profile's precedence)",
    ]


@pytest.mark.parametrize(
    "event,fields,note",
    [
        ("plugin_error", {"handler": "on_group", "error": "boom"}, "plugin error in on_group: boom"),
        (
            "audit_error",
            {"lost_event": "group_created", "error": "x"},
            "an audit record could not be encoded (group_created: x)",
        ),
    ],
)
def test_an_accident_in_the_plugin_is_a_warning(tmp_path, event, fields, note):
    report = one_scheduler(tmp_path, cpu_group(), (event, fields))
    assert proc(report).verdict == "warn" and proc(report).notes == [note] and report.exit_code == 0


@pytest.mark.parametrize(
    "fields,mark,note",
    [
        (
            {"mismatches": [{"variable": "NCCL_ALGO", "values_by_rank": {"0": "Ring", "1": "Tree"}}]},
            "fail",
            "ranks disagree in group 'tp' (consistency=error): NCCL_ALGO: rank 0=Ring, rank 1=Tree",
        ),
        (
            {
                "mismatches": [{"variable": "NCCL_ALGO", "values_by_rank": {"0": "Ring", "1": "Tree"}}],
                "mode": "warn",
            },
            "warn",
            "ranks disagree in group 'tp' (consistency=warn): NCCL_ALGO: rank 0=Ring, rank 1=Tree",
        ),
        (
            {
                "mismatches": [
                    {"variable": "A", "values_by_rank": {"0": "1"}},
                    {"variable": "B", "values_by_rank": {"1": "2"}},
                ],
                "mode": "error",
            },
            "fail",
            "ranks disagree in group 'tp' (consistency=error): A: rank 0=1; B: rank 1=2",
        ),
    ],
)
def test_ranks_that_disagree_fail_unless_the_policy_says_warn(tmp_path, fields, mark, note):
    report = one_scheduler(tmp_path, cpu_group(), ("consistency_mismatch", {"group": "tp", **fields}))
    assert proc(report).verdict == mark and proc(report).notes == [note]


def test_a_consistency_check_that_could_not_finish_says_why(tmp_path):
    failed = ("consistency_failed", {"group": "tp", "error": "rank 1 did not answer in 30 s", "mode": "warn"})
    report = one_scheduler(tmp_path, cpu_group(), failed)
    assert proc(report).verdict == "warn"
    assert proc(report).notes == [
        "ranks disagree in group 'tp' (consistency=warn): rank 1 did not answer in 30 s"
    ]


# --- launch-wide ---------------------------------------------------------------------------------------------


def test_no_records_at_all_is_a_failure(tmp_path):
    report = judge({}, [])
    assert report.verdict == "fail" and report.problems == ["no audit records found"]


def test_nccl_reads_alone_make_a_launch_audited(tmp_path):
    from support.written_launch import write_reads_log

    run = new_launch(tmp_path, PROFILE)
    name = write_reads_log(
        run,
        100,
        [
            {
                "event": "read",
                "name": "NCCL_PROTO",
                "value": "LL",
                "source": "profile",
                "environment": "LL",
                "disagrees": False,
            }
        ],
    )
    write_process(run, 100, [start(), ("nccl_reads_log", {"file": name})])
    report = load_report(run)
    assert report.verdict == "ok", report.problems
    empty = new_launch(tmp_path / "b", PROFILE)
    name = write_reads_log(empty, 100, [])
    write_process(empty, 100, [start(), ("nccl_reads_log", {"file": name})])
    assert load_report(empty).problems[0].startswith("nothing real was audited in this launch")


def test_a_file_with_a_bad_line_warns_the_process_it_belongs_to(tmp_path):
    report, run = launch(tmp_path, {100: [start(), *scheduler_events(), cpu_group()]})
    (name,) = [p.file for p in report.processes]
    with open(f"{run}/{name}", "a") as f:
        f.write("{not json\n")
    report = load_report(run)
    assert proc(report).verdict == "warn" and proc(report).notes == [f"1 unreadable line(s) in {name}"]
    assert report.verdict == "warn" and report.exit_code == 0


def test_directories_naming_different_profiles_are_not_one_launch(tmp_path):
    a, _ = launch(tmp_path / "a", {100: [start(), *scheduler_events(), cpu_group()]})
    b, _ = launch(
        tmp_path / "b",
        {101: [start(), *scheduler_events(), cpu_group()]},
        profile={**PROFILE, "env": {"NCCL_PROTO": "Simple"}},
    )
    both = load_report([a.run_dirs[0], b.run_dirs[0]])
    assert both.verdict == "fail"
    assert both.problems[-1].startswith("the launch directories given name different profiles (launch.json)")
    same = load_report([a.run_dirs[0], a.run_dirs[0]])
    assert same.verdict == "ok" and len(same.processes) == 1


def test_something_not_judged_demotes_a_pass_but_never_a_failure(tmp_path):
    ok, run = launch(tmp_path / "ok", {100: [start(), *scheduler_events(), cpu_group()]})
    (open(f"{run}/proc-planted.jsonl", "w")).write("x\n")
    assert load_report(run).verdict == "warn"
    bad, run = launch(tmp_path / "bad", {100: [start({}), *scheduler_events(), cpu_group()]})
    (open(f"{run}/proc-planted.jsonl", "w")).write("x\n")
    assert load_report(run).verdict == "fail"


def test_a_root_directory_is_judged_by_its_newest_launch_and_says_so(tmp_path):
    report, run = launch(tmp_path, {100: [start(), *scheduler_events(), cpu_group()]})
    picked = load_report(tmp_path / "audit")
    assert (
        picked.verdict == "ok"
        and picked.picked == f"newest launch under {tmp_path / 'audit'}: {run.rsplit('/', 1)[1]}"
    )
    assert load_report(run).picked is None


def test_problems_for_analyze_name_the_rank_and_the_process(tmp_path):
    report = one_scheduler(tmp_path, pynccl("tp", env={}), env={})
    assert problems_for_analyze(report) == [
        "NCCL profile not in force on rank 0 (group tp, pid 100)",
        "NCCL profile not in force in scheduler_TP0 pid 100",
    ]
    assert problems_for_analyze(one_scheduler(tmp_path / "b", pynccl("tp"))) == []


def test_json_carries_the_verdicts_and_the_hosts(tmp_path):
    report = one_scheduler(tmp_path, gpu_group())
    data = json.loads(audit(_run_of(report), "--json").output)
    assert data["verdict"] == "ok" and data["communicators"][0]["verdict"] == "ok"
    assert data["hosts"] == [
        {
            "host": "h",
            "boot_id": HOST["boot_id"],
            "pidns": HOST["pidns"],
            "processes": [report.processes[0].process],
        }
    ]
    assert data["processes"][0]["machine"] == ["h", HOST["boot_id"], HOST["pidns"]]


# --- the pieces ------------------------------------------------------------------------------------------------


def test_worst_orders_absent_below_ok_below_warn_below_fail():
    assert worst([]) == "ok" and worst(["absent"]) == "ok" and worst(["absent", "warn"]) == "warn"
    assert worst(["warn", "fail", "ok"]) == "fail" and worst(["ok", "warn"]) == "warn"


def test_differences_and_shown():
    assert differences({"A": "1", "B": "2", "C": "3"}, {"A": "1", "B": "x"}, skip=["C"]) == [
        "B=x (profile: 2)"
    ]
    assert differences({"B": "2", "A": "1"}, {}) == ["A=(unset) (profile: 1)", "B=(unset) (profile: 2)"]
    assert shown(None) == "(unset)" and shown(0) == "0" and shown("") == ""


def test_expectations_follow_the_records_and_fall_back_to_the_launchs_groups():
    records = [
        {"event": "group_created"},
        {"event": "process_start", "expected_env": {"A": "1"}, "profile": "p"},
        {"event": "process_start", "expected_env": "not a map"},
        {
            "event": "profile_changed",
            "expected_env": {"A": "2"},
            "group_envs": {"tp": {"A": "3"}},
            "sglang_wins": ["A"],
        },
    ]
    got = list(expectations(records, {"groups": {"tp": {"A": "9"}}}))
    assert got[0][1] is None
    assert got[1][1] == Expectation({"A": "1"}, {"tp": {"A": "9"}}, frozenset(), "p", "process_start")
    assert got[2][1] is got[1][1]  # a record that is not an expectation changes nothing
    assert got[3][1] == Expectation({"A": "2"}, {"tp": {"A": "3"}}, frozenset({"A"}), None, "profile_changed")
    assert got[3][1].for_group("tp") == {"A": "3"} and got[3][1].for_group("pp") == {"A": "2"}
    assert got[3][1].for_group("tp", {}) == {"A": "2"}
    assert list(expectations(records[1:2], None))[0][1].groups == {}


def test_machine_of_is_host_boot_and_pid_namespace():
    assert machine_of({"host": "a", "boot_id": "b", "pidns": "c", "pid": 1}) == ("a", "b", "c")
    assert machine_of({}) == ("None", "None", "None")


def test_every_judged_event_has_its_function_and_the_table_is_used(tmp_path):
    # A launch where every judged event occurs once: each function ran (its note is there).
    run = new_launch(tmp_path, PROFILE)
    write_process(
        run,
        100,
        [
            start(),
            *scheduler_events(),
            gpu_group(),
            pynccl(),
            ("hook_uncovered", {"target": "t", "required": False}),
        ],
    )
    launch_records = read_launch_records(run)
    assert {r["event"] for p in launch_records.processes for r in p.records} & set(JUDGES) >= {
        "process_start",
        "scheduler_start",
        "group_created",
        "pynccl_created",
        "hook_uncovered",
    }
