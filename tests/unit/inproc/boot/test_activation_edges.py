"""Activation in this process (inproc/boot/activation.py) at the edges issue 19's mutation run found unguarded:
what the process_start and profile_changed records name, the node rank and launch directory carried into every
new expectation, a hand-off kept byte for byte, a signed hand-off holding only some sections, and what a later
change gives back.

In-process on the real os.environ (support/inproc.py puts everything back).
"""

from __future__ import annotations

import importlib
import os
import sys

import pytest

from sglang_eagle_nccl.contract import handoff, names, native_location
from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.contract.launch_dir import open_launch
from sglang_eagle_nccl.inproc.boot import activation
from sglang_eagle_nccl.inproc.boot.state import STATE
from sglang_eagle_nccl.profile.resolve import resolve
from support.inproc import native_library, process_with_library
from support.jsonl import read_jsonl

INPUTS = {"SGLANG_EAGLE_NCCL": "1"}
SECTIONS = (
    '[groups.tp.env]\nNCCL_ALGO = "Tree"\n'
    '[nodes.1.env]\nNCCL_SOCKET_IFNAME = "eth1"\n'
    '[nodes.2.env]\nNCCL_SOCKET_IFNAME = "eth2"\n'
)


@pytest.fixture(scope="module")
def library_here(tmp_path_factory) -> str:
    return native_library(tmp_path_factory)


@pytest.fixture
def proc(monkeypatch, library_here):
    with process_with_library(monkeypatch, library_here, ["python", "-m", "sglang.launch_server"]) as state:
        yield state


@pytest.fixture
def sections(tmp_path):
    """A profile layer with a group section and two node sections."""
    f = tmp_path / "sections.toml"
    f.write_text(SECTIONS)
    return str(f)


def profile(*specs: str, env: tuple[str, ...] = (), **policy):
    return resolve(list(specs), env_flags=list(env), policy_flags=policy or None, use_environ=False).profile


def records() -> list[dict]:
    return read_jsonl(STATE.audit.file_path)


def unsigned(wire: str) -> str:
    """The same hand-off without its digest: no process provably wrote it, so it is re-validated."""
    prefix, payload, _mac = wire.split(".")
    return f"{prefix}.{payload}.-"


# --- apply: the process_start record and the state ------------------------------------------------------------


def test_process_start_names_the_plan_the_process_and_what_was_unchanged(proc, tmp_path, sections):
    # This case: a process that has loaded ctypes already (torch does), so the native library is configured at
    # apply; without it the configuration waits for the first `import ctypes` (tests/unit/inproc/boot/test_import_trigger.py).
    importlib.import_module("ctypes")
    prof = profile("pcie-8gpu", sections, sglang_wins=["NCCL_ALGO"])
    run = open_launch(str(tmp_path / "launch"), {}, required=True)
    plan = activation.plan(prof, environ={names.ENV_NODE_RANK: "1"})
    plan.run_dir = run
    os.environ["NCCL_PROTO"] = "LL"  # already what the profile sets
    activation.apply(plan, origin="test")
    assert STATE.node_rank == 1 and STATE.run_dir == run and STATE.profile is prof
    assert STATE.wire == os.environ[names.ENV_PROFILE]
    assert os.environ["NCCL_SOCKET_IFNAME"] == "eth1"
    # The library was started in the launch known at apply: NCCL's reads log is there already.
    assert STATE.reads_log is not None and os.path.dirname(STATE.reads_log) == run
    (start,) = [r for r in records() if r["event"] == "process_start"]
    assert start["ppid"] == os.getppid() and start["python"] == sys.version.split()[0]
    assert start["invocation"] == "python -m sglang.launch_server"
    assert start["profile"] == prof.name and start["profile_sources"] == list(prof.sources) != []
    assert start["node_rank"] == 1
    assert start["group_envs"] == {"tp": {"NCCL_ALGO": "Tree"}}
    assert start["sglang_wins"] == ["NCCL_ALGO"]
    assert start["applied"]["unchanged"] == [
        {"name": "NCCL_PROTO", "kind": "unchanged", "before": "LL", "after": "LL"}
    ]
    assert "NCCL_PROTO" not in {c["name"] for c in start["applied"]["added"] + start["applied"]["changed"]}


