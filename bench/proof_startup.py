#!/usr/bin/env python3
"""The behaviour proof at start-up on an untested SGLang (issue 26 item 5): what it costs, cold and cached.

On a release newer than the manifests the launcher proves every hook's stated behaviour on the
installed source (sglang_eagle_nccl/knowledge/sglang/installed_proof.py), once per installed wheel:
the result is cached under the user's cache directory, keyed by the wheel's RECORD hash. This
measures, in a fresh interpreter each time (as a launcher is): the cold proof (empty cache), the
cached read (what every later launch, and every SGLang child, pays), and a spawned child's miss
(which must not parse SGLang: it skips). The installed SGLang is the CI venv's (ci/sglang_venv.py),
read as files, never imported. Goal: cached read <= 50 ms; the cold proof is paid once per install,
by the launcher, never on a scheduler's critical path."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import emit, git_state, load, machine, median

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
from pathlib import Path
from sglang_eagle_nccl.knowledge.sglang import installed_proof, patchsets
root = Path(sys.argv[1]); version = sys.argv[2]; compute = {"auto": None, "no": False}[sys.argv[3]]
sel = patchsets.select(version)
t0 = time.perf_counter()  # the proof alone: the interpreter and the plugin's imports are paid anyway
proofs = installed_proof.prove_installed(sel.patch_set, version, root, cli=True, compute=compute)
elapsed = time.perf_counter() - t0
print(json.dumps({"s": elapsed, "proven": None if proofs is None else sum(len(v) for v in proofs.values()),
                  "unproven": None if proofs is None else len(installed_proof.unproven(proofs))}))
"""


def site_packages(version: str) -> Path:
    venv = subprocess.run([sys.executable, str(REPO / "ci" / "sglang_venv.py"), "path", version], capture_output=True,
                          text=True, check=True).stdout.strip()
    found = sorted(Path(venv).glob("lib/python3*/site-packages"))
    if not found or not (found[0] / "sglang").is_dir():
        raise SystemExit(f"no SGLang {version} venv at {venv}: python ci/sglang_venv.py build {version}")
    return found[0]


def run(root: Path, version: str, compute: str, cache: str) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": cache, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(root), version, compute], capture_output=True, text=True,
                         env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    root = site_packages(args.sglang)
    load_before = load()
    cold, warm, child = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-proof-") as cache:
            child.append(run(root, args.sglang, "no", cache))  # a child on a miss: skips, parses nothing
            cold.append(run(root, args.sglang, "auto", cache))
            warm.append(run(root, args.sglang, "auto", cache))
    result = {
        "benchmark": f"behaviour proof at start-up (SGLang {args.sglang}'s installed source, all hooks)",
        "cold_median_s": round(median([r["s"] for r in cold]), 3),
        "cached_median_s": round(median([r["s"] for r in warm]), 3),
        "child_miss_median_s": round(median([r["s"] for r in child]), 3),
        "cold_runs_s": [round(r["s"], 3) for r in cold],
        "statements_proven": cold[0]["proven"],
        "hooks_unproven": cold[0]["unproven"],
        "goal": "cached <= 0.05 s; cold once per installed wheel, in the launcher only",
        "load_before": load_before,
        "load_after": load(),
        "machine": machine(),
        "commit": git_state(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
