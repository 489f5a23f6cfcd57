#!/usr/bin/env python3
"""`import sglang.srt.entrypoints.engine` with the plugin enabled vs disabled (real SGLang source,
fresh interpreter per sample, runs alternating), CPU time. Goal: ratio <= 1.03.

Enabled is a launch's root: the profile is resolved and validated at interpreter start, the
import trigger waits for ``import sglang``, and the hooks land while SGLang's modules load.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import clean_env, emit, git_state, interleaved, load, machine, median, plugin_python


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--python", help="Python with this checkout's plugin and SGLang (default: build one over the ci/ venv)")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as d:
        python = str(plugin_python(args.python, args.sglang, Path(d)))
        cmd = [python, "-W", "ignore", "-c", "import sglang.srt.entrypoints.engine"]
        off = clean_env(SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1")
        on = clean_env(SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1", SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_AUDIT_DIR=d)
        times = interleaved({"disabled": (cmd, off), "enabled": (cmd, on)}, args.repeat, warmup=1, cpu=True)
    ratio = round(median(times["enabled"]) / median(times["disabled"]), 4)
    result = {
        "benchmark": f"import sglang.srt.entrypoints.engine (SGLang {args.sglang}), CPU time",
        "median_disabled_s": round(median(times["disabled"]), 3),
        "median_enabled_s": round(median(times["enabled"]), 3),
        "ratio": ratio,
        "goal": "<= 1.03",
        "met": ratio <= 1.03,
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
