"""Shared helpers for the benchmark scripts: timing child processes, medians, machine facts."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def venv_python(version: str = "0.5.23") -> Path:
    """Python of the CPU SGLang venv built by ci/sglang_venv.py (ci/quickstart builds it)."""
    out = subprocess.run([sys.executable, str(REPO / "ci" / "sglang_venv.py"), "path", version], capture_output=True, text=True, check=True)
    python = Path(out.stdout.strip()) / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no venv for SGLang {version}: run ./ci/quickstart (or python3 ci/sglang_venv.py build {version}) first")
    return python


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))}
    env.update(extra)
    return env


def run_measured(cmd: Sequence[str], env: dict[str, str], cwd: str | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child and its descendants) of one run."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def time_command(cmd: Sequence[str], env: dict[str, str], cwd: str | None = None) -> float:
    return run_measured(cmd, env, cwd)[0]


def interleaved(
    variants: dict[str, tuple[Sequence[str], dict[str, str]]], repeat: int, warmup: int = 2, *, cpu: bool = False
) -> dict[str, list[float]]:
    """Run the variants alternately (A B A B ...) so drift on the machine hits both equally.

    ``cpu=True`` records the children's CPU time instead of wall time: less sensitive to other
    load on a small machine.
    """
    for _ in range(warmup):
        for cmd, env in variants.values():
            run_measured(cmd, env)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeat):
        for name, (cmd, env) in variants.items():
            wall, used = run_measured(cmd, env)
            times[name].append(used if cpu else wall)
    return times


def instructions(cmd: Sequence[str], env: dict[str, str]) -> int | None:
    """Instructions executed by ``cmd`` under valgrind's callgrind (deterministic), or None."""
    import re
    import shutil

    if shutil.which("valgrind") is None:
        return None
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        env=env, capture_output=True, text=True, check=True,
    )
    m = re.search(r"Collected : (\d+)", out.stderr)
    return int(m.group(1)) if m else None


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def machine() -> dict[str, object]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }
