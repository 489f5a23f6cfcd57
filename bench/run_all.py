#!/usr/bin/env python3
"""Run every benchmark against this checkout's plugin; write bench/results/<date>.json and .txt.

    python3 bench/run_all.py [--python PY] [--quick] [--no-instructions] [--out PREFIX]

Needs the CPU SGLang venv of ci/sglang_venv.py (./ci/quickstart builds it) unless ``--python``
names an interpreter with SGLang and this checkout's plugin; valgrind for instruction counts.
Each script runs its variants side by side (ratios within one run, medians); the load average
before and after each is recorded, since the machine is shared. The README's Benchmarks table
quotes the .txt written here.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import HERE, git_state, have_valgrind, load, machine, plugin_python

# name -> (script, runs in the SGLang venv, counts instructions, repeats (full, quick))
BENCHMARKS = {
    "interpreter_start": ("interpreter_start.py", False, False, (60, 20)),
    "activation": ("activation_cost.py", True, True, (21, 7)),
    "registration": ("registration.py", True, True, (5, 2)),
    "import_engine": ("import_engine.py", True, False, (9, 3)),
    "preflight": ("preflight_time.py", True, False, (3, 1)),
    "audit_scale": ("audit_scale.py", False, False, (3, 1)),
    "consistency_scale": ("consistency_scale.py", True, False, (5, 3)),
    "ray_collect": ("ray_collect_time.py", True, False, (5, 2)),
}


def _run(script: str, args: list[str]) -> dict[str, object]:
    print(f"[bench] {script} {' '.join(args)} (load {load()})", file=sys.stderr, flush=True)
    out = subprocess.run([sys.executable, str(HERE / script), "--json", *args], capture_output=True, text=True, cwd=HERE)
    if out.returncode != 0:
        raise BenchmarkFailed(f"{script} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class BenchmarkFailed(RuntimeError):
    """One benchmark's script failed; the others' figures are still written (a long run is not lost)."""


def _met(flag: object) -> str:
    return "met" if flag else "NOT MET"


def table(r: dict[str, dict]) -> list[str]:
    """One line per figure the README quotes (for the benchmarks that ran)."""
    lines: list[str] = []
    if "registration" in r:
        lines += _registration_lines(r["registration"])
    if "activation" in r:
        lines += _activation_lines(r["activation"])
    if "interpreter_start" in r:
        lines += _start_lines(r["interpreter_start"])
    if "import_engine" in r:
        eng = r["import_engine"]
        lines.append(f"import sglang.srt.entrypoints.engine, enabled vs disabled | CPU {eng['median_enabled_s']} vs {eng['median_disabled_s']} s, "
                     f"ratio {eng['ratio']} (median of {eng['repeat']}) | <= 1.03: {_met(eng['met'])}")
    if "preflight" in r:
        pre = r["preflight"]
        lines.append(f"preflight --tp 2 (gloo) | {pre['median_s']} s wall median of {pre['repeat']} (runs {pre['runs_s']}), "
                     f"CPU {pre['median_cpu_s']} s | {pre['goal']}: {_met(pre['met'])}")
    if "audit_scale" in r:
        aud = r["audit_scale"]
        rows = ", ".join(f"{x['processes']}: {x['text_cpu_s']} s, {x['text_peak_rss_mib']} MiB (--json {x['json_cpu_s']} s)"
                         for x in aud["rows"])
        met = all(v for v in aud["met"].values() if v is not None)
        lines.append(f"audit of N synthetic processes, one core | {rows}; growth exponent "
                     f"{aud['growth_exponent_text_cpu']} | {aud['goal']}: {_met(met)}")
    if "consistency_scale" in r:
        con = r["consistency_scale"]
        rows = ", ".join(f"{x['ranks']} ranks: check {x['check_ms']} ms vs group creation {x['group_creation_ms']} ms "
                         f"(share {x['check_share']})" for x in con["rows"])
        lines.append(f"consistency check per group creation, gloo | {rows}; growth vs linear {con['growth_vs_linear']} | "
                     f"no worse than linear: {_met(con['met'])}")
    return lines


def _registration_lines(reg: dict) -> list[str]:
    lines = []
    for m, label in (("auto", "default (auto)"), ("wrapt", "wrapt"), ("hook_registry", "hook_registry")):
        row = reg["mechanisms"][m]
        extra = f", {row['registration_instructions'] / 1e6:.1f} M instructions" if row.get("registration_instructions") else ""
        goal = f" | <= 25 ms: {_met(row['median_registration_ms'] <= 25)}" if m != "hook_registry" else " | (no goal)"
        lines.append(f"hook registration, {label} | {row['median_registration_ms']} ms CPU median of {reg['repeat']} "
                     f"(runs {min(row['runs_registration_ms'])}-{max(row['runs_registration_ms'])}){extra}{goal}")
    native = reg["mechanisms"]["auto"]
    lines.append(f"native NCCL plugins library configured (same entry point, not registration) | {native['median_native_ms']} ms CPU | -")
    launcher = reg.get("launcher_with_flags")
    if launcher:
        lines.append(
            f"launcher with --nccl-profile, no gate: plugin's CPU time | {launcher['median_plugin_total_ms']} ms "
            f"(load_plugins +{launcher['median_load_plugins_ms']['plugin']} ms, argument parsing +{launcher['median_parse_ms']['plugin']} ms; "
            f"of which entry point {launcher['median_entry_point_ms']} ms, profile resolved+validated+applied "
            f"{launcher['median_flags_activation_ms']} ms, patch set {launcher['median_install_patches_ms']} ms) | -")
    return lines


def _activation_lines(act: dict) -> list[str]:
    extra = f", {act['activation_instructions'] / 1e6:.1f} M instructions" if act.get("activation_instructions") else ""
    return [f"activation in an SGLang child (signed serialised profile) | {act['median_activation_ms']} ms CPU median of {act['repeat']}{extra} | <= 5 ms: {_met(act['met'])}"]


def _start_lines(start: dict) -> list[str]:
    floor = start.get("floor", {})
    floor_text = ", ".join(f"{k} {v['ratio']}" for k, v in floor.items())
    return [f"interpreter start, installed not enabled | instructions ratio {start['instructions_ratio']} "
            f"(+{start['instructions_added']} of {start['instructions_without']}); wall {start['median_with_ms']} vs "
            f"{start['median_without_ms']} ms; floor: {floor_text} | <= 1.01: {_met(start['met'])}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", help="Python with SGLang and this checkout's plugin (default: build one over the ci/ venv)")
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run, not for the README)")
    ap.add_argument("--no-instructions", action="store_true", help="skip the callgrind counts inside SGLang processes")
    ap.add_argument("--only", help="comma-separated subset of: " + ", ".join(BENCHMARKS))
    ap.add_argument("--out", help="output prefix (default bench/results/<date>)")
    ap.add_argument("--label", help="what --python holds, when it is not this checkout's plugin (recorded as 'plugin')")
    args = ap.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc)
    count = [] if args.no_instructions or not have_valgrind() else ["--instructions"]
    quick = args.quick
    only = set(args.only.split(",")) if args.only else set(BENCHMARKS)
    if only - set(BENCHMARKS):
        raise SystemExit(f"unknown benchmark(s): {sorted(only - set(BENCHMARKS))}")
    results: dict[str, dict] = {}
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-all-") as d:
        python = str(plugin_python(args.python, args.sglang, Path(d)))
        common = ["--python", python, "--sglang", args.sglang]
        for name, (script, needs_sglang, takes_count, repeat) in BENCHMARKS.items():
            if name in only:
                extra = [*common] if needs_sglang else []
                extra += count if takes_count else []
                try:
                    results[name] = _run(script, [*extra, "--repeat", str(repeat[quick])])
                except BenchmarkFailed as exc:
                    print(str(exc), file=sys.stderr, flush=True)
                    failed[name] = str(exc)[-2000:]
    lines = table(results)
    doc = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "plugin": args.label or git_state(),
        "sglang": args.sglang,
        "quick": quick,
        "machine": machine(),
        "load_at_end": load(),
        "summary": lines,
        "results": results,
        "failed": failed,
    }
    prefix = Path(args.out) if args.out else HERE / "results" / started.strftime("%Y-%m-%d")
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    header = [f"# bench/run_all.py, {doc['date']}, plugin {doc['plugin']}, SGLang {args.sglang}",
              f"# {doc['machine']['cores']} x {doc['machine']['cpu']}, Python {doc['machine']['python']}, {doc['machine']['system']}",
              "# load average (1/5/15 min) before each benchmark: " + ", ".join(f"{k} {v['load_before']}" for k, v in results.items()),
              "figure | measured | goal"]
    lines += [f"{name} | FAILED: {why.strip().splitlines()[-1] if why.strip() else 'see the json'} | -" for name, why in failed.items()]
    Path(f"{prefix}.txt").write_text("\n".join(header + lines) + "\n")
    print("\n".join(header + lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
