"""Launch-wide rules of the judge (offline/audit/judge.py): the schedulers a launch expects, the agreements
it lists, and the directories a refusal names.

Expected schedulers: each launcher's ``sglang_env_writes`` at ``_set_envs_and_config`` claims tp x dp x pp
schedulers (dp, pp: 1 unless a positive int) -- for the whole launch when it started them through Ray,
else tp x dp x pp / nnodes (at least 1) on its own machine. Two claims for one place (two launchers,
copies that disagree) hold the larger, whatever the order; a claim for the launch and a claim for a
machine are for different places. Hypothesis generates launchers and schedulers over machines; the
problems must be those of the reference below, written from that rule alone.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.read import CannotJudge, key_text
from sglang_eagle_nccl.offline.audit.render import format_text
from support.audit_records import HOST, ident
from support.written_launch import new_launch, write_process

ENV = {"NCCL_PROTO": "LL"}
PROFILE = {"name": "p", "env": ENV}
HOSTS = ("a", "b")


def start(env: dict | None = None) -> tuple[str, dict]:
    return "process_start", {"expected_env": ENV, "env": dict(env or ENV), "profile": "p", "group_envs": {},
                              "sglang_wins": []}


def positive(value) -> int:
    return value if type(value) is int and value > 0 else 1


def claim(flags: dict) -> tuple[str | None, int]:
    total = flags["tp_size"] * positive(flags.get("dp_size")) * positive(flags.get("pp_size"))
    if flags.get("use_ray") is True:
        return None, total
    return flags["host"], max(1, total // positive(flags.get("nnodes")))


def reference_problems(launchers: list[dict], found: dict[str, int]) -> list[str]:
    expected: dict[str | None, list[int]] = {}
    for flags in launchers:
        place, n = claim(flags)
        expected.setdefault(place, []).append(n)
    out = []
    for place in sorted(expected, key=lambda p: "" if p is None else p):
        have = sum(found.values()) if place is None else found.get(place, 0)
        want = max(expected[place])
        if have < want:
            where = ("in this launch (tp x dp x pp: the Ray driver starts every rank)" if place is None
                     else f"on host {place} (tp x dp x pp / nnodes)")
            out.append(f"expected {want} scheduler process(es) {where}, found audit records from {have}: "
                       "a process ran without the plugin")
    return out


FLAGS = st.fixed_dictionaries(
    {"tp_size": st.integers(0, 4), "host": st.sampled_from(HOSTS)},
    optional={"dp_size": st.integers(0, 2), "pp_size": st.integers(0, 2), "nnodes": st.integers(0, 2),
              "use_ray": st.booleans()},
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(FLAGS, min_size=1, max_size=3), st.fixed_dictionaries({h: st.integers(0, 3) for h in HOSTS}))
# A Ray launch whose flags claim no rank expects none: no claim is raised to one.
@example([{"tp_size": 0, "host": "a", "use_ray": True}], {"a": 0, "b": 0})
def test_each_place_expects_the_largest_claim_for_it_whatever_the_order(launchers, found):
    with tempfile.TemporaryDirectory() as tmp:
        run = new_launch(Path(tmp) / "audit", PROFILE)
        for pid, flags in enumerate(launchers, start=1):  # pid order is the judge's order: claims come in turn
            server_flags = {k: v for k, v in flags.items() if k != "host"}
            write_process(run, pid, [start(), ("process_role", {"title": "sglang::launcher"}),
                                     ("sglang_env_writes", {"where": "_set_envs_and_config", "writes": [],
                                                            "server_flags": server_flags})],
                          role="launcher", machine={"host": flags["host"]})
        pid = 100
        for host, n in found.items():
            for rank in range(n):
                write_process(run, pid, [start(), ("process_role", {"title": f"sglang::scheduler_TP{rank}"}),
                                         ("scheduler_start", {"env": ENV}),
                                         ("group_created", {"group": "world", "env": ENV, "torch_comm": "none",
                                                            "device_group_backend": "gloo"})],
                              machine={"host": host})
                pid += 1
        report = load_report(run)
    # (No scheduler at all also says that nothing real was audited: a rule of its own.)
    assert [p for p in report.problems if p.startswith("expected ")] == reference_problems(launchers, found)
    assert report.verdict == ("fail" if report.problems else "ok")


def test_agreements_name_their_process_and_a_failed_rank_never_counts_as_agreement(tmp_path):
    run = new_launch(tmp_path / "audit", PROFILE)
    events = [("process_role", {"title": "sglang::scheduler_TP0"}), ("consistency_ok", {"group": "tp", "ranks": [0, 1]}),
              ("group_created", {"group": "tp", "env": ENV, "torch_comm": "none", "device_group_backend": "gloo"})]
    write_process(run, 100, [start({"NCCL_PROTO": "Simple"}), *events])  # its environment missed the profile
    report = load_report(run)
    assert report.verdict == "fail"
    assert report.to_dict()["agreements"] == [{"group": "tp", "ranks": [0, 1], "process": key_text(
        (HOST["host"], HOST["boot_id"], HOST["pidns"], 100, ident(100)["start"]))}]
    assert "cross-rank agreement" not in " ".join(format_text(report).split())
    healthy = new_launch(tmp_path / "ok", PROFILE)
    write_process(healthy, 100, [start(), *events])
    assert "cross-rank agreement: rank(s) 0, 1 agreed" in " ".join(format_text(load_report(healthy)).split())


def test_a_set_of_directories_without_one_valid_record_is_refused_naming_each(tmp_path):
    dirs = [new_launch(tmp_path / name, PROFILE) for name in ("a", "b")]
    for d in dirs:
        (Path(d) / "proc-h-1.jsonl").write_text("not a record\n")
    try:
        load_report(dirs)
    except CannotJudge as refused:
        assert f"no valid audit record could be read in {dirs[0]}, {dirs[1]} (" in str(refused)
    else:
        raise AssertionError("judged a launch without one valid record")
