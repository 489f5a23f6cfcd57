#!/usr/bin/env python3
"""Interpreter start (`python -c pass`) with the plugin installed but not enabled, vs without it.

Two fresh venvs that differ only by the plugin's wheel; runs alternate between them.
Goal: ratio <= 1.01.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from _common import REPO, clean_env, instructions, interleaved, machine, median


def build(base: Path) -> dict[str, Path]:
    dist = base / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(dist)], check=True)
    wheel = next(dist.glob("sglang_eagle_nccl-*.whl"))
    pythons = {}
    for name in ("without", "with"):
        d = base / name
        venv.EnvBuilder(with_pip=True).create(d)
        py = d / "bin" / "python"
        # Same third-party packages in both; only the plugin differs.
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "click", "packaging", "wrapt"], check=True)
        if name == "with":
            subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", str(wheel)], check=True)
        pythons[name] = py
    return pythons


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=60)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        pythons = build(Path(d))
        env = clean_env()
        times = interleaved({k: ([str(p), "-c", "pass"], env) for k, p in pythons.items()}, args.repeat, warmup=5)
        # Instruction counts do not depend on what else the machine is doing.
        counts = {k: instructions([str(p), "-c", "pass"], env) for k, p in pythons.items()}
    result = {
        "benchmark": "interpreter start, plugin installed but not enabled",
        "median_without_ms": round(median(times["without"]) * 1000, 2),
        "median_with_ms": round(median(times["with"]) * 1000, 2),
        "ratio": round(median(times["with"]) / median(times["without"]), 4),
        "instructions_without": counts["without"],
        "instructions_with": counts["with"],
        "instructions_ratio": round(counts["with"] / counts["without"], 4) if counts["without"] and counts["with"] else None,
        "goal": "<= 1.01",
        "repeat": args.repeat,
        "machine": machine(),
    }
    print(json.dumps(result, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
