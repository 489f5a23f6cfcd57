"""Every door of SGLang's server CLI refuses through the door table, entered through SGLang's own code: the real
``python -m sglang.launch_server`` of the installed SGLang wheel, its ``import sglang``, its plugin loader
(``load_plugins()`` calling the ``sglang.srt.plugins`` entry point) and its argument parser (``--nccl-*`` flags).

A failure is injected at every step after the first write (the documented test-only fault point,
docs/fail-closed.md). After each: the process's ``os.environ`` when it ends is byte for byte the one it was
started with (plus the cache folders SGLang's own import sets); exactly one stderr line says "not applied" and none says "applied"; SGLang never started (it never
reached ``_set_envs_and_config``: no launch was opened) and the process failed; exit 2 where the table says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.version import Version

from sglang_eagle_nccl.inproc.boot.state import ENV_TEST_FAULT
from sglang_eagle_nccl.inproc.refusal import DOORS, EXIT, FAULT_STEPS

SGLANG = Version(version("sglang"))
PLUGIN_PREFIXES = ("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")
PROBE = Path(__file__).resolve().parents[1] / "probes" / "server_cli_probe.py"

# (how the profile is asked for, step, the door that must refuse, exit code)
GATE = "gate"  # SGLANG_EAGLE_NCCL=pcie-8gpu in the environment
FLAGS = "flags"  # --nccl-profile pcie-8gpu on SGLang's CLI, no gate
ALL_CASES = [
    # interpreter start / the first `import ctypes` (torch, inside `import sglang`): `import sglang` raises.
    *[(GATE, step, "interpreter_start", 1) for step in FAULT_STEPS["interpreter_start"]],
    (GATE, "native.late", "native_late", 1),
    # `import sglang`: an internal error stays a traceback (exit 1); the table's exit 2 is for the plugin's stops.
    *[(GATE, step, "sglang_import", 1) for step in FAULT_STEPS["sglang_import"]],
    *[(GATE, step, "entry_point", 2) for step in FAULT_STEPS["entry_point"]],
    (GATE, "cli_hooks.added", "cli_hooks", 2),
    (FLAGS, "cli_hooks.added", "cli_hooks", 2),
    (FLAGS, "cli_flags.activated", "cli_flags", 2),
    (FLAGS, "cli_hooks.installed", "cli_hooks", 2),
]
# Before 0.5.11 SGLang has no plugin loader: no entry-point door, and the flags reach its CLI only with the gate.
LOADER = SGLANG.release >= (0, 5, 11)
CASES = [c for c in ALL_CASES if LOADER or (c[2] != "entry_point" and c[0] != FLAGS)]


def test_the_cases_reach_every_step_of_the_server_cli():
    steps = {c[1] for c in ALL_CASES}
    assert steps == {s for door, ss in FAULT_STEPS.items() for s in ss}
    assert all(DOORS[door][2] == EXIT for _how, _s, door, code in CASES if code == 2)


def claims_applied(line: str) -> bool:
    """A line that says a profile was applied (the refusal's own wording is not that)."""
    for refusal in ("not applied", "nothing was applied", "cannot be applied"):
        line = line.replace(refusal, "")
    return "applied" in line


@pytest.mark.parametrize("how,step,door,code", CASES)
def test_a_failure_at_every_step_of_the_server_cli_is_refused(plugin_env, tmp_path, how, step, door, code):
    env = dict(plugin_env, **{ENV_TEST_FAULT: step})
    args = ["--model-path", str(tmp_path / "no-model"), "--device", "cpu"]
    if how == GATE:
        env["SGLANG_EAGLE_NCCL"] = "pcie-8gpu"
    else:
        args += ["--nccl-profile", "pcie-8gpu"]
    out = tmp_path / "end.json"
    done = subprocess.run(
        [sys.executable, "-W", "ignore", str(PROBE), str(out), "sglang.launch_server", *args],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )
    end = json.loads(out.read_text())
    assert done.returncode == code, done.stderr[-4000:]
    # Byte for byte what the process was started with, except what SGLang itself adds at import (its cache
    # folders: never a variable the plugin may write, never one that was there).
    theirs = {k: v for k, v in end["environ"].items() if k not in env}
    assert not any(k.startswith(PLUGIN_PREFIXES) for k in theirs), theirs
    assert {k: v for k, v in end["environ"].items() if k in env} == env
    assert end["refused"] and step in end["refused"] and end["active"] is False
    assert end["launch_opened"] is None and not Path(env["SGLANG_EAGLE_NCCL_AUDIT_DIR"]).exists()
    lines = done.stderr.splitlines()
    assert sum("not applied" in line for line in lines) == 1, done.stderr[-4000:]
    assert [ln for ln in lines if claims_applied(ln)] == [], done.stderr[-4000:]
    if code == 1:  # SGLang could not be imported: the refusal is the exception that ended the program
        assert "RefusedError" in done.stderr


@pytest.mark.newest_only  # SGLang's plugin loader exists from 0.5.11
def test_sglangs_own_plugin_loader_reaches_the_entry_point_door(plugin_env, tmp_path):
    """Not the CLI: a program that calls SGLang's load_plugins() itself (as SGLang's scheduler does)."""
    env = dict(plugin_env, SGLANG_EAGLE_NCCL="pcie-8gpu", **{ENV_TEST_FAULT: "entry_point.hooks"})
    code = "import sglang.srt.plugins as p; p.load_plugins(); print('SGLANG RAN')"
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env, timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "SGLANG RAN" not in done.stdout, done.stderr[-4000:]
    assert sum("not applied" in line for line in done.stderr.splitlines()) == 1
    assert os.environ.get(ENV_TEST_FAULT) is None  # the test's own process is untouched
