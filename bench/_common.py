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


def time_command(cmd: Sequence[str], env: dict[str, str], cwd: str | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def interleaved(variants: dict[str, tuple[Sequence[str], dict[str, str]]], repeat: int, warmup: int = 2) -> dict[str, list[float]]:
    """Run the variants alternately (A B A B ...) so drift on the machine hits both equally."""
    for _ in range(warmup):
        for cmd, env in variants.values():
            time_command(cmd, env)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeat):
        for name, (cmd, env) in variants.items():
            times[name].append(time_command(cmd, env))
    return times


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
