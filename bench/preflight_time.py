#!/usr/bin/env python3
"""`sglang-eagle-nccl preflight --tp 2` (gloo on CPU): wall time, and CPU time of the whole process
tree (two ranks importing SGLang share 2 cores). Goal: <= 8 s wall on 2 cores (users run it before every
model load). Where the seconds go: each rank imports torch and SGLang's distributed package (about 6 s
of a rank's 7 on a quiet 2-core machine, the two ranks side by side); SGLang's parallel init is ~0.2 s;
the launcher decides its backend without importing torch on a machine that cannot use CUDA."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import clean_env, emit, git_state, load, machine, median, plugin_python, run_measured


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--python", help="Python with this checkout's plugin and SGLang (default: build one over the ci/ venv)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = load()
    walls, cpus = [], []
    with tempfile.TemporaryDirectory(prefix="bench-preflight-") as d:
        python = str(plugin_python(args.python, args.sglang, Path(d)))
        env = clean_env(SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1", PYTHONWARNINGS="ignore")
        cmd = [python, "-m", "sglang_eagle_nccl", "preflight", "--tp", "2", "--profile", "pcie-8gpu", "--audit-dir", d]
        for _ in range(args.repeat):
            wall, cpu = run_measured(cmd, env)
            walls.append(wall)
            cpus.append(cpu)
    result = {
        "benchmark": f"preflight --tp 2 (SGLang {args.sglang}, gloo)",
        "median_s": round(median(walls), 2),
        "runs_s": [round(t, 2) for t in walls],
        "median_cpu_s": round(median(cpus), 2),
        "goal": "<= 8 s",
        "met": median(walls) <= 8,
        "repeat": args.repeat,
        "plugin": git_state(),
        "load_before": load_before,
        "load_after": load(),
        "machine": machine(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
