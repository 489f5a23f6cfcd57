#!/usr/bin/env python3
"""The cross-rank consistency check per group creation, with 2, 4, 8 and 16 gloo ranks on CPU.

Each rank (a spawned process, real torch.distributed over gloo) creates a group of all ranks the way
SGLang's GroupCoordinator does (``new_group`` of a gloo CPU group), then runs the plugin's check on it
(``inproc/evidence/consistency.check_group``: a monitored barrier and an all-gather of the must-match
variables). Reported per world size: median milliseconds of the group creation and of the check (rank
0, several groups), the check's share of a group creation with it, and the growth per rank -- on 2
cores, 16 ranks are oversubscribed 8x, so the figure is an upper bound of what a real node sees.

    python3 bench/consistency_scale.py [--python PY] [--ranks 2,4,8,16] [--groups 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import clean_env, emit, git_state, load, machine, median, plugin_python

RANK_CODE = r'''
import json, os, sys, time
import torch.distributed as dist
from sglang_eagle_nccl.inproc.evidence.consistency import check_group

def rank_main(rank, world, port, groups, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    env = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512"}
    create, check = [], []
    for _ in range(groups):
        t = time.perf_counter()
        group = dist.new_group(list(range(world)), backend="gloo")
        dist.barrier(group=group)  # the group is usable: what SGLang's init waits for
        create.append(time.perf_counter() - t)
        t = time.perf_counter()
        result = check_group(group, "tp", env, timeout_s=120)
        check.append(time.perf_counter() - t)
        assert result.ok
    if rank == 0:
        with open(out, "w") as fh:
            json.dump({"create": create, "check": check}, fh)
    dist.destroy_process_group()

if __name__ == "__main__":
    import multiprocessing as mp, socket
    world, groups, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=rank_main, args=(r, world, port, groups, out)) for r in range(world)]
    for p in procs: p.start()
    for p in procs: p.join(600)
    sys.exit(max(p.exitcode or 0 for p in procs))
'''


def _slope(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--python", help="Python with torch and this checkout's plugin (default: layered over the ci/ venv)")
    ap.add_argument("--sglang", default="0.5.23")
    ap.add_argument("--ranks", default="2,4,8,16")
    ap.add_argument("--groups", "--repeat", type=int, default=5, help="groups created (and checked) per world size")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = load()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-consistency-") as d:
        python = str(plugin_python(args.python, args.sglang, Path(d)))
        script = Path(d) / "ranks.py"
        script.write_text(RANK_CODE)
        for world in (int(x) for x in args.ranks.split(",")):
            out = Path(d) / f"out-{world}.json"
            subprocess.run([python, str(script), str(world), str(args.groups), str(out)], check=True, timeout=900,
                           env=clean_env(PYTHONWARNINGS="ignore"), cwd=d)
            got = json.loads(out.read_text())
            create, check = median(got["create"][1:] or got["create"]), median(got["check"][1:] or got["check"])
            rows.append({"ranks": world, "group_creation_ms": round(1000 * create, 2), "check_ms": round(1000 * check, 2),
                         "check_share": round(check / (create + check), 3)})
    for row in rows:
        row["check_ms_per_rank"] = round(row["check_ms"] / row["ranks"], 2)
    # The curve's shape: the exponent of check time in ranks (log-log least squares), over the world sizes
    # that oversubscribe this machine's cores (up to the core count, more ranks also means more busy cores,
    # so the cost per rank is not comparable with the larger sizes). 1.0 is linear.
    cores = os.cpu_count() or 1
    fit = [r for r in rows if r["ranks"] > cores] or rows
    exponent = _slope([math.log(r["ranks"]) for r in fit], [math.log(r["check_ms"]) for r in fit]) if len(fit) > 1 else 0.0
    result = {
        "benchmark": "consistency check per group creation, gloo ranks on CPU (rank 0, medians)",
        "rows": rows,
        "growth_exponent": round(exponent, 2),
        "fitted_ranks": [r["ranks"] for r in fit],
        "growth_vs_linear": round(exponent, 2),
        "goal": "the check's share of a group creation reported; growth no worse than linear in ranks",
        "met": exponent <= 1.15,
        "plugin": git_state(),
        "load_before": load_before,
        "load_after": load(),
        "machine": machine(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
