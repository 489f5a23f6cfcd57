"""Hooks on the installed SGLang's real modules; launch flags on its real CLI; no hot-path cost."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import version

import pytest
from packaging.version import Version

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "send", "recv", "barrier")
# The plugin supports wrapt 1.17 and 2.x. A tier that must run a given series (CI's wrapt-1.17
# tier: wrapt installed into an overlay of the SGLang venv, shadowing its 2.x) names it here, and
# the hooks test fails unless SGLang's processes really ran that wrapt.
WRAPT_SERIES_VAR = "SGLANG_EAGLE_NCCL_TEST_WRAPT"


def _run(code: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


INSPECT = """
    import json, sys
    from sglang_eagle_nccl.inproc.hooks.patching import is_wrapped
    import sglang.srt.distributed.parallel_state as ps
    import sglang.srt.distributed.device_communicators.pynccl as pyn
    GC, PN = ps.GroupCoordinator, pyn.PyNcclCommunicator
    hot = {n: GC.__dict__.get(n) for n in COLLECTIVES_PLACEHOLDER if n in GC.__dict__}
    hot.update({"pynccl." + n: PN.__dict__.get(n) for n in COLLECTIVES_PLACEHOLDER if n in PN.__dict__})
    # What SGLang's own processes do first: load plugins (>= 0.5.11); earlier releases are
    # patched by the .pth bootstrap's post-import hooks as the modules are imported.
    try:
        from sglang.srt.plugins import load_plugins
        load_plugins()
    except ImportError:
        pass
    import sglang.srt.entrypoints.engine as engine
    import sglang.srt.managers.scheduler as sched
    after = {n: GC.__dict__.get(n) for n in COLLECTIVES_PLACEHOLDER if n in GC.__dict__}
    after.update({"pynccl." + n: PN.__dict__.get(n) for n in COLLECTIVES_PLACEHOLDER if n in PN.__dict__})
    from sglang_eagle_nccl.inproc.hooks.patching import STATE as P
    out = {
        "group_init": is_wrapped(GC.__init__),
        "pynccl_init": is_wrapped(PN.__init__),
        "set_envs": is_wrapped(engine._set_envs_and_config),
        "scheduler_init": is_wrapped(sched.Scheduler.__init__),
        "run_scheduler_process": is_wrapped(sched.run_scheduler_process),
        "hot_unchanged": all(after[k] is hot[k] for k in hot),
        "hot_wrapped": sorted(k for k, v in after.items() if is_wrapped(v)),
        "hot_names": sorted(hot),
        "installed": P.installed,
    }
    import wrapt
    out["wrapt"] = [wrapt.__version__, wrapt.__file__]
    print(json.dumps(out))
