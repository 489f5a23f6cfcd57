"""Real spawn + real torch.distributed gloo + the installed SGLang's real parallel_state.

Every group SGLang builds is audited from inside each rank; a rank whose must-match NCCL
settings differ stops every rank with a named error; a rank dying during the check ends the
others with a clear error within the timeout; node-local differences pass.
"""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.offline.audit.judge import load_report
from support.rank_runner import launcher_env, run_ranks

CHECK_TIMEOUT = "20"


def _env(plugin_env, profile: str) -> dict[str, str]:
    from sglang_eagle_nccl.offline.launch.preflight import cpu_rank_env

    env = {"SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS": "1", **cpu_rank_env(2)}
    env.update(
        launcher_env(profile, plugin_env["SGLANG_EAGLE_NCCL_AUDIT_DIR"], consistency_timeout_s=CHECK_TIMEOUT)
    )
    return env


def test_all_groups_audited_and_node_local_differences_pass(plugin_env, tmp_path):
    results = run_ranks(
        2,
        base_env=_env(plugin_env, "pcie-8gpu"),
        per_rank_env={
            0: {"NCCL_SOCKET_IFNAME": "lo"},
            1: {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "=mlx5_1"},
        },
    )
    assert [results[r]["status"] for r in (0, 1)] == ["ok", "ok"], [results[r].get("tb") for r in results]
    report = load_report(tmp_path / "audit")
    assert report.verdict == "ok", report.problems  # exactly ✓: node-local differences are no caveat
    # Every record real SGLang processes wrote fits the audit reader's per-event schema.
    assert report.unreadable == [], [u.text() for u in report.unreadable]
    groups = {(c.pid, c.group) for c in report.communicators if c.kind == "group"}
    names = {g for _, g in groups}
    assert {"world", "tp", "pp"} <= names
    pids = {c.pid for c in report.communicators}
    assert len(pids) == 2
    for pid in pids:
        assert {"world", "tp"} <= {g for p, g in groups if p == pid}
    # SGLang builds an (eager) PyNccl communicator for tp even on CPU; its hook ran on both ranks.
    assert {c.pid for c in report.communicators if c.kind == "pynccl" and c.group == "tp"} == pids
    # On CPU nothing NCCL-backed exists: gloo device groups and a PyNccl whose library cannot load are
    # "–" (absent), never a ✓; the processes themselves (SGLang ranks) are checked and pass.
    for c in report.communicators:
        assert c.verdict == "absent", (c.group, c.notes)
    assert report.verdict == "ok" and all(p.verdict == "ok" for p in report.processes if p.sglang_rank)


def test_must_match_mismatch_stops_every_rank_with_named_error(plugin_env, tmp_path):
    results = run_ranks(
        2,
        base_env=_env(plugin_env, "pcie-8gpu"),
        per_rank_env={1: {"NCCL_ALGO": "Tree"}},
    )
    assert set(results) == {0, 1}
    for r in (0, 1):
        assert results[r]["status"] == "error", results[r]
        assert results[r]["type"] == "ConsistencyError"
        msg = results[r]["message"]
        assert "NCCL_ALGO differs" in msg and "rank 0: 'Ring'" in msg and "rank 1: 'Tree'" in msg
        assert "group 'world'" in msg
        # The mismatch error itself (not the timeout's "did not answer") proves no rank waited it out.
        assert "did not answer" not in msg
    report = load_report(tmp_path / "audit")
    assert report.verdict == "fail"
    assert any("ranks disagree in group 'world'" in n for p in report.processes for n in p.notes)


def test_rank_dying_during_the_check_gives_clear_error_on_the_others(plugin_env, tmp_path):
    results = run_ranks(
        2,
        base_env=_env(plugin_env, "pcie-8gpu"),
        die_in_check=(1, "tp"),
    )
    assert 1 not in results
    r0 = results[0]
    assert r0["status"] == "error" and r0["type"] == "ConsistencyError", r0
    assert "SGLang group 'tp'" in r0["message"]
    assert (
        "peer rank" in r0["message"] or "did not answer" in r0["message"] or "not every rank" in r0["message"]
    )
    # Never a hang: rank 0 reported (run_ranks gives up after its own deadline otherwise).


@pytest.mark.parametrize("group", ["tp"])
def test_per_group_override_reaches_eager_pynccl_and_audit_is_honest_about_torch(plugin_env, tmp_path, group):
    prof = tmp_path / "groups.toml"
    prof.write_text(
        f'extends = "pcie-8gpu"\n[groups.{group}.env]\nNCCL_ALGO = "Tree"\nNCCL_PROTO = "Simple"\n'
    )
    results = run_ranks(2, base_env=_env(plugin_env, str(prof)))
    assert [results[r]["status"] for r in (0, 1)] == ["ok", "ok"], results
    report = load_report(tmp_path / "audit")
    from sglang_eagle_nccl.offline.audit.read import read_launch

    _, procs = read_launch(report.run_dir)
    for proc in procs:
        pyn = [r for r in proc.events("pynccl_created") if r["group"] == group]
        grp = [r for r in proc.events("group_created") if r["group"] == group]
        world = [r for r in proc.events("group_created") if r["group"] == "world"]
        if not grp:
            continue
        assert pyn and pyn[0]["env"]["NCCL_ALGO"] == "Tree" and pyn[0]["env"]["NCCL_PROTO"] == "Simple"
        assert world[0]["env"]["NCCL_ALGO"] == "Ring"
    tp_group_verdicts = [c for c in report.communicators if c.group == group and c.kind == "group"]
    # gloo on CPU: no NCCL communicator to judge ("–"), and the audit says why.
    assert tp_group_verdicts and all(c.verdict == "absent" for c in tp_group_verdicts)
    assert all(any("no NCCL communicator" in n for n in c.notes) for c in tp_group_verdicts)
