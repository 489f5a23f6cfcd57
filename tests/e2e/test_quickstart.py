"""The README's first command, then every command it prints, run exactly as printed (issue 27).

`./ci/quickstart` ends with the commands to paste next, each said to work as printed on this machine
(the CPU-only switch is in the command). This test runs quickstart in an environment without any of
the test tier's variables (no stand-in switch, no PYTHONWARNINGS, no plugin variable: what a new
user's shell has), parses the printed commands from its output and runs each one as printed, in a
fresh shell of that same environment. It also runs the main job without the switch, as the issue's
newcomer did, and checks that the failure names its cause instead of a guess.

Cost (0.5.23 tier, the engines' stream): quickstart reuses the tier's venv and, under ci/test, its
wheel (SGLANG_EAGLE_NCCL_TEST_WHEEL; by hand it builds one and reinstalls it into the venv); then
three preflights of two ranks (quickstart's, the printed one, the one without the switch), about
10 s each on a quiet 2-core machine, and five CLI commands of under a second each: ~40 s quiet.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ci"))
try:
    from cache_root import cache_root
finally:
    sys.path.pop(0)

# Read at collection, before tests/conftest.py points XDG_CACHE_HOME at a temporary folder: the venv
# this tier runs in is in the user's cache.
CACHE = cache_root()
SWITCH = "SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS=1"

pytestmark = pytest.mark.newest_only  # quickstart sets up SGLang 0.5.23 (ci/test runs this on 0.5.23 only)


def newcomer_env() -> dict[str, str]:
    """A new user's shell: none of the tier's variables; the cache and wheel the tier already has."""
    drop = ("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL", "PYTHONWARNINGS", "OMP_NUM_THREADS", "SGLANG_CPU_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["SGLANG_EAGLE_NCCL_CACHE"] = str(CACHE)
    if os.environ.get("SGLANG_EAGLE_NCCL_TEST_WHEEL"):
        env["SGLANG_EAGLE_NCCL_TEST_WHEEL"] = os.environ["SGLANG_EAGLE_NCCL_TEST_WHEEL"]
    return env


def printed_commands(output: str) -> tuple[list[str], list[str]]:
    """(the commands said to work here, the commands for a GPU machine), as printed."""
    here = output.split("=== Next: each command below works as printed on this machine ===", 1)[1]
    here, gpu = here.split("=== On a machine with NVIDIA GPUs (not here): the one command ===", 1)

    def commands(block: str) -> list[str]:
        return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]

    return commands(here), commands(gpu.split("[quickstart]", 1)[0])


@pytest.fixture(scope="module")
def quickstart() -> str:
    env = newcomer_env()
    venv = subprocess.run([sys.executable, str(REPO / "ci" / "sglang_venv.py"), "path", "0.5.23"], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()
    if Path(venv).resolve() != Path(sys.prefix).resolve():
        pytest.fail(f"this tier runs in {sys.prefix}, but quickstart would use {venv}: run the tier in the "
                    "venv of `python3 ci/sglang_venv.py build 0.5.23` (set SGLANG_EAGLE_NCCL_CACHE alike)")
    # The README's block, as written, from the repository root.
    from support.readme import code_block

    language, script = code_block("tests/e2e/test_quickstart.py::quickstart")
    assert language == "bash" and script.startswith("./ci/quickstart"), script
    proc = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out


def _run(line: str) -> subprocess.CompletedProcess[str]:
    # Exactly as printed, in a new shell of a newcomer's environment, from another directory.
    return subprocess.run(["bash", "-c", line], env=newcomer_env(), cwd="/", capture_output=True, text=True,
                          timeout=600)


def test_quickstart_shows_progress_and_folds_sglangs_notices(quickstart):
    assert "[sglang-venv 0.5.23]" in quickstart
    assert re.search(r"\[preflight +\d+\.\ds\] .*import SGLang", quickstart)
    assert "Setup Custom allreduce failed" not in quickstart  # folded, explained once
    assert "of SGLang's usual CPU-only notices from 2 rank(s) not shown" in quickstart
    assert "Preflight ✓" in quickstart


def test_every_printed_command_works_as_printed(quickstart):
    here, _ = printed_commands(quickstart)
    expect = {  # what each printed command must show, by its subcommand
        "preflight": "Preflight ✓", "audit": "Verdict: ✓", "profiles list": "pcie-8gpu-eagle",
        "explain": "NCCL_P2P_LEVEL", "estimate": "speedup:",
    }
    seen = set()
    for line in here:
        kind = next(k for k in expect if f"sglang-eagle-nccl {k}" in line)
        seen.add(kind)
        proc = _run(line)
        assert proc.returncode == 0, (line, (proc.stdout + proc.stderr)[-4000:])
        assert expect[kind] in proc.stdout + proc.stderr, (line, proc.stdout[-3000:])
        if kind == "preflight":
            assert line.startswith(SWITCH + " "), line  # the CPU-only switch is in the command
            assert "What the verdict covers" in proc.stdout and "on a machine with NVIDIA GPUs" in proc.stdout
    assert seen == set(expect), here


def test_the_gpu_command_names_a_real_script_and_option(quickstart):
    _, gpu = printed_commands(quickstart)
    assert gpu == ["./ci/gpu-check --python PYTHON"]
    helped = subprocess.run([str(REPO / "ci" / "gpu-check"), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--python" in helped.stdout


def test_without_the_switch_the_failure_names_its_cause(quickstart):
    """The issue's newcomer ran the printed CLI without the switch quickstart had set silently."""
    here, _ = printed_commands(quickstart)
    (preflight,) = [line for line in here if "sglang-eagle-nccl preflight" in line]
    proc = _run(preflight.removeprefix(SWITCH + " "))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    assert "rank 0: SGLang could not be imported: RuntimeError: operator torchvision::nms does not exist" in out
    assert f"put {SWITCH} before the command" in out
    assert "SGLang was never imported: RuntimeError: operator torchvision::nms does not exist" in out
    assert "hooks not installed" not in out