""".replace("COLLECTIVES_PLACEHOLDER", repr(COLLECTIVES))


# SGLang's HookRegistry exists from 0.5.11: there the opt-in mechanism is checked too.
MECHANISMS = ["auto"] + (["hook_registry"] if Version(version("sglang")).release >= (0, 5, 11) else [])


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_hooks_installed_on_real_modules_and_hot_path_untouched(plugin_env, sglang_version, mechanism):
    env = dict(plugin_env, SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_MECHANISM=mechanism)
    proc = _run(INSPECT, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["group_init"] and out["pynccl_init"] and out["set_envs"] and out["scheduler_init"], out
    assert out["run_scheduler_process"] is False  # spawn targets are never hooked
    assert set(out["hot_names"]) >= {"all_reduce", "all_gather", "broadcast"}
    assert out["hot_unchanged"] and out["hot_wrapped"] == [], out
    # The launch flags are added with wrapt in an enabled launch's root on every version, because
    # custom scripts and SGLang's benchmark scripts parse server arguments without load_plugins().
    cli = {
        "sglang.srt.server_args:ServerArgs.add_cli_args",
        "sglang.srt.server_args:ServerArgs.from_cli_args",
    }
    sglang_targets = {t: m for t, m in out["installed"].items() if t.startswith("sglang.") and t not in cli}
    if mechanism == "hook_registry":
        # The registry gets module-level functions; class members are wrapped in place (its
        # apply_hooks would walk every loaded module per target for copies that cannot exist).
        expected = {t: "wrapt" if "." in t.split(":", 1)[1] else "hook_registry" for t in sglang_targets}
        assert "hook_registry" in expected.values() and "wrapt" in expected.values()
    else:
        expected = dict.fromkeys(sglang_targets, "wrapt")
    assert sglang_targets and sglang_targets == expected, out["installed"]
    assert {out["installed"].get(t) for t in cli} == {"wrapt"}, out["installed"]
    # Which wrapt installed those hooks: the one this tier's interpreter resolves (children see the
    # same sys.path), and the series the tier asked for, if it asked.
    ran, where = out["wrapt"]
    assert ran == version("wrapt"), (ran, where)
    series = os.environ.get(WRAPT_SERIES_VAR)
    if series:
        assert Version(ran).release[:2] == Version(series).release[:2], (ran, where, series)


def test_plugin_not_enabled_installs_nothing(plugin_env):
    proc = _run(INSPECT, dict(plugin_env))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not any(out[k] for k in ("group_init", "pynccl_init", "set_envs", "scheduler_init"))
    assert out["installed"] == {}


NATIVE = (0, 5, 11)  # SGLang's plugin loader (and so the flags without SGLANG_EAGLE_NCCL)


def _help(cmd: list[str], env: dict) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_launch_server_help_lists_flags(plugin_env, sglang_version):
    cmd = [sys.executable, "-W", "ignore", "-m", "sglang.launch_server", "--help"]
    gated = _help(cmd, dict(plugin_env, SGLANG_EAGLE_NCCL="1"))
    for flag in ("--nccl-profile", "--nccl-env", "--nccl-audit-dir", "--nccl-allow-partial", "--nccl-ledger"):
        assert flag in gated
    plain = _help(cmd, plugin_env)
    # >= 0.5.11: SGLang loads the plugin before parsing, so the flags are there without any
    # variable; before that SGLang has no plugin loader (README: set SGLANG_EAGLE_NCCL or use
    # `sglang-eagle-nccl launch`).
    assert ("--nccl-profile" in plain) == (sglang_version.release >= NATIVE)


def test_sglang_serve_help_lists_flags(plugin_env, sglang_version):
    exe = shutil.which("sglang", path=str(__import__("pathlib").Path(sys.executable).parent))
    if sglang_version.release < (0, 5, 5):
        assert exe is None  # the `sglang` console script appeared in 0.5.5
        return
    gated = _help([exe, "serve", "--help"], dict(plugin_env, SGLANG_EAGLE_NCCL="1"))
    assert "--nccl-profile" in gated and "--nccl-env" in gated
    # `sglang serve --help` prints before SGLang loads plugins: without the variable the flags
    # are accepted but not listed (README says so).
    assert "--nccl-profile" not in _help([exe, "serve", "--help"], plugin_env)


# How a bad flag reaches the plugin's parser depends on the release (its CLI hook); which message
# the parser gives does not: one case runs on every release, the rest on the newest only (each
# case imports SGLang's server arguments once more).
@pytest.mark.parametrize(
    "args,fragment,fix",
    [
        (
            ["--nccl-env", "NCCL_BUFFSIZE=4M"],
            "NCCL_BUFFSIZE='4M'",
            "write the byte count, e.g. NCCL_BUFFSIZE=4194304",
        ),
        pytest.param(
            ["--nccl-profile", "no-such-profile"],
            "no built-in profile",
            "use a built-in profile (audit-only, debug, pcie-8gpu, pcie-8gpu-eagle) or a path to a .toml file",
            marks=pytest.mark.newest_only,
        ),
        pytest.param(
            ["--nccl-env", "LD_PRELOAD=libx.so"],
            "NCCL_* and TORCH_NCCL_*",
            "set other variables in your shell or service definition, not in an NCCL profile",
            marks=pytest.mark.newest_only,
        ),
        pytest.param(
            ["--nccl-env", "NCCL_PROTO"],
            "KEY=VALUE",
            "write NCCL_PROTO=<value>, e.g. --nccl-env NCCL_PROTO=LL",
            marks=pytest.mark.newest_only,
        ),
    ],
)
def test_bad_launch_flags_exit_2_before_anything_starts(
    plugin_env, tmp_path, sglang_version, args, fragment, fix
):
    assert fix not in " ".join(args)  # the plugin's own fix, not the flag echoed back
    env = dict(plugin_env) if sglang_version.release >= NATIVE else dict(plugin_env, SGLANG_EAGLE_NCCL="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-m",
            "sglang.launch_server",
            "--model-path",
            str(tmp_path / "none"),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert fragment in proc.stderr and f"Fix: {fix}" in proc.stderr, proc.stderr[-2000:]
    assert "nothing was applied" in proc.stderr and "Traceback" not in proc.stderr
    if sglang_version.release >= NATIVE:
        assert not (tmp_path / "audit").exists()  # no launch directory: nothing started
