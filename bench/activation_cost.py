#!/usr/bin/env python3
"""Activation in a process SGLang spawned, at interpreter start. Goal: <= 5 ms.

What every SGLang child pays before SGLang's own code runs: the ``.pth`` gate finds
``SGLANG_EAGLE_NCCL`` set and applies the signed serialised profile the launcher handed down
(``contract/handoff.py``: digest check instead of validating every value again), writes the NCCL
variables, opens this process's audit record and arms the import trigger for ``import sglang``.

Measured in bench/child_activation.py as one window (CPU time, median of fresh processes;
instructions once under callgrind with ``--instructions``), and as the difference in
instructions of the whole interpreter start (``python -c pass``) with that environment and
without the gate.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import (
    HERE,
    clean_env,
    emit,
    git_state,
    have_valgrind,
    instructions,
    load,
    machine,
    median,
    plugin_python,
    profile_env,
    run_windows,
)

PROFILE = "pcie-8gpu"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", help="Python with this checkout's plugin and SGLang (default: build one over the ci/ venv)")
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--instructions", action="store_true", help="also count instructions (callgrind)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="bench-activation-") as d:
        work = Path(d)
        python = plugin_python(args.python, args.sglang, work)
        inputs = {"SGLANG_EAGLE_NCCL_AUDIT_DIR": str(work / "audit")}
        child = clean_env(**inputs)
        child.update(profile_env(python, PROFILE, **inputs))
        child["SGLANG_EAGLE_NCCL_ROOT_PID"] = "1"  # a process of the launch, not its root
        windowed = dict(child)
        windowed["BENCH_GATE"] = windowed.pop("SGLANG_EAGLE_NCCL")
        cmd = [str(python), str(HERE / "child_activation.py")]
        runs = [run_windows(cmd, windowed, cwd=str(HERE)) for _ in range(args.repeat)]
        first = runs[0]
        if not (first["active"] and first["trusted"] and not first["is_root"]):
            raise SystemExit(f"the child did not take the signed, trusted path: {first}")
        result: dict[str, object] = {
            "benchmark": f"activation at interpreter start in an SGLang child (SGLang {args.sglang} venv, signed serialised profile), CPU time",
            "goal": "<= 5 ms",
            "median_activation_ms": round(median([float(r["activation_ms"]) for r in runs]), 2),
            "runs_activation_ms": sorted(round(float(r["activation_ms"]), 2) for r in runs),
        }
        result["met"] = result["median_activation_ms"] <= 5
        if args.instructions and have_valgrind():
            result["activation_instructions"] = run_windows(cmd, windowed, cwd=str(HERE), count_instructions=True)["activation_instructions"]
            off = clean_env()
            on = instructions([str(python), "-c", "pass"], child)
            base = instructions([str(python), "-c", "pass"], off)
            if on and base:
                result["interpreter_start_instructions"] = {"gate_off": base, "child_of_launch": on, "difference": on - base}
    result.update(repeat=args.repeat, plugin=git_state(), load_before=load_before, load_after=load(), machine=machine())
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
