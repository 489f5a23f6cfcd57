"""SGLang's own NCCL writes in ``_set_envs_and_config``, reported and undone, on every patch set.

``_set_envs_and_config(server_args)`` is the last thing SGLang's launcher runs before it spawns
its schedulers, and it writes NCCL variables: with ``--enable-nccl-nvls`` every supported release
sets ``NCCL_NVLS_ENABLE=1`` there (0.5.4 unconditionally, 0.5.5+ even over a value already in the
environment). The plugin must report that write as SGLang's and put the profile's value back, or
keep SGLang's value when the user said ``sglang_wins``.

Each test is one real process of the installed SGLang, activated the way users activate it (the
gate variable; the ``--nccl-*`` flags on SGLang's own argument parser; on releases with a plugin
loader also ``load_plugins()`` as SGLang's launchers call it, with either hook mechanism). It runs
SGLang's real argument parsing (``prepare_server_args`` and, where it exists, ``resolve_once``) and
SGLang's real ``_set_envs_and_config``. No engine is started, so this tier runs on the import-only
venvs of 0.5.10 and 0.5.17 as well as on 0.5.4 and 0.5.23.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.read import ProcessRecords, read_launch

TARGET = "sglang.srt.entrypoints.engine:_set_envs_and_config"
VAR = "NCCL_NVLS_ENABLE"
PROFILE_VALUE = "0"  # the profile says off; --enable-nccl-nvls makes SGLang write "1"

SCRIPT = """
    import json, os, sys
    model, mode = sys.argv[1], sys.argv[2]
    argv = ["--model-path", model, "--device", "cpu", "--load-format", "dummy", "--skip-tokenizer-init",
            "--enable-nccl-nvls"] + sys.argv[3:]
    if "load_plugins" in mode:
        # What SGLang's own launchers (launch_server, sglang serve) do before parsing (>= 0.5.11).
        from sglang.srt.plugins import load_plugins
        load_plugins()
    from sglang.srt.server_args import prepare_server_args
    server_args = prepare_server_args(argv)
    if hasattr(server_args, "resolve_once"):
        server_args.resolve_once()  # >= 0.5.20: launch_server resolves here, before launching
    from sglang.srt.entrypoints import engine
    before = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    engine._set_envs_and_config(server_args)
    after = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    from sglang_eagle_nccl.inproc.hooks.patching import STATE as P
    from sglang_eagle_nccl.inproc.boot.state import STATE
    print("RESULT " + json.dumps({
        "before": before, "after": after, "expected": STATE.expected_env, "profile": (STATE.data or {}).get("name"),
        "mechanism": P.installed.get("TARGET_PLACEHOLDER"),
    }))