@pytest.mark.parametrize(
    "data",
    [
        {"name": "tiny", "env": {"NCCL_PROTO": "LL"}},
        {"name": "tiny", "env": {"NCCL_PROTO": "LL"}, "policy": {}},
    ],
    ids=["no-policy", "empty-policy"],
)
def test_a_signed_hand_off_with_only_some_sections_applies_with_empty_ones(proc, tmp_path, data):
    """The reader accepts a signed profile without policy, groups, nodes or sources (each has its default)."""
    run = open_launch(str(tmp_path / "launch"), {}, required=True)
    wire = handoff.encode(data, inputs=INPUTS, run_dir=run)
    os.environ.update({**INPUTS, names.ENV_PROFILE: wire, names.ENV_ROOT_PID: "1", "NCCL_PROTO": "Simple"})
    plan = activation.plan()
    assert not plan.is_root and plan.desired["NCCL_PROTO"] == "LL"
    activation.apply(plan, origin="test")
    assert os.environ["NCCL_PROTO"] == "LL" and STATE.role == "child"
    (start,) = [r for r in records() if r["event"] == "process_start"]
    assert (start["profile"], start["profile_sources"], start["group_envs"], start["sglang_wins"]) == (
        "tiny",
        [],
        {},
        [],
    )
    activation.set_node_rank(3, reason="late rank")
    changed = records()[-1]
    assert changed["event"] == "profile_changed" and changed["reason"] == "late rank"
    assert (changed["profile"], changed["node_rank"], changed["group_envs"], changed["sglang_wins"]) == (
        "tiny",
        3,
        {},
        [],
    )


def test_a_handed_down_profile_is_kept_byte_for_byte_and_never_re_signed_by_a_child(proc):
    wire = unsigned(handoff.encode(profile("pcie-8gpu").to_dict(), inputs=INPUTS, run_dir=None))
    os.environ.update({**INPUTS, names.ENV_PROFILE: wire, names.ENV_ROOT_PID: "1"})
    plan = activation.plan()
    assert plan.wire == wire and not plan.is_root
    activation.apply(plan, origin="test")
    assert os.environ[names.ENV_PROFILE] == wire and STATE.wire == wire
    activation.publish()
    assert os.environ[names.ENV_PROFILE] == wire and STATE.wire == wire


def test_publish_without_a_profile_writes_nothing(proc):
    STATE.is_root = True
    before = dict(os.environ)
    activation.publish()
    assert dict(os.environ) == before and STATE.wire is None


def test_an_unsigned_hand_off_is_re_validated_naming_where_it_came_from(proc):
    data = {"name": "x", "env": {}, "nodes": {"x": {"NCCL_SOCKET_IFNAME": "eth0"}}}
    wire = unsigned(handoff.encode(data, inputs=INPUTS, run_dir=None))
    with pytest.raises(ProfileError) as info:
        activation.plan(environ={**INPUTS, names.ENV_PROFILE: wire})
    (f,) = info.value.findings
    assert f.variable == "nodes.x" and f.source == names.ENV_PROFILE


def test_a_forkserver_is_recorded_as_a_multiprocessing_helper(proc, monkeypatch):
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-c", "from multiprocessing.forkserver import main"])
    activation.apply(activation.plan(profile("audit-only"), environ={}), origin="test")
    assert STATE.role == "multiprocessing-helper"


def test_a_warning_given_twice_is_said_once(proc, capsys):
    plan = activation.plan(profile("audit-only"), environ={})
    plan.warnings = ["the same warning", "the same warning"]
    activation.apply(plan, origin="test")
    assert capsys.readouterr().err.count("warning: the same warning") == 1


# --- plan -------------------------------------------------------------------------------------------------------


def test_a_child_plan_takes_its_node_section_and_the_handed_down_launch(proc, sections):
    data = profile("debug", sections).to_dict()
    wire = handoff.encode(data, inputs=INPUTS, run_dir="/run/launch")
    environ = {**INPUTS, names.ENV_PROFILE: wire, names.ENV_ROOT_PID: "1", names.ENV_NODE_RANK: "2"}
    plan = activation.plan(environ=environ)
    assert plan.run_dir == "/run/launch" and plan.node_rank == 2
    assert plan.desired["NCCL_SOCKET_IFNAME"] == "eth2"
    assert plan.desired["NCCL_DEBUG_FILE"] == "/run/launch/nccl.%h.%p.log"


def test_a_profiles_own_tuner_plugin_is_kept_over_an_inherited_one_of_ours(proc, tmp_path, library_here):
    theirs = tmp_path / "libtheir-tuner.so"
    theirs.write_bytes(b"")
    inherited = (
        f"/other/venv/lib/python3.11/site-packages/sglang_eagle_nccl/native/{native_location.LIBRARY_FILE}"
    )
    plan = activation.plan(
        profile("audit-only", env=(f"NCCL_TUNER_PLUGIN={theirs}",)), environ={"NCCL_TUNER_PLUGIN": inherited}
    )
    assert plan.desired["NCCL_TUNER_PLUGIN"] == str(theirs) and plan.unset == []
    assert plan.desired["NCCL_ENV_PLUGIN"] == library_here


def test_process_env_with_only_waiting_values_holds_none_of_them():
    data = {"env": {"NCCL_DEBUG_FILE": "{audit_dir}/nccl.log"}}
    assert activation.process_env(data, None) == {}
    assert activation.process_env(data, None, "/run/x") == {"NCCL_DEBUG_FILE": "/run/x/nccl.log"}


