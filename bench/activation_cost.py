#!/usr/bin/env python3
"""Activation cost, SGLang's own import excluded. Goal: <= 5 ms.

Part 1, interpreter start in an SGLang child: `python -c pass` with the serialised profile in
the environment (what every process SGLang spawns sees) vs the plugin disabled, runs
alternating; the difference is the plugin's activation (JSON profile, environment, audit
record, import trigger).

Part 2, hook registration once SGLang is imported: `install_patches()` timed in-process after
the hooked SGLang modules are imported (their import is SGLang's cost, not ours), for the
default mechanism (SGLang's HookRegistry on >= 0.5.11, including its apply_hooks) and for
mechanism=wrapt.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from _common import REPO, clean_env, interleaved, machine, median, venv_python

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import sglang
    import sglang.srt.distributed.parallel_state
    import sglang.srt.distributed.device_communicators.pynccl
    import sglang.srt.managers.scheduler
    import sglang.srt.entrypoints.engine
    import sglang.srt.server_args
    try:
        import sglang.srt.plugins.hook_registry
    except ImportError:
        pass
    import wrapt, packaging.version, importlib.metadata
    t0 = time.perf_counter()
    from sglang_eagle_nccl.runtime import bootstrap
    bootstrap.activate(origin="bench")  # SGLang is imported: selection and wrapt hooks happen here
    bootstrap.install_patches(from_entry_point=True)
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry
        HookRegistry.apply_hooks()
    except ImportError:
        pass
    from sglang_eagle_nccl.runtime.patching import STATE as P
    assert P.installed, "no hook installed"
    print(json.dumps({"hooks_ms": (time.perf_counter() - t0) * 1000, "installed": len(P.installed)}))
    """
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--hook-repeat", type=int, default=5)
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    python = venv_python(args.sglang)
    sys.path.insert(0, str(REPO))
    from sglang_eagle_nccl.profile.resolve import resolve

    result: dict[str, object] = {"benchmark": f"activation cost (SGLang {args.sglang}, its import excluded)", "goal": "<= 5 ms"}
    with tempfile.TemporaryDirectory() as d:
        run_dir = Path(d) / "run"
        run_dir.mkdir(mode=0o700)
        for mechanism in ("auto", "wrapt"):
            profile = resolve(["pcie-8gpu"], use_environ=False, policy_flags={"mechanism": mechanism}).profile
            child_env = clean_env(
                SGLANG_EAGLE_NCCL="1", SGLANG_EAGLE_NCCL_PROFILE=profile.to_json(),
                SGLANG_EAGLE_NCCL_RUN_DIR=str(run_dir), SGLANG_EAGLE_NCCL_ROOT_PID="1",
                SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1",
            )
            if mechanism == "auto":
                off = clean_env(SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1")
                cmd = [str(python), "-c", "pass"]
                times = interleaved({"off": (cmd, off), "on": (cmd, child_env)}, args.repeat, warmup=3)
                result["start_off_ms"] = round(median(times["off"]) * 1000, 2)
                result["start_on_ms"] = round(median(times["on"]) * 1000, 2)
                result["median_activation_ms"] = round((median(times["on"]) - median(times["off"])) * 1000, 2)
            samples = []
            # Gate off at start-up: the child activates itself after importing SGLang.
            hook_env = {k: v for k, v in child_env.items() if k != "SGLANG_EAGLE_NCCL"}
            for _ in range(args.hook_repeat):
                out = subprocess.run([str(python), "-W", "ignore", "-c", CHILD], env=hook_env, capture_output=True, text=True, check=True, cwd=d)
                samples.append(json.loads(out.stdout.strip().splitlines()[-1])["hooks_ms"])
            result[f"median_hooks_{mechanism}_ms"] = round(median(samples), 2)
    result["repeat"] = args.repeat
    result["machine"] = machine()
    print(json.dumps(result, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
