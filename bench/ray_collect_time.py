#!/usr/bin/env python3
"""How long gathering a launch's records through Ray takes, per node (`audit --ray`, `launch` at exit).

A real two-node Ray cluster on this machine (Ray's own ``Cluster``, from tests/support/ray_cluster.py, in an
environment without plugin or NCCL variables) and a launch directory shaped like a real one (8 scheduler-like
processes with records and NCCL reads logs, bench/audit_scale.py's shape). ``offline/ray_collect.collect`` runs
one pinned task per node; reported: each node's own reading time, the whole gathering (tasks scheduled,
files sent back, written into the driver's copy) and the verdict of the copy. Needs a Python with Ray and this
checkout's plugin (the 0.5.23 CPU venv of ci/sglang_venv.py has Ray).

    python3 bench/ray_collect_time.py [--python PY] [--repeat 5] [--processes 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import REPO, clean_env, emit, git_state, load, machine, median, plugin_python

CHILD = r'''
import json, sys, tempfile, time
from pathlib import Path
sys.path[:0] = [sys.argv[4], sys.argv[5]]  # tests/ (support.*), bench/ (audit_scale)
from support.ray_cluster import RayCluster
from audit_scale import write_launch
import ray
from sglang_eagle_nccl.offline.ray_collect import collect
from sglang_eagle_nccl.offline.audit.judge import load_report

base, repeat, processes = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cluster = RayCluster(base)
try:
    run = base / "launch"
    write_launch(run, processes)
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    rows = []
    for i in range(repeat):
        got = collect(str(run), str(base / f"copy-{i}"))
        report = load_report(got.directories)
        rows.append({"total_s": got.seconds, "per_node_s": [n.seconds for n in got.nodes],
                     "files": [len(n.files) for n in got.nodes], "verdict": report.verdict})
    print(json.dumps(rows))
finally:
    ray.shutdown()
    cluster.close()
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--python", help="Python with Ray and this checkout's plugin (default: layered over the ci/ 0.5.23 venv)")
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as d:
        python = str(plugin_python(args.python, args.sglang, Path(d)))
        script = Path(d) / "collect.py"
        script.write_text(CHILD)
        base = Path(tempfile.mkdtemp(prefix="sen-ray-"))  # short: Ray's socket paths live under it
        out = subprocess.run([python, str(script), str(base), str(args.repeat), str(args.processes),
                              str(REPO / "tests"), str(REPO / "bench")], capture_output=True, text=True,
                             env=clean_env(PYTHONWARNINGS="ignore"), timeout=900)
        if out.returncode != 0:
            raise SystemExit(out.stderr[-4000:])
        rows = json.loads(out.stdout.strip().splitlines()[-1])
    per_node = [s for r in rows[1:] or rows for s in r["per_node_s"]]
    totals = [r["total_s"] for r in rows[1:] or rows]
    result = {
        "benchmark": f"records of {args.processes} processes gathered through Ray from a 2-node cluster (first run warms up)",
        "median_total_s": round(median(totals), 3),
        "median_per_node_read_s": round(median(per_node), 4),
        "runs": rows,
        "verdicts": sorted({r["verdict"] for r in rows}),
        "plugin": git_state(),
        "load_before": load_before,
        "load_after": load(),
        "machine": machine(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