""".replace("TARGET_PLACEHOLDER", TARGET)

NATIVE_LOADER = (0, 5, 11)  # sglang.srt.plugins.load_plugins and its HookRegistry


def _modes(version) -> list[str]:
    modes = ["gate", "gate+flags"]
    if version.release >= NATIVE_LOADER:
        modes += ["gate+load_plugins", "gate+load_plugins+hook_registry"]
    return modes


def _modes_for_collection() -> list[str]:
    from importlib.metadata import version

    from packaging.version import Version

    return _modes(Version(version("sglang")))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    from sglang_eagle_nccl.inproc.preflight_rank import write_tiny_config

    return write_tiny_config(str(tmp_path_factory.mktemp("model")))


def _run(env: dict[str, str], model: str, mode: str, extra_args: list[str]) -> tuple[dict, str]:
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(SCRIPT), model, mode, *extra_args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0 and "RESULT " in proc.stdout, proc.stderr[-4000:]
    return json.loads(proc.stdout.split("RESULT ", 1)[1].splitlines()[0]), proc.stderr


def _env_and_args(plugin_env: dict[str, str], mode: str) -> tuple[dict[str, str], list[str]]:
    env = dict(plugin_env)
    if mode == "gate+flags":
        # Gate only; the profile comes from SGLang's own argument parser (custom-script path).
        env["SGLANG_EAGLE_NCCL"] = "1"
        return env, ["--nccl-profile", "pcie-8gpu", "--nccl-env", f"{VAR}={PROFILE_VALUE}"]
    env.update(SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_ENV=f"{VAR}={PROFILE_VALUE}")
    if mode.endswith("hook_registry"):
        env["SGLANG_EAGLE_NCCL_MECHANISM"] = "hook_registry"
    return env, []


def _launcher(audit_root: Path) -> tuple[ProcessRecords, list[ProcessRecords]]:
    report = load_report(audit_root)
    _, procs = read_launch(report.run_dir)
    (launcher,) = [p for p in procs if p.first("env_restored")]
    return launcher, procs


def _set_envs_writes(launcher: ProcessRecords) -> dict[str, dict]:
    (rec,) = [r for r in launcher.events("sglang_env_writes") if r["where"] == "_set_envs_and_config"]
    assert rec["server_flags"]["enable_nccl_nvls"] is True
    return {w["name"]: w for w in rec["writes"]}


@pytest.mark.parametrize("mode", _modes_for_collection())
def test_sglang_write_is_reported_and_profile_restored(plugin_env, model_dir, sglang_version, mode):
    env, extra = _env_and_args(plugin_env, mode)
    out, stderr = _run(env, model_dir, mode, extra)
    # The hook sat on SGLang's real function, through the mechanism this activation uses.
    assert out["mechanism"] == ("hook_registry" if mode.endswith("hook_registry") else "wrapt"), out
    # Before the call the profile was in force; SGLang's write is undone after it, and every
    # variable the profile sets holds the profile's value in the launcher that spawns the children.
    assert out["expected"][VAR] == PROFILE_VALUE and out["before"][VAR] == PROFILE_VALUE
    assert out["after"][VAR] == PROFILE_VALUE
    assert {k: out["after"].get(k) for k in out["expected"]} == out["expected"]
    assert out["expected"]["NCCL_PROTO"] == "LL"  # pcie-8gpu, under the override

    launcher, _ = _launcher(Path(env["SGLANG_EAGLE_NCCL_AUDIT_DIR"]))
    writes = _set_envs_writes(launcher)
    # SGLang really wrote (this is what would reach every scheduler without the plugin) ...
    assert writes[VAR]["before"] == PROFILE_VALUE and writes[VAR]["after"] == "1", writes
    assert writes[VAR]["for_correctness"] is None
    # ... and the plugin put the profile back, saying so in the audit and on stderr.
    restored = launcher.first("env_restored")
    overwrites = {o["name"]: o for o in restored["overwrites"]}
    assert overwrites[VAR] == {
        "name": VAR,
        "profile_value": PROFILE_VALUE,
        "foreign_value": "1",
        "restored": True,
    }
    assert restored["env"][VAR] == PROFILE_VALUE
    assert {k: restored["env"].get(k) for k in out["expected"]} == out["expected"]
    assert f"SGLang set {VAR}=1 (was {PROFILE_VALUE})" in stderr
    assert out["profile"].startswith("pcie-8gpu"), out["profile"]
    assert f"restored {VAR}={PROFILE_VALUE} from profile '{out['profile']}' (SGLang had 1)" in stderr
    # Writes to variables the profile leaves alone are reported, never reverted behind SGLang's back.
    for name, w in writes.items():
        if name not in out["expected"]:
            assert name not in overwrites and out["after"].get(name) == w["after"], (name, w)
    # The report surfaces the write as SGLang's, in the launcher.
    report = load_report(Path(env["SGLANG_EAGLE_NCCL_AUDIT_DIR"]))
    assert any(
        w["name"] == VAR and w["where"] == "_set_envs_and_config" and w["pid"] == launcher.pid
        for w in report.sglang_writes
    ), report.sglang_writes


@pytest.mark.newest_only  # the policy is the plugin's, the same on every release; the hook it rides on is proven above
def test_sglang_wins_keeps_sglangs_value(plugin_env, model_dir):
    env, extra = _env_and_args(plugin_env, "gate")
    env["SGLANG_EAGLE_NCCL_SGLANG_WINS"] = VAR
    out, stderr = _run(env, model_dir, "gate", extra)
    assert out["before"][VAR] == PROFILE_VALUE and out["after"][VAR] == "1"
    # Everything else the profile sets is still in force.
    assert {k: out["after"].get(k) for k in out["expected"] if k != VAR} == {
        k: v for k, v in out["expected"].items() if k != VAR
    }
    launcher, _ = _launcher(Path(env["SGLANG_EAGLE_NCCL_AUDIT_DIR"]))
    assert _set_envs_writes(launcher)[VAR]["after"] == "1"
    restored = launcher.first("env_restored")
    overwrites = {o["name"]: o for o in restored["overwrites"]}
    assert overwrites[VAR] == {
        "name": VAR,
        "profile_value": PROFILE_VALUE,
        "foreign_value": "1",
        "restored": False,
    }
    assert restored["env"][VAR] == "1"
    assert f"kept SGLang's {VAR}=1 over the profile's {PROFILE_VALUE} (policy sglang_wins)" in stderr
    assert f"restored {VAR}=" not in stderr


def test_without_the_plugin_sglangs_write_stands(plugin_env, model_dir, tmp_path):
    """Control: the same process without the gate. SGLang's value reaches the environment its
    children inherit, which is what the tests above prove the plugin undoes."""
    env = dict(plugin_env, **{VAR: PROFILE_VALUE})
    out, stderr = _run(env, model_dir, "gate", [])
    assert out["mechanism"] is None and out["after"][VAR] == "1"
    assert "[sglang-eagle-nccl]" not in stderr
    assert not (tmp_path / "audit").exists()
