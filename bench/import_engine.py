#!/usr/bin/env python3
"""`import sglang.srt.entrypoints.engine` with the plugin enabled vs disabled (real SGLang source,
fresh interpreter per sample, runs alternating). Goal: ratio <= 1.03."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from _common import clean_env, interleaved, machine, median, venv_python


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    python = str(venv_python(args.sglang))
    cmd = [python, "-W", "ignore", "-c", "import sglang.srt.entrypoints.engine"]
    with tempfile.TemporaryDirectory() as d:
        off = clean_env(SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1")
        on = clean_env(SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1", SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_AUDIT_DIR=d)
        times = interleaved({"disabled": (cmd, off), "enabled": (cmd, on)}, args.repeat, warmup=1, cpu=True)
    result = {
        "benchmark": f"import sglang.srt.entrypoints.engine (SGLang {args.sglang}), CPU time",
        "median_disabled_s": round(median(times["disabled"]), 3),
        "median_enabled_s": round(median(times["enabled"]), 3),
        "ratio": round(median(times["enabled"]) / median(times["disabled"]), 4),
        "goal": "<= 1.03",
        "repeat": args.repeat,
        "machine": machine(),
    }
    print(json.dumps(result, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
