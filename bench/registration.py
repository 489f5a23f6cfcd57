#!/usr/bin/env python3
"""Hook registration per SGLang process, and the plugin's cost in a launcher started with flags.

Goal: registration <= 25 ms per SGLang process with the default mechanism and with
``mechanism = "wrapt"``, measured after ``sglang.srt.managers.scheduler`` is imported
(bench/child_registration.py); ``hook_registry`` is reported too. Each sample is a fresh
process; the figure is the median CPU time of the registration window (selection of the patch
set, every hook installed, ``HookRegistry.apply_hooks()``). ``--instructions`` also counts the
instructions of each window once under callgrind (minutes per run: SGLang's import runs under
valgrind too).

Launcher (bench/child_launcher.py): ``python -m sglang.launch_server ... --nccl-profile P`` with
no gate. The plugin's cost is the CPU time of SGLang's ``load_plugins()`` and
``prepare_server_args()`` with the flags, minus the same calls without them and with the plugin
left out of ``SGLANG_PLUGINS`` (medians of interleaved runs), broken down by the plugin's own
calls (entry point, profile resolution + activation from the flags, patch set installation).
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
    load,
    machine,
    median,
    plugin_python,
    profile_env,
    run_windows,
)

MECHANISMS = ("auto", "wrapt", "hook_registry")
PROFILE = "pcie-8gpu"


def _child_env(python: Path, mechanism: str, audit_dir: Path) -> dict[str, str]:
    inputs = {"SGLANG_EAGLE_NCCL_AUDIT_DIR": str(audit_dir)}
    if mechanism != "auto":  # the default: no variable at all
        inputs["SGLANG_EAGLE_NCCL_MECHANISM"] = mechanism
    env = clean_env(**inputs)
    env.update(profile_env(python, PROFILE, **inputs))
    env["BENCH_GATE"] = env.pop("SGLANG_EAGLE_NCCL")  # set by the child once SGLang is imported
    env["SGLANG_EAGLE_NCCL_ROOT_PID"] = "1"  # a child of the launch, as SGLang's processes are
    env["SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    return env


def registration(python: Path, repeat: int, count: bool, workdir: Path) -> dict[str, object]:
    envs = {m: _child_env(python, m, workdir / f"audit-{m}") for m in MECHANISMS}
    cmd = [str(python), str(HERE / "child_registration.py")]
    samples: dict[str, list[dict[str, object]]] = {m: [] for m in MECHANISMS}
    for _ in range(repeat):
        for m in MECHANISMS:  # interleaved: drift on the machine hits every mechanism alike
            samples[m].append(run_windows(cmd, envs[m], cwd=str(HERE)))
    out: dict[str, object] = {}
    for m in MECHANISMS:
        runs = samples[m]
        row: dict[str, object] = {
            f"median_{w}_ms": round(median([float(r[f"{w}_ms"]) for r in runs]), 2) for w in ("registration", "native", "activation")
        }
        row["runs_registration_ms"] = [round(float(r["registration_ms"]), 2) for r in runs]
        row["modules_loaded"] = runs[0]["modules"]
        row["patch_set"] = runs[0]["patch_set"]
        row["read_from_index"] = runs[0]["index"]
        row["installed"] = runs[0]["installed"]
        row["waiting_for_import"] = runs[0]["pending"]
        if count:
            counted = run_windows(cmd, envs[m], cwd=str(HERE), count_instructions=True)
            for w in ("registration", "native", "activation"):
                row[f"{w}_instructions"] = counted.get(f"{w}_instructions")
        out[m] = row
    return out


def launcher(python: Path, repeat: int, count: bool, workdir: Path) -> dict[str, object]:
    base = clean_env(SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS="1", PYTHONWARNINGS="ignore",
                     BENCH_MODEL_PATH=str(workdir / "no-model"), BENCH_PROFILE=PROFILE)
    variants = {
        "flags": dict(base, BENCH_FLAGS="1", SGLANG_EAGLE_NCCL_AUDIT_DIR=str(workdir / "audit-launcher")),
        # SGLang alone: no flags, and its loader skips the plugin (SGLANG_PLUGINS is an allow-list).
        "sglang_only": dict(base, BENCH_FLAGS="0", SGLANG_PLUGINS="no-such-plugin"),
    }
    cmd = [str(python), str(HERE / "child_launcher.py")]
    samples: dict[str, list[dict[str, object]]] = {k: [] for k in variants}
    for _ in range(repeat):
        for name, env in variants.items():
            samples[name].append(run_windows(cmd, env, cwd=str(HERE)))
    flags, alone = samples["flags"], samples["sglang_only"]
    out: dict[str, object] = {}
    for w in ("load_plugins", "parse"):
        with_plugin = median([float(r[f"{w}_ms"]) for r in flags])
        without = median([float(r[f"{w}_ms"]) for r in alone])
        out[f"median_{w}_ms"] = {"with_flags": round(with_plugin, 2), "sglang_only": round(without, 2), "plugin": round(with_plugin - without, 2)}
    for part in ("entry_point_ms", "flags_activation_ms", "install_patches_ms"):
        out[f"median_{part}"] = round(median([float(r.get(part, 0.0)) for r in flags]), 2)
    out["median_plugin_total_ms"] = round(sum(v["plugin"] for k, v in out.items() if k.startswith("median_") and isinstance(v, dict)), 2)
    out["activated"] = all(r.get("active") for r in flags) and {r.get("origin") for r in flags} == {"cli"}
    out["installed"] = flags[0].get("installed")
    if count:
        counted = {k: run_windows(cmd, env, cwd=str(HERE), count_instructions=True) for k, env in variants.items()}
        out["instructions"] = {
            w: {"with_flags": counted["flags"].get(f"{w}_instructions"), "sglang_only": counted["sglang_only"].get(f"{w}_instructions")}
            for w in ("load_plugins", "parse")
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", help="Python with this checkout's plugin and SGLang (default: build one over the ci/ venv)")
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--instructions", action="store_true", help="also count instructions once per variant (callgrind; slow)")
    ap.add_argument("--skip-launcher", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    count = args.instructions and have_valgrind()
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="bench-registration-") as d:
        work = Path(d)
        python = plugin_python(args.python, args.sglang, work)
        result: dict[str, object] = {
            "benchmark": f"hook registration per SGLang process (SGLang {args.sglang}, after sglang.srt.managers.scheduler is imported), CPU time",
            "goal": "<= 25 ms (default and wrapt)",
            "mechanisms": registration(python, args.repeat, count, work),
        }
        if not args.skip_launcher:
            result["launcher_with_flags"] = launcher(python, args.repeat, count, work)
    mech = result["mechanisms"]
    assert isinstance(mech, dict)
    result["met"] = all(mech[m]["median_registration_ms"] <= 25 for m in ("auto", "wrapt"))
    result.update(repeat=args.repeat, plugin=git_state(), load_before=load_before, load_after=load(), machine=machine())
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
