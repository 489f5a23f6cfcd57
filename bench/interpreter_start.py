#!/usr/bin/env python3
"""Interpreter start (`python -c pass`) with the plugin installed but not enabled, vs without it.

Two fresh venvs that differ only by the plugin's wheel; runs alternate between them. The goal
(ratio <= 1.01) is judged on instructions counted by callgrind (deterministic, with
``PYTHONHASHSEED=0``); wall time is reported too.

How close the floor is: the same count for the venv without the plugin plus one extra ``.pth``
file holding (a) a comment only, (b) ``import os``, (c) the plugin's own line, (d) the cheapest
gate line that still checks the variable. Python 3.11's ``site`` executes every ``.pth`` file of
a venv's site-packages twice (``venv()`` calls ``addsitepackages`` for ``sys.prefix``, then
``main()`` calls it again; ``known_paths`` stops duplicate ``sys.path`` entries, not ``import``
lines), so each line is compiled and run twice.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from _common import (
    REPO,
    build_wheel,
    clean_env,
    emit,
    git_state,
    instructions,
    interleaved,
    load,
    machine,
    median,
)

# The cheapest line found that still checks the variable and imports the gate when it is set.
CHEAPEST_GATE = 'import os;"SGLANG_EAGLE_NCCL"in os.environ and __import__("sglang_eagle_nccl._gate")._gate.pth_entry()'


def build(base: Path) -> dict[str, Path]:
    wheel = build_wheel(base / "dist")
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


def _site(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def floors(python: Path, env: dict[str, str], baseline: int) -> dict[str, dict[str, object]]:
    """Instructions added by one extra .pth file of each kind, in the venv without the plugin."""
    pth = _site(python) / "zz-bench-floor.pth"
    lines = {
        "comment_only": "# a comment\n",
        "import_os": "import os\n",
        "plugin_line": (REPO / "startup" / "sglang_eagle_nccl.pth").read_text(),
        "cheapest_gate_line": CHEAPEST_GATE + "\n",
    }
    out: dict[str, dict[str, object]] = {}
    try:
        for name, text in lines.items():
            pth.write_text(text)
            count = instructions([str(python), "-c", "pass"], env)
            if count is not None:
                out[name] = {"added_instructions": count - baseline, "ratio": round(count / baseline, 4)}
    finally:
        pth.unlink(missing_ok=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=60)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = load()
    with tempfile.TemporaryDirectory() as d:
        pythons = build(Path(d))
        env = clean_env()
        times = interleaved({k: ([str(p), "-c", "pass"], env) for k, p in pythons.items()}, args.repeat, warmup=5)
        # Instruction counts do not depend on what else the machine is doing.
        counts = {k: instructions([str(p), "-c", "pass"], env) for k, p in pythons.items()}
        floor = floors(pythons["without"], env, counts["without"]) if counts["without"] else {}
    ratio = round(counts["with"] / counts["without"], 4) if counts["without"] and counts["with"] else None
    result = {
        "benchmark": "interpreter start, plugin installed but not enabled",
        "median_without_ms": round(median(times["without"]) * 1000, 2),
        "median_with_ms": round(median(times["with"]) * 1000, 2),
        "ratio_wall": round(median(times["with"]) / median(times["without"]), 4),
        "instructions_without": counts["without"],
        "instructions_with": counts["with"],
        "instructions_added": counts["with"] - counts["without"] if ratio else None,
        "instructions_ratio": ratio,
        "floor": floor,
        "goal": "<= 1.01 (instructions)",
        "met": ratio is not None and ratio <= 1.01,
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
