"""Activation in this process (inproc/boot/activation.py, inproc/boot/native.py): what the plan decides, what
apply writes, the rollback behind "os.environ is exactly as it was", and the native plugins' decisions
(whose plugin NCCL loads, the tuner rules handed to the C tuner, configured once per expectation).

In-process on the real os.environ (support/inproc.py puts everything back), so every decision is reached
by the plain tier; tests/unit/inproc/test_doors.py and test_handoff.py prove the same in fresh interpreters.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import sys

import pytest

from sglang_eagle_nccl.contract import handoff, names, native_location
from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.contract.launch_dir import AuditError, open_launch
from sglang_eagle_nccl.decision import plugins
from sglang_eagle_nccl.inproc.boot import activation
from sglang_eagle_nccl.inproc.boot.state import STATE
from sglang_eagle_nccl.profile.resolve import resolve
from support.inproc import native_library, process_with_library
from support.jsonl import read_jsonl

OURS = native_location.LIBRARY_FILE
RULES = [{"collective": "AllReduce", "bytes": [0, 524288], "algorithm": "Ring", "protocol": "LL"}]


@pytest.fixture(scope="module")
def library_here(tmp_path_factory) -> str:
    return native_library(tmp_path_factory)


@pytest.fixture
def proc(monkeypatch, library_here):
    with process_with_library(monkeypatch, library_here, ["python", "-m", "sglang.launch_server"]) as state:
        yield state


def profile(*specs: str, env: tuple[str, ...] = (), **policy):
    return resolve(list(specs), env_flags=list(env), policy_flags=policy or None, use_environ=False).profile


def elsewhere() -> str:
    return f"/other/venv/lib/python3.11/site-packages/sglang_eagle_nccl/native/{OURS}"


# --- plugin_env: whose plugin NCCL loads ---------------------------------------------------------------------


def test_the_env_plugin_is_always_this_installations(proc, library_here):
    assert plugins.plugin_env({"env": {}}, {}) == {"NCCL_ENV_PLUGIN": library_here}
    # A copy of ours from another installation (a parent in another venv) is replaced, never refused.
    assert plugins.plugin_env({}, {"NCCL_ENV_PLUGIN": elsewhere()}) == {"NCCL_ENV_PLUGIN": library_here}
    assert plugins.plugin_env({}, {"NCCL_ENV_PLUGIN": ""}) == {"NCCL_ENV_PLUGIN": library_here}


def test_a_foreign_env_plugin_is_refused_naming_it(proc):
    with pytest.raises(ProfileError) as info:
        plugins.plugin_env({}, {"NCCL_ENV_PLUGIN": "/opt/site/libnccl-env.so"})
    (f,) = info.value.findings
    assert (f.variable, f.value) == ("NCCL_ENV_PLUGIN", "/opt/site/libnccl-env.so")
    assert f.rule.startswith(
        "another NCCL plugin is set here, but sglang-eagle-nccl loads its own env plugin"
    )
    assert f.fix == "unset NCCL_ENV_PLUGIN (or uninstall sglang-eagle-nccl to use your own plugin)"


def test_a_foreign_tuner_plugin_is_refused_only_when_the_profile_has_rules(proc, library_here):
    user = {"NCCL_TUNER_PLUGIN": "/opt/site/libnccl-tuner.so"}
    # Without rules the user's tuner is theirs: NCCL loads it, nothing is written for it.
    assert plugins.plugin_env({}, user) == {"NCCL_ENV_PLUGIN": library_here}
    with pytest.raises(ProfileError) as info:
        plugins.plugin_env({"tuner_rules": RULES}, user)
    (f,) = info.value.findings
    assert (f.variable, f.value) == ("NCCL_TUNER_PLUGIN", "/opt/site/libnccl-tuner.so")
    assert "loads its own tuner plugin (the profile's [[tuner.rules]] run in it)" in f.rule
    assert (
        f.fix
        == "unset NCCL_TUNER_PLUGIN, or drop the profile's [[tuner.rules]] to keep your own tuner plugin"
    )


def test_the_tuner_plugin_is_ours_with_rules_the_profiles_otherwise(proc, library_here):
    assert plugins.plugin_env({"tuner_rules": RULES}, {}) == {
        "NCCL_ENV_PLUGIN": library_here,
        "NCCL_TUNER_PLUGIN": library_here,
    }
    assert (
        plugins.plugin_env({"tuner_rules": RULES}, {"NCCL_TUNER_PLUGIN": elsewhere()})["NCCL_TUNER_PLUGIN"]
        == library_here
    )
    wanted = {"NCCL_TUNER_PLUGIN": "/opt/profile-tuner.so"}
    assert plugins.plugin_env({}, {}, wanted) == {"NCCL_ENV_PLUGIN": library_here, **wanted}
    # Ours, inherited from a launch with rules, is taken out where this profile has none.
    assert plugins.plugin_env({}, {"NCCL_TUNER_PLUGIN": elsewhere()}) == {
        "NCCL_ENV_PLUGIN": library_here,
        "NCCL_TUNER_PLUGIN": None,
    }
    assert (
        plugins.plugin_env({"tuner_rules": []}, {"NCCL_TUNER_PLUGIN": library_here})["NCCL_TUNER_PLUGIN"]
        is None
    )


def test_without_the_library_nccl_reads_the_environment_and_rules_are_refused(proc, monkeypatch, tmp_path):
    monkeypatch.setattr(native_location, "HERE", str(tmp_path / "sglang_eagle_nccl" / "native"))
    assert plugins.plugin_env({}, {}) == {}
    inherited = {"NCCL_ENV_PLUGIN": elsewhere(), "NCCL_TUNER_PLUGIN": elsewhere()}
    assert plugins.plugin_env({}, inherited) == {"NCCL_ENV_PLUGIN": None, "NCCL_TUNER_PLUGIN": None}
    assert plugins.plugin_env({}, {"NCCL_ENV_PLUGIN": "/opt/theirs.so"}) == {}  # theirs: NCCL loads it
    with pytest.raises(ProfileError) as info:
        plugins.plugin_env({"tuner_rules": RULES}, {})
    (f,) = info.value.findings
    assert f.variable == "tuner.rules" and f.rule.startswith(
        "the profile has [[tuner.rules]] but the native tuner plugin is not available here: "
    )
    assert (
        f.fix == "install sglang-eagle-nccl from a wheel built with a C compiler, or drop the [[tuner.rules]]"
    )


# --- plan ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,rank", [(None, None), ("", None), ("0", 0), (" 12 ", 12), ("999999999", 999999999)]
)
def test_node_rank_from_the_environment(value, rank):
    environ = {} if value is None else {names.ENV_NODE_RANK: value}
    assert activation.node_rank_from(environ) == rank


@pytest.mark.parametrize("value", ["x", "-1", "1.0", "1000000000", "１"])
def test_a_node_rank_that_is_not_one_is_refused(value):
    with pytest.raises(ProfileError) as info:
        activation.node_rank_from({names.ENV_NODE_RANK: value})
    (f,) = info.value.findings
    assert (f.variable, f.value) == (names.ENV_NODE_RANK, value)
    assert f.rule == "must be a node rank: ASCII digits, at most 9 of them"


def test_process_env_is_env_plus_the_nodes_section():
    data = {
        "env": {"NCCL_PROTO": "LL", "NCCL_SOCKET_IFNAME": "eth0"},
        "nodes": {"1": {"NCCL_SOCKET_IFNAME": "ib0"}},
    }
    assert activation.process_env(data, None) == data["env"]
    assert activation.process_env(data, 0) == data["env"]
    assert activation.process_env(data, 1) == {"NCCL_PROTO": "LL", "NCCL_SOCKET_IFNAME": "ib0"}
    assert activation.process_env({}, 1) == {}


def test_an_audit_dir_value_waits_for_the_launch():
    data = {"env": {"NCCL_DEBUG_FILE": "{audit_dir}/nccl.%h.%p.log", "NCCL_DEBUG": "INFO"}}
    assert activation.process_env(data, None) == {"NCCL_DEBUG": "INFO"}
    assert activation.process_env(data, None, "/run/x") == {
        "NCCL_DEBUG_FILE": "/run/x/nccl.%h.%p.log",
        "NCCL_DEBUG": "INFO",
    }


def test_a_plan_from_launch_flags_is_a_root_that_writes_the_profile_and_the_env_plugin(proc, library_here):
    plan = activation.plan(profile("pcie-8gpu"), environ={})
    assert plan.is_root and plan.wire is None and plan.run_dir is None and plan.node_rank is None
    assert plan.desired["NCCL_ALGO"] == "Ring" and plan.desired["NCCL_ENV_PLUGIN"] == library_here
    assert "NCCL_TUNER_PLUGIN" not in plan.desired and plan.unset == [] and plan.warnings == []
    assert os.environ.get("NCCL_ALGO") is None  # a plan writes nothing


def test_a_plan_from_the_environment_resolves_and_keeps_warnings(proc):
    plan = activation.plan(
        environ={"SGLANG_EAGLE_NCCL": "audit-only", "SGLANG_EAGLE_NCCL_ENV": "NCCL_PROTO=LL128"}
    )
    assert plan.data["env"]["NCCL_PROTO"] == "LL128" and plan.is_root and plan.profile is not None
    assert any("LL128" in w for w in plan.warnings), plan.warnings


def test_a_child_takes_the_handed_down_profile_and_keeps_what_sglang_won(proc):
    data = profile("pcie-8gpu", sglang_wins=["NCCL_ALGO"]).to_dict()
    inputs = {"SGLANG_EAGLE_NCCL": "1"}
    wire = handoff.encode(data, inputs=inputs, run_dir="/run/launch")
    environ = {
        **inputs,
        names.ENV_PROFILE: wire,
        names.ENV_ROOT_PID: "1",
        "NCCL_ALGO": "Tree",
        names.ENV_NODE_RANK: "2",
    }
    plan = activation.plan(environ=environ)
    assert not plan.is_root and plan.wire == wire and plan.run_dir == "/run/launch" and plan.node_rank == 2
    assert "NCCL_ALGO" not in plan.desired  # SGLang's value, decided in the launcher, stays
    assert plan.desired["NCCL_PROTO"] == "LL"
    # Where the launcher's environment held nothing for it, the profile's value is written.
    assert activation.plan(environ={**environ, "NCCL_ALGO": ""}).desired.get("NCCL_ALGO") is None
    assert (
        activation.plan(environ={k: v for k, v in environ.items() if k != "NCCL_ALGO"}).desired["NCCL_ALGO"]
        == "Ring"
    )


def test_a_root_marker_without_a_handed_down_profile_is_a_root(proc):
    plan = activation.plan(environ={"SGLANG_EAGLE_NCCL": "audit-only", names.ENV_ROOT_PID: "1"})
    assert plan.is_root
    plan = activation.plan(
        environ={"SGLANG_EAGLE_NCCL": "audit-only", names.ENV_ROOT_PID: "1", names.ENV_PROFILE: ""}
    )
    assert plan.is_root and plan.wire is None


def test_a_root_marker_alone_beside_a_profile_makes_a_child_that_keeps_sglangs_values(proc):
    data = profile("pcie-8gpu").to_dict()
    wire = handoff.encode(data, inputs={"SGLANG_EAGLE_NCCL": "1"}, run_dir=None)
    child = activation.plan(
        environ={
            "SGLANG_EAGLE_NCCL": "1",
            names.ENV_PROFILE: wire,
            names.ENV_ROOT_PID: "7",
            "NCCL_ALGO": "Tree",
        }
    )
    assert not child.is_root and child.desired["NCCL_ALGO"] == "Ring"  # not under sglang_wins: the profile's


def test_a_plan_refuses_a_foreign_env_plugin_before_anything_is_written(proc):
    os.environ["NCCL_ENV_PLUGIN"] = "/opt/theirs.so"
    with pytest.raises(ProfileError):
        activation.plan(profile("pcie-8gpu"))
    assert os.environ["NCCL_ENV_PLUGIN"] == "/opt/theirs.so" and not STATE.active


def test_an_inherited_tuner_of_ours_is_planned_for_removal(proc):
    plan = activation.plan(profile("pcie-8gpu"), environ={"NCCL_TUNER_PLUGIN": elsewhere()})
    assert plan.unset == ["NCCL_TUNER_PLUGIN"] and "NCCL_TUNER_PLUGIN" not in plan.desired


# --- apply ---------------------------------------------------------------------------------------------------


def test_apply_writes_the_profile_marks_the_root_and_signs_the_hand_off(proc, tmp_path, library_here):
    importlib.import_module("ctypes")  # this case: ctypes loaded already (torch does); see the test above
    run = open_launch(str(tmp_path), {}, required=True)
    plan = activation.plan(profile("pcie-8gpu"), environ={})
    plan.run_dir = run
    os.environ["NCCL_ALGO"] = "Tree"  # the user's export, changed by the profile
    activation.apply(plan, origin="test")
    assert STATE.active and STATE.is_root and STATE.origin == "test" and STATE.role == "launcher"
    assert os.environ["NCCL_ALGO"] == "Ring" and os.environ["SGLANG_EAGLE_NCCL"] == "1"
    assert os.environ[names.ENV_ROOT_PID] == str(os.getpid())
    decoded = handoff.decode(
        os.environ[names.ENV_PROFILE], validate=lambda d: pytest.fail("signed: not re-validated")
    )
    assert decoded.trusted and decoded.run_dir == run and decoded.data["env"]["NCCL_ALGO"] == "Ring"
    assert STATE.expected_env == plan.desired and STATE.saved_before["NCCL_ALGO"] == "Tree"
    assert STATE.saved_before["NCCL_PROTO"] is None
    (record,) = read_jsonl(STATE.audit.file_path)
    assert record["event"] == "process_start" and record["role"] == "launcher" and record["origin"] == "test"
    assert record["expected_env"] == plan.desired and record["env"]["NCCL_ALGO"] == "Ring"
    changed = {c["name"]: c for c in record["applied"]["changed"]}
    assert changed["NCCL_ALGO"] == {"name": "NCCL_ALGO", "kind": "changed", "before": "Tree", "after": "Ring"}
    assert {c["name"] for c in record["applied"]["added"]} >= {"NCCL_PROTO", "NCCL_ENV_PLUGIN"}
    assert all(c["name"] in plan.desired for kind in record["applied"].values() for c in kind)
    # The library was configured before the environment pointed NCCL at it.
    assert STATE.env_control is not None and STATE.env_control.tuner_rule_count() == 0


def test_apply_is_once_per_process(proc):
    activation.apply(activation.plan(profile("pcie-8gpu"), environ={}), origin="first")
    activation.apply(activation.plan(profile("audit-only"), environ={}), origin="second")
    assert STATE.origin == "first" and os.environ["NCCL_ALGO"] == "Ring"


def test_a_child_keeps_the_inherited_hand_off_and_marks_nothing(proc):
    data = profile("pcie-8gpu").to_dict()
    wire = handoff.encode(data, inputs={"SGLANG_EAGLE_NCCL": "1"}, run_dir=None)
    os.environ.update({"SGLANG_EAGLE_NCCL": "1", names.ENV_PROFILE: wire, names.ENV_ROOT_PID: "12345"})
    activation.apply(activation.plan(), origin="test")
    assert STATE.role == "child" and not STATE.is_root
    assert os.environ[names.ENV_PROFILE] == wire and os.environ[names.ENV_ROOT_PID] == "12345"


def test_the_tuner_rules_are_handed_to_the_c_tuner_in_this_process(proc, library_here):
    importlib.import_module("ctypes")  # this case: ctypes loaded already (torch does); see the test above
    prof = profile("pcie-8gpu-eagle")
    assert prof.to_dict()["tuner_rules"]
    plan = activation.plan(prof, environ={})
    assert plan.desired["NCCL_TUNER_PLUGIN"] == library_here
    activation.apply(plan, origin="test")
    binding = STATE.env_control
    assert binding is not None and binding.tuner_rule_count() == len(prof.to_dict()["tuner_rules"])
    assert os.environ["NCCL_TUNER_PLUGIN"] == library_here


def test_a_multiprocessing_helper_is_recorded_as_one(proc, monkeypatch, tmp_path):
    run = open_launch(str(tmp_path), {}, required=True)
    monkeypatch.setattr(
        sys, "orig_argv", ["python", "-c", "from multiprocessing.resource_tracker import main;main(5)"]
    )
    plan = activation.plan(profile("audit-only"), environ={})
    plan.run_dir = run
    activation.apply(plan, origin="test")
    assert STATE.role == "multiprocessing-helper"


def test_a_failure_after_the_write_puts_the_environment_back_exactly(proc, tmp_path):
    """audit_required, and the process_start record cannot be written (the file may not grow): the
    environment had been written; the rollback gives back every variable, and the process is not active."""
    run = open_launch(str(tmp_path), {}, required=True)
    plan = activation.plan(profile("pcie-8gpu", audit_required=True), environ={})
    plan.run_dir = run
    os.environ["NCCL_ALGO"] = "Tree"
    before = dict(os.environ)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, old_limit[1]))  # process_start is far longer: EFBIG
    try:
        with pytest.raises(AuditError, match="audit_required is set"):
            activation.apply(plan, origin="test")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert dict(os.environ) == before
    assert not STATE.active and STATE.data is None and STATE.saved_before == {}
    # The writer stays for the door's refusal record (the launch directory exists).
    assert STATE.audit is not None and STATE.audit.run_dir == run


def test_a_value_the_environment_cannot_hold_refuses_before_the_audit_or_the_write(proc, tmp_path):
    run = open_launch(str(tmp_path), {}, required=True)
    plan = activation.plan(profile("pcie-8gpu"), environ={})
    plan.run_dir = run
    plan.desired["NCCL_ALGO"] = "Ring\0"
    before = dict(os.environ)
    with pytest.raises(ValueError, match="NUL"):
        activation.apply(plan, origin="test")
    assert dict(os.environ) == before and os.listdir(run) == ["launch.json"]


def test_apply_says_the_resolution_warnings_once(proc, capsys):
    plan = activation.plan(
        environ={"SGLANG_EAGLE_NCCL": "audit-only", "SGLANG_EAGLE_NCCL_ENV": "NCCL_PROTO=LL128"}
    )
    activation.apply(plan, origin="test")
    err = capsys.readouterr().err
    assert err.count("[sglang-eagle-nccl] warning: ") == len(plan.warnings) >= 1


# --- after apply: a new expectation ---------------------------------------------------------------------------


def test_reconfigure_moves_to_the_new_profile_and_gives_back_what_it_no_longer_sets(proc, tmp_path):
    run = open_launch(str(tmp_path), {}, required=True)
    plan = activation.plan(profile("pcie-8gpu"), environ={})
    plan.run_dir = run
    os.environ["NCCL_NTHREADS"] = "256"  # the user's own, replaced by the profile's 512
    activation.apply(plan, origin="test")
    old_wire = os.environ[names.ENV_PROFILE]
    activation.reconfigure(profile("audit-only", env=("NCCL_PROTO=Simple",)), reason="launch flags")
    assert os.environ["NCCL_PROTO"] == "Simple" and "NCCL_ALGO" not in os.environ
    assert os.environ["NCCL_NTHREADS"] == "256"  # given back
    assert os.environ["NCCL_ENV_PLUGIN"] == plan.desired["NCCL_ENV_PLUGIN"]
    assert STATE.expected_env["NCCL_PROTO"] == "Simple" and "NCCL_ALGO" not in STATE.expected_env
    assert os.environ[names.ENV_PROFILE] != old_wire  # the root re-signed what children inherit
    records = read_jsonl(STATE.audit.file_path)
    changed = records[-1]
    assert changed["event"] == "profile_changed" and changed["reason"] == "launch flags"
    assert {"name": "NCCL_ALGO", "before": "Ring", "after": None} in changed["changes"]
    assert all(c["before"] != c["after"] for c in changed["changes"])


def test_a_node_rank_learned_late_selects_its_section(proc):
    prof = resolve([], env_flags=["NCCL_PROTO=LL"], use_environ=False).profile
    data = prof.to_dict()
    data["nodes"] = {"1": {"NCCL_SOCKET_IFNAME": "ib1"}}
    plan = activation.plan(prof, environ={})
    plan.data = data
    activation.apply(plan, origin="test")
    activation.set_node_rank(1, reason="Engine(node_rank=1)")
    assert os.environ[names.ENV_NODE_RANK] == "1" and os.environ["NCCL_SOCKET_IFNAME"] == "ib1"
    assert STATE.node_rank == 1 and STATE.expected_env["NCCL_ENV_PLUGIN"] == plan.desired["NCCL_ENV_PLUGIN"]
    os.environ["NCCL_SOCKET_IFNAME"] = "changed by hand"
    activation.set_node_rank(1, reason="again")  # the same rank: nothing to do
    assert os.environ["NCCL_SOCKET_IFNAME"] == "changed by hand"


def test_a_node_rank_before_any_profile_does_nothing(proc):
    activation.set_node_rank(3, reason="x")
    assert names.ENV_NODE_RANK not in os.environ and STATE.node_rank is None


def test_joining_the_launch_writes_values_that_wait_for_it(proc, tmp_path):
    # This case: a process that has loaded ctypes already (torch does), so the native library is configured at
    # apply; without it the configuration waits for the first `import ctypes` (tests/unit/inproc/boot/test_import_trigger.py).
    importlib.import_module("ctypes")
    plan = activation.plan(profile("debug"), environ={})
    assert "NCCL_DEBUG_FILE" not in plan.desired
    activation.apply(plan, origin="test")
    run = open_launch(str(tmp_path), {}, required=True)
    activation.join_launch(run)
    assert os.environ["NCCL_DEBUG_FILE"] == f"{run}/nccl.%h.%p.log" and STATE.run_dir == run
    assert handoff.decode(os.environ[names.ENV_PROFILE], validate=lambda d: None).run_dir == run
    records = read_jsonl(STATE.audit.file_path)
    # The library gets the new expectation, and NCCL's reads log is created in the launch now known.
    assert [r["event"] for r in records] == ["process_start", "nccl_reads_log", "profile_changed"]
    assert records[2]["reason"] == "the launch directory was opened"
    assert STATE.reads_log == os.path.join(run, records[1]["file"])


def test_joining_the_launch_with_nothing_waiting_only_re_signs(proc, tmp_path):
    importlib.import_module("ctypes")  # this case: ctypes loaded already (torch does); see the test above
    activation.apply(activation.plan(profile("pcie-8gpu"), environ={}), origin="test")
    run = open_launch(str(tmp_path), {}, required=True)
    activation.join_launch(run)
    assert handoff.decode(os.environ[names.ENV_PROFILE], validate=lambda d: None).run_dir == run
    records = read_jsonl(STATE.audit.file_path)
    # Kept in memory until the launch was joined; NCCL's reads log is created there now.
    assert [r["event"] for r in records] == ["process_start", "nccl_reads_log"]
    with open(STATE.reads_log) as log:
        first = json.loads(log.readline())
    assert first["event"] == "reads_log" and first["pid"] == os.getpid()


def test_a_child_never_re_signs(proc):
    data = profile("pcie-8gpu").to_dict()
    wire = handoff.encode(data, inputs={"SGLANG_EAGLE_NCCL": "1"}, run_dir=None)
    os.environ.update({"SGLANG_EAGLE_NCCL": "1", names.ENV_PROFILE: wire, names.ENV_ROOT_PID: "1"})
    activation.apply(activation.plan(), origin="test")
    activation.publish()
    assert os.environ[names.ENV_PROFILE] == wire


@pytest.mark.parametrize(
    "argv,text",
    [
        ([], "python"),
        (["/usr/bin/python3"], "python3"),
        (["/usr/bin/python3", "-m", "sglang.launch_server", "--x"], "python3 -m sglang.launch_server"),
        (["python3", "-m"], "python3"),
        (
            ["python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"],
            "python3 -c <multiprocessing.spawn>",
        ),
        (["python3", "-c", "import multiprocessing.forkserver"], "python3 -c <multiprocessing.forkserver>"),
        (["python3", "-c", "print('secret')"], "python3 -c <code>"),
        (["python3", "-c"], "python3"),
        (["python3", "-u", "/srv/app/serve.py", "--token", "s"], "python3 serve.py"),
        (["python3", "-X", "dev"], "python3 dev"),
    ],
)
def test_the_invocation_is_recorded_without_its_arguments(argv, text):
    assert activation.describe_invocation(argv) == text
