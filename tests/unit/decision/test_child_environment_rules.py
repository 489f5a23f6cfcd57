"""What a child is handed (sglang_eagle_nccl/decision/child_env.py), through ``env`` and the Ray hook's function.

The rules, each checked on what the real ``env`` command prints (click's runner, in this process) or on
what :func:`child_environment` -- the function SGLang's Ray driver hook calls -- returns:

- the NCCL values are those of the node the launch is for (``[nodes.<rank>.env]``), and a value holding
  ``{audit_dir}`` gets the launch directory that was opened (without one it waits, left out);
- a standalone environment carries exactly the plugin inputs of the shell it was decided in, no more
  (a process started with it finds the inputs its hand-off records and nothing else); an audit root
  among them is absolute, the one the profile was resolved with, whatever directory the child starts in;
- the hand-off is signed with this user's key, created if need be; a dry run (``create_key`` False)
  writes no key and hands the profile down unsigned, so every reader validates it;
- unless asked for a standalone environment, the shell's plugin inputs are left to inheritance;
- only NCCL_* / TORCH_NCCL_* values travel: anything else is refused, naming each variable.
"""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.decision.child_env import child_environment, decide_child_environment
from sglang_eagle_nccl.profile.resolve import resolve

PROFILE = """\
[env]
NCCL_ALGO = "Ring"
NCCL_DEBUG_FILE = "{audit_dir}/nccl.log"
[nodes.1.env]
NCCL_SOCKET_IFNAME = "ib1"
"""


def env_json(*args: str) -> dict[str, str]:
    result = CliRunner().invoke(main, ["env", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def plugin_inputs(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in names.INPUT_VARS}


@pytest.fixture
def profile_file(tmp_path) -> str:
    path = tmp_path / "p.toml"
    path.write_text(PROFILE)
    return str(path)


def test_env_hands_the_nodes_values_and_the_opened_launch_directory(clean_environ, profile_file, tmp_path):
    audit = tmp_path / "audit"
    out = env_json("--profile", profile_file, "--node-rank", "1", "--audit-dir", str(audit))
    (launch,) = [p for p in audit.iterdir() if p.is_dir()]
    assert out["NCCL_SOCKET_IFNAME"] == "ib1" and out[names.ENV_NODE_RANK] == "1"
    assert out["NCCL_DEBUG_FILE"] == f"{launch}/nccl.log" and out["NCCL_ALGO"] == "Ring"
    plain = env_json("--profile", profile_file)
    # No launch directory: the value waits for the launch the process joins; node 0's values only.
    assert "NCCL_DEBUG_FILE" not in plain and "NCCL_SOCKET_IFNAME" not in plain and plain["NCCL_ALGO"] == "Ring"


@pytest.mark.parametrize("shell_root", [None, "relative/audit", "/abs/audit"])
@pytest.mark.parametrize("profile_root", [None, "/profile/audit"])
def test_env_carries_exactly_the_shells_inputs_with_an_absolute_audit_root(clean_environ, monkeypatch, tmp_path,
                                                                           shell_root, profile_root):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "p.toml"
    path.write_text('[env]\nNCCL_ALGO = "Ring"\n' + (f'[policy]\naudit_dir = "{profile_root}"\n' if profile_root else ""))
    monkeypatch.setenv(names.ENV_ENV, "NCCL_DEBUG=INFO")
    if shell_root:
        monkeypatch.setenv(names.ENV_AUDIT_DIR, shell_root)
    out = env_json("--profile", str(path))
    shell = plugin_inputs(dict(os.environ))
    assert set(plugin_inputs(out)) == set(shell) | {names.ENV_ENABLE}
    assert out[names.ENV_ENV] == "NCCL_DEBUG=INFO" and out["NCCL_DEBUG"] == "INFO"
    if shell_root:
        # The reference: a relative root is the one of the directory env ran in.
        assert out[names.ENV_AUDIT_DIR] == os.path.normpath(os.path.join(tmp_path, shell_root))


def test_the_ray_hooks_child_environment_is_signed_and_a_dry_run_writes_no_key(clean_environ, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no key yet
    key = tmp_path / "cache" / "sglang-eagle-nccl" / "handoff.key"
    profile = resolve(["pcie-8gpu"], use_environ=False).profile
    driver = {names.ENV_ENABLE: "pcie-8gpu", names.ENV_ENV: "NCCL_NTHREADS=256", "PATH": "/bin"}
    common = {"run_dir": None, "node_rank": None, "environ": driver, "root_pid": "4242"}
    dry = child_environment(profile, create_key=False, **common)
    assert dry[names.ENV_PROFILE].endswith(".-") and not key.exists()
    # The default: not standalone -- the child inherits the shell, its inputs are not handed again.
    assert names.ENV_ENV not in dry and dry[names.ENV_ROOT_PID] == "4242"
    signed = child_environment(profile, **common)
    assert key.is_file() and not signed[names.ENV_PROFILE].endswith(".-")
    assert {k: v for k, v in signed.items() if k != names.ENV_PROFILE} == {
        k: v for k, v in dry.items() if k != names.ENV_PROFILE}
    standalone = decide_child_environment(profile, standalone=True, **common).updates
    plain = decide_child_environment(profile, **common).updates
    assert standalone[names.ENV_ENV] == "NCCL_NTHREADS=256" and names.ENV_ENV not in plain


def test_only_nccl_values_are_handed_to_a_child_and_each_other_one_is_named(clean_environ):
    profile = resolve(["pcie-8gpu"], use_environ=False).profile
    with pytest.raises(ValueError) as caught:
        decide_child_environment(profile, run_dir=None, node_rank=None, environ={}, root_pid=None,
                                 nccl_values={"NCCL_ALGO": "Ring", "PATH": "/x", "LD_PRELOAD": "/y.so"})
    assert str(caught.value).endswith(": LD_PRELOAD, PATH")
