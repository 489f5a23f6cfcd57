"""The same answer everywhere (issue 18, item 1): validate, env, doctor, the launchers and activation agree.

Each refusal that depends on the environment a profile meets (another NCCL plugin there, a node
rank that is not one, a serialised profile too large to start a process with, [[tuner.rules]]
without the native library) is given to the three commands and to a real interpreter that
activates through the ``.pth`` door; all four must refuse with the same finding. And what ``env``
prints must activate in a process started with exactly that environment, nothing of the shell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.contract import handoff, names
from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.contract.native_location import present
from sglang_eagle_nccl.decision.plan import plan
from sglang_eagle_nccl.profile.resolve import resolve

REPO = Path(__file__).resolve().parents[3]

ACTIVATE = """
    import json, os
    before = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))}
    from sglang_eagle_nccl.inproc.boot import bootstrap
    from sglang_eagle_nccl.inproc.boot.state import STATE
    bootstrap.interpreter_start(enabled=True, cli_flags=False)
    after = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))}
    print(json.dumps({"before": before, "after": after, "active": STATE.active, "refused": STATE.refused}))
"""


def activate_in_child(env: dict[str, str], tmp_path: Path, *, inherit: bool = True) -> dict:
    """A real interpreter through the .pth door; ``inherit`` False: exactly ``env`` (and PYTHONPATH)."""
    base = (
        {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
        }
        if inherit
        else {}
    )
    base.update(env)
    base["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(ACTIVATE)],
        capture_output=True,
        text=True,
        env=base,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def private_lib(tmp_path):
    tmp_path.chmod(0o700)
    folder = tmp_path / "lib"
    folder.mkdir(mode=0o755)
    lib = folder / "libnccl-tuner-mine.so"
    lib.write_bytes(b"\x7fELF")
    lib.chmod(0o644)
    return lib


# --- what env prints activates, alone ------------------------------------------------------------


def test_env_output_alone_activates_with_the_shells_plugin_variables(
    environ_guard, tmp_path, clean_environ, monkeypatch
):
    monkeypatch.setenv("SGLANG_EAGLE_NCCL_ENV", "NCCL_ALGO=Tree")
    monkeypatch.setenv("SGLANG_EAGLE_NCCL_CONSISTENCY", "warn")
    result = cli("env", "--profile", "pcie-8gpu", "--format", "json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    # The serialised profile records these inputs, so they are printed with it ...
    assert (
        printed["SGLANG_EAGLE_NCCL_ENV"] == "NCCL_ALGO=Tree"
        and printed["SGLANG_EAGLE_NCCL_CONSISTENCY"] == "warn"
    )
    # ... and a process started with exactly the printed environment activates the profile.
    child = activate_in_child(printed, tmp_path, inherit=False)
    assert child["active"] and child["refused"] is None
    assert child["after"]["NCCL_ALGO"] == "Tree" and child["after"]["NCCL_PROTO"] == "LL"


def test_the_printed_inputs_are_exactly_the_recorded_ones(environ_guard, clean_environ, monkeypatch):
    monkeypatch.setenv("SGLANG_EAGLE_NCCL_AUDIT_REQUIRED", "0")
    printed = json.loads(cli("env", "--profile", "pcie-8gpu", "--node-rank", "3", "--format", "json").output)
    recorded = handoff.decode(
        printed[names.ENV_PROFILE], printed, validate=lambda d: None, check_inputs=False
    ).inputs
    assert recorded == {k: v for k, v in printed.items() if k in names.INPUT_VARS}
    assert recorded[names.ENV_AUDIT_REQUIRED] == "0"
    # The node rank is printed for that node, and is no recorded input: one hand-off serves every node.
    assert printed[names.ENV_NODE_RANK] == "3" and names.ENV_NODE_RANK not in recorded


# --- the user's own tuner plugin, in a profile without rules: kept everywhere ---------------------


def test_a_users_tuner_plugin_without_rules_is_kept_by_every_door(
    environ_guard, tmp_path, private_lib, clean_environ
):
    flag = f"NCCL_TUNER_PLUGIN={private_lib}"
    assert cli("validate", "pcie-8gpu", "--nccl-env", flag).exit_code == 0
    out = cli("env", "--profile", "pcie-8gpu", "--nccl-env", flag, "--format", "json").output
    printed = json.loads(out[out.index("{\n") :])  # after the warning naming the library (stderr, mixed in)
    assert printed["NCCL_TUNER_PLUGIN"] == str(private_lib)
    # The launcher (flags on SGLang's CLI) and a child of the launch decide the same.
    root = plan(resolve(["pcie-8gpu"], env_flags=[flag]).profile, {})
    assert root.desired["NCCL_TUNER_PLUGIN"] == str(private_lib) and "NCCL_TUNER_PLUGIN" not in root.unset
    child = activate_in_child(printed, tmp_path, inherit=False)
    assert child["active"], child["refused"]
    assert child["after"]["NCCL_TUNER_PLUGIN"] == str(private_lib)
    if present():  # the env plugin is still this installation's
        assert child["after"]["NCCL_ENV_PLUGIN"].endswith(
            "sglang_eagle_nccl/native/libsglang_eagle_nccl_nccl.so"
        )


def test_a_users_tuner_plugin_in_the_environment_is_left_to_nccl_without_rules(private_lib):
    p = plan(resolve(["pcie-8gpu"], use_environ=False).profile, {"NCCL_TUNER_PLUGIN": str(private_lib)})
    assert "NCCL_TUNER_PLUGIN" not in p.desired and "NCCL_TUNER_PLUGIN" not in p.unset


def test_with_rules_the_users_tuner_plugin_in_the_environment_is_refused_everywhere(
    private_lib, clean_environ, monkeypatch, tmp_path
):
    monkeypatch.setenv("NCCL_TUNER_PLUGIN", str(private_lib))
    if present():
        expected = "NCCL_TUNER_PLUGIN=" + repr(str(private_lib)) + ": another NCCL plugin is set here"
        fix = "Fix: unset NCCL_TUNER_PLUGIN, or drop the profile's [[tuner.rules]] to keep your own tuner plugin"
    else:
        expected, fix = "the native tuner plugin is not available here", "drop the [[tuner.rules]]"
    _all_refuse("pcie-8gpu-eagle", expected, fix, tmp_path, {"NCCL_TUNER_PLUGIN": str(private_lib)})


# --- environment facts: every door refuses what activation refuses --------------------------------


def _all_refuse(spec: str, expected: str, fix: str, tmp_path: Path, child_env: dict[str, str]) -> None:
    validate = cli("validate", spec)
    assert validate.exit_code == 1 and expected in validate.output and fix in validate.output, validate.output
    env = cli("env", "--profile", spec)
    assert env.exit_code == 2 and expected in env.output and fix in env.output, env.output
    # The launchers refuse before starting anything, with the same finding.
    for argv in (
        ("launch", "--profile", spec, "--dry-run", "--", "--model-path", "m"),
        ("preflight", "--tp", "1", "--profile", spec),
    ):
        started = cli(*argv)
        assert started.exit_code == 2 and expected in started.output and fix in started.output, started.output
    doctor = json.loads(cli("doctor", "--profile", spec, "--json").output)
    assert any("activation would refuse" in p and expected in p for p in doctor["problems"]), doctor[
        "problems"
    ]
    child = activate_in_child({names.ENV_ENABLE: spec, **child_env}, tmp_path)
    assert not child["active"] and expected in child["refused"] and fix in child["refused"]
    assert child["after"] == child["before"]  # activation refused before writing anything


def test_another_env_plugin_in_the_environment(private_lib, clean_environ, monkeypatch, tmp_path):
    monkeypatch.setenv("NCCL_ENV_PLUGIN", str(private_lib))
    if present():  # this installation's env plugin must be the one NCCL loads
        _all_refuse(
            "pcie-8gpu",
            f"NCCL_ENV_PLUGIN={str(private_lib)!r}: another NCCL plugin is set here",
            "Fix: unset NCCL_ENV_PLUGIN",
            tmp_path,
            {"NCCL_ENV_PLUGIN": str(private_lib)},
        )
        return
    # Built without the library (CC=false): nothing of ours to protect, the user's plugin stays, everywhere.
    assert cli("validate", "pcie-8gpu").exit_code == 0
    child = activate_in_child({names.ENV_ENABLE: "pcie-8gpu", "NCCL_ENV_PLUGIN": str(private_lib)}, tmp_path)
    assert child["active"] and child["after"]["NCCL_ENV_PLUGIN"] == str(private_lib)


def test_a_node_rank_that_is_not_one(clean_environ, monkeypatch, tmp_path):
    monkeypatch.setenv(names.ENV_NODE_RANK, "node-1")
    _all_refuse(
        "pcie-8gpu",
        "SGLANG_EAGLE_NCCL_NODE_RANK='node-1': must be a node rank",
        "set SGLANG_EAGLE_NCCL_NODE_RANK to this node's --node-rank",
        tmp_path,
        {names.ENV_NODE_RANK: "node-1"},
    )


def _nodes_profile(path: Path, nodes: int) -> Path:
    sections = [f'[nodes.{n}.env]\nNCCL_SOCKET_IFNAME = "enp{n}s0f0np0"' for n in range(nodes)]
    path.write_text('extends = "pcie-8gpu"\n' + "\n".join(sections) + "\n")
    return path


def test_a_serialised_profile_too_large_to_start_a_process_with(clean_environ, tmp_path):
    # Every value is valid and the file is a third of the profile limit; the hex hand-off is not.
    spec = str(_nodes_profile(tmp_path / "nodes.toml", 2000))
    _all_refuse(
        spec, "SGLANG_EAGLE_NCCL_PROFILE=", "Fix: shorten the profile to under about 63 KiB", tmp_path, {}
    )
    assert "over MAX_ARG_STRLEN (131072 bytes)" in cli("validate", spec).output


# --- the hand-off's bound is Linux's: at the bound and one past ------------------------------------


def _wire_of(json_bytes: int) -> int:
    """Characters of the signed hand-off of a profile whose JSON (without the value) plus value is ``json_bytes``."""
    return len(handoff.WIRE_PREFIX) + 1 + 2 * json_bytes + 1 + 64


def test_the_encoder_refuses_one_past_the_exec_bound():
    empty = {"name": "x", "env": {"NCCL_SOCKET_IFNAME": ""}}
    base = len(handoff.encode(empty, inputs={}, run_dir=None, key=b"k" * 32).split(".")[1]) // 2
    fits = (handoff.MAX_WIRE_CHARS - _wire_of(base)) // 2  # value characters that still fit
    at_bound = {"name": "x", "env": {"NCCL_SOCKET_IFNAME": "e" * fits}}
    wire = handoff.encode(at_bound, inputs={}, run_dir=None, key=b"k" * 32)
    assert handoff.MAX_WIRE_CHARS - 1 <= len(wire) <= handoff.MAX_WIRE_CHARS
    past = {"name": "x", "env": {"NCCL_SOCKET_IFNAME": "e" * (fits + 1)}}
    with pytest.raises(ProfileError) as info:
        handoff.encode(past, inputs={}, run_dir=None, key=b"k" * 32)
    assert "Argument list too long" in str(info.value)
    # The unsigned form is held to the signed length: the answer never depends on a key.
    with pytest.raises(ProfileError, match="Argument list too long"):
        handoff.encode(past, inputs={}, run_dir=None, key=b"")


def test_the_bound_is_what_the_kernel_accepts(tmp_path):
    # A real execve: an entry of MAX_WIRE_CHARS characters starts a process, one more does not.
    ok = subprocess.run(["/bin/true"], env={names.ENV_PROFILE: "a" * handoff.MAX_WIRE_CHARS}, timeout=30)
    assert ok.returncode == 0
    with pytest.raises(OSError) as info:
        subprocess.run(["/bin/true"], env={names.ENV_PROFILE: "a" * (handoff.MAX_WIRE_CHARS + 1)}, timeout=30)
    assert info.value.errno == 7  # E2BIG: "Argument list too long"
