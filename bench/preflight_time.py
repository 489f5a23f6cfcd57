#!/usr/bin/env python3
"""Wall time of `sglang-eagle-nccl preflight --tp 2` (gloo on CPU). Goal: <= 15 s on 2 cores."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from _common import clean_env, machine, median, time_command, venv_python


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    python = venv_python(args.sglang)
    exe = str(python.parent / "sglang-eagle-nccl")
    times = []
    with tempfile.TemporaryDirectory() as d:
        env = clean_env(SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1", PYTHONWARNINGS="ignore")
        for _ in range(args.repeat):
            times.append(time_command([exe, "preflight", "--tp", "2", "--profile", "pcie-8gpu", "--audit-dir", d], env))
    result = {
        "benchmark": f"preflight --tp 2 wall time (SGLang {args.sglang}, gloo)",
        "median_s": round(median(times), 2),
        "runs_s": [round(t, 2) for t in times],
        "goal": "<= 15 s",
        "machine": machine(),
    }
    print(json.dumps(result, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
