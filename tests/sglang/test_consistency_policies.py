"""The cross-rank check on real spawned ranks building the installed SGLang's groups (gloo, CPU).

Complements ``test_multiprocess_groups.py`` (agreement, a mismatch under the default policy, a
peer that dies): here a peer that stays alive but stops *inside* the check, and the two other
policies. ``warn``: the ranks go on and the audit marks the mismatch ⚠; ``off``: no check runs
and nothing about it is recorded.
"""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.offline.audit.judge import MARK, load_report
from sglang_eagle_nccl.offline.audit.read import read_launch
from sglang_eagle_nccl.offline.audit.render import format_text
from support.rank_runner import launcher_env, run_ranks

# The check and its policies are the plugin's code over torch's gloo groups, the same on every
# release: ci/test proves them on 0.5.23 (the tests run on any release they are given).
pytestmark = pytest.mark.newest_only

CHECK_TIMEOUT = 8.0
CONSISTENCY_EVENTS = ("consistency_ok", "consistency_mismatch", "consistency_failed")
# A must-match variable the profile does not set, exported on one rank only (a stray export on one
# node): the profile is still in force on both ranks, only the ranks disagree.
STRAY = ("NCCL_MIN_NCHANNELS", "4")


def _env(plugin_env: dict[str, str], **policy: str) -> dict[str, str]:
    from sglang_eagle_nccl.offline.launch.preflight import cpu_rank_env

    env = {"SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS": "1", **cpu_rank_env(2)}
    env.update(
        launcher_env(
            "pcie-8gpu",
            plugin_env["SGLANG_EAGLE_NCCL_AUDIT_DIR"],
            consistency_timeout_s=str(CHECK_TIMEOUT),
            **policy,
        )
    )
    return env


def _records(report, event: str) -> list[dict]:
    _, procs = read_launch(report.run_dir)
    return [r for p in procs for r in p.events(event)]


@pytest.mark.parametrize("where", ["all_gather", "barrier"])
def test_peer_stuck_inside_the_check_fails_the_others_within_the_timeout(plugin_env, where):
    """Rank 1 stops (SIGSTOP: alive, its connections open) inside the check of group 'tp'.

    ``all_gather``: it passed the barrier and the exchange of payload sizes, and never sends its
    payload, so rank 0 waits inside the all-gather, where gloo's own timeout (SGLang's process-group
    timeout) is far away: the check's own deadline is what ends it (the timeout branch).
    ``barrier``: it never reaches the monitored barrier, which names the silent rank.
    """
    results = run_ranks(2, base_env=_env(plugin_env), stall_in_check=(1, "tp", where))
    assert set(results) == {0}, results  # the stalled rank never reports; rank 0 does, on its own
    r0 = results[0]
    assert r0["status"] == "error" and r0["type"] == "ConsistencyError", r0
    message = r0["message"]
    assert message.startswith("SGLang group 'tp': "), message
    if where == "all_gather":
        assert f"not every rank answered the NCCL settings check within {CHECK_TIMEOUT:.0f}s" in message
        assert "raise the limit with consistency_timeout_s" in message  # the fix
    else:
        assert "the NCCL settings check failed because a peer rank disappeared or timed out" in message
        assert "Ranks 1 failed to pass monitoredBarrier" in message  # gloo names the rank that never came
    # The check itself ended it: after waiting out its deadline (plus, in the timeout branch, the
    # gathering thread's join grace), never a hang and never an early guess.
    # (Measured around the check itself: group creation before it is not timed on a loaded machine.)
    assert CHECK_TIMEOUT - 0.5 <= r0["check_elapsed"] < CHECK_TIMEOUT + 5 + 10, r0
    report = load_report(plugin_env["SGLANG_EAGLE_NCCL_AUDIT_DIR"])
    (failed,) = _records(report, "consistency_failed")
    assert failed["group"] == "tp" and failed["mode"] == "error" and failed["error"] in message
    # The world group, checked before, agreed on both ranks.
    assert {r["group"] for r in _records(report, "consistency_ok") if len(r["ranks"]) == 2} == {"world"}
    assert report.verdict == "fail"
    assert any(
        f"ranks disagree in group 'tp' (consistency=error): {failed['error']}" in n
        for p in report.processes
        for n in p.notes
    )


def test_warn_lets_ranks_continue_and_the_audit_shows_the_mismatch(plugin_env):
    name, value = STRAY
    results = run_ranks(2, base_env=_env(plugin_env, consistency="warn"), per_rank_env={1: {name: value}})
    assert [results[r]["status"] for r in (0, 1)] == ["ok", "ok"], [results[r].get("tb") for r in results]
    report = load_report(plugin_env["SGLANG_EAGLE_NCCL_AUDIT_DIR"])
    mismatches = _records(report, "consistency_mismatch")
    # Every group both ranks built was checked, on both ranks, and every check saw the stray export.
    assert {r["group"] for r in mismatches} >= {"world", "tp"}
    assert len({r["pid"] for r in mismatches}) == 2
    for rec in mismatches:
        assert rec["mode"] == "warn"
        assert rec["mismatches"] == [{"variable": name, "values_by_rank": {"0": None, "1": value}}]
    # Only single-rank groups (nothing to disagree with) passed.
    assert all(len(r["ranks"]) == 1 for r in _records(report, "consistency_ok"))
    # The profile itself is in force in both ranks: the verdict is a warning, not a failure.
    assert report.verdict == "warn", report.problems
    ranks = [p for p in report.processes if p.sglang_rank]
    assert len(ranks) == 2 and all(p.verdict == "warn" for p in ranks)
    expected = f"ranks disagree in group 'tp' (consistency=warn): {name}: rank 0=(unset), rank 1={value}"
    text = format_text(report)
    marked = [ln for ln in text.splitlines() if ln.lstrip().startswith(MARK["warn"]) and expected in ln]
    assert len(marked) == 2, text  # one ⚠ line per rank, naming variable and values
    assert text.rstrip().splitlines()[-1] == f"Verdict: {MARK['warn']} in force, with warnings above"


def test_off_runs_no_check_and_records_none(plugin_env):
    name, value = STRAY
    results = run_ranks(2, base_env=_env(plugin_env, consistency="off"), per_rank_env={1: {name: value}})
    assert [results[r]["status"] for r in (0, 1)] == ["ok", "ok"], [results[r].get("tb") for r in results]
    report = load_report(plugin_env["SGLANG_EAGLE_NCCL_AUDIT_DIR"])
    for event in CONSISTENCY_EVENTS:
        assert _records(report, event) == [], event
    # The groups were still built and audited, with the stray value recorded where it was.
    groups = _records(report, "group_created")
    assert {g["group"] for g in groups} >= {"world", "tp"} and len({g["pid"] for g in groups}) == 2
    assert {g["env"].get(name) for g in groups} == {None, value}
    assert not any("ranks disagree" in n for p in report.processes for n in p.notes)
    assert report.verdict == "ok", report.problems