def test_a_module_run_with_nothing_after_it_is_recorded_with_its_name():
    assert activation.describe_invocation(["python3", "-m", "sglang.launch_server"]) == (
        "python3 -m sglang.launch_server"
    )


# --- after apply: a new expectation -----------------------------------------------------------------------------


def test_a_value_first_set_by_a_change_is_given_back_by_the_next(proc, capsys):
    os.environ["NCCL_NTHREADS"] = "256"  # the user's own; audit-only leaves it, pcie-8gpu sets 512
    activation.apply(activation.plan(profile("audit-only"), environ={}), origin="test")
    assert os.environ["NCCL_NTHREADS"] == "256"
    activation.reconfigure(profile("pcie-8gpu"), reason="launch flags")
    assert os.environ["NCCL_NTHREADS"] == "512" and STATE.saved_before["NCCL_NTHREADS"] == "256"
    activation.reconfigure(profile("audit-only"), reason="launch flags again")
    assert os.environ["NCCL_NTHREADS"] == "256"
    err = capsys.readouterr().err
    assert "profile 'pcie-8gpu' from launch flags replaces 'audit-only'" in err
    assert "profile 'audit-only' from launch flags again replaces 'pcie-8gpu'" in err


def test_reconfigure_before_any_profile_says_it_replaces_none(proc, capsys):
    activation.reconfigure(profile("audit-only"), reason="launch flags")
    assert (
        "[sglang-eagle-nccl] profile 'audit-only' from launch flags replaces '-'" in capsys.readouterr().err
    )


def test_reconfigure_records_the_new_profile_and_keeps_node_rank_and_launch(
    proc, tmp_path, sections, library_here
):
    activation.apply(activation.plan(profile("audit-only"), environ={}), origin="test")
    run = open_launch(str(tmp_path / "launch"), {}, required=True)
    activation.join_launch(run)
    os.environ[names.ENV_NODE_RANK] = "1"
    new = profile("pcie-8gpu-eagle", "debug", sections, sglang_wins=["NCCL_ALGO"])
    activation.reconfigure(new, reason="launch flags")
    assert STATE.node_rank == 1 and STATE.profile is new
    assert os.environ["NCCL_SOCKET_IFNAME"] == "eth1"
    assert os.environ["NCCL_DEBUG_FILE"] == f"{run}/nccl.%h.%p.log"
    assert os.environ["NCCL_TUNER_PLUGIN"] == library_here  # the new profile has tuner rules
    changed = records()[-1]
    assert changed["event"] == "profile_changed" and changed["profile"] == new.name
    assert changed["node_rank"] == 1 and changed["expected_env"] == STATE.expected_env
    assert changed["expected_env"]["NCCL_SOCKET_IFNAME"] == "eth1"
    assert changed["group_envs"] == {"tp": {"NCCL_ALGO": "Tree"}} and changed["sglang_wins"] == ["NCCL_ALGO"]
    assert changed["env"]["NCCL_SOCKET_IFNAME"] == "eth1" and changed["env"]["NCCL_DEBUG"] == "INFO"


def test_reconfigure_refuses_a_foreign_env_plugin_set_since(proc):
    activation.apply(activation.plan(profile("audit-only"), environ={}), origin="test")
    os.environ["NCCL_ENV_PLUGIN"] = "/opt/theirs.so"
    with pytest.raises(ProfileError) as info:
        activation.reconfigure(profile("pcie-8gpu"), reason="launch flags")
    assert info.value.findings[0].variable == "NCCL_ENV_PLUGIN"


def test_joining_and_a_late_node_rank_keep_the_node_section_and_the_launch(proc, tmp_path, sections):
    prof = profile("debug", sections)
    activation.apply(activation.plan(prof, environ={names.ENV_NODE_RANK: "1"}), origin="test")
    assert os.environ["NCCL_SOCKET_IFNAME"] == "eth1"
    run = open_launch(str(tmp_path / "launch"), {}, required=True)
    activation.join_launch(run)
    assert os.environ["NCCL_SOCKET_IFNAME"] == "eth1"
    assert STATE.wire == os.environ[names.ENV_PROFILE]
    joined = records()[-1]
    assert joined["event"] == "profile_changed" and joined["profile"] == prof.name
    activation.set_node_rank(2, reason="Engine(node_rank=2)")
    assert os.environ["NCCL_SOCKET_IFNAME"] == "eth2"
    assert os.environ["NCCL_DEBUG_FILE"] == f"{run}/nccl.%h.%p.log"
    late = records()[-1]
    assert (late["event"], late["reason"], late["profile"], late["node_rank"]) == (
        "profile_changed",
        "Engine(node_rank=2)",
        prof.name,
        2,
    )
    assert {"name": "NCCL_SOCKET_IFNAME", "before": "eth1", "after": "eth2"} in late["changes"]
