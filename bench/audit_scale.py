#!/usr/bin/env python3
"""How `audit` grows with the launch: 512 to 65,536 processes, records and NCCL reads logs.

A synthetic launch shaped like a real TP launch: per process the records a scheduler rank writes (start,
patch set, hooks, role, scheduler start, six groups with their PyNccl communicators, native plugins,
its reads log) and a reads log of a dozen reads with counts -- the shape and sizes of the real writers,
through the real identity and file naming (contract/launch_dir.py), 8 processes per host. Each size is
judged by `audit` (the default view) and by `audit --json`, each in a fresh process pinned to one core
(``taskset -c 0`` when available); CPU time and peak RSS of that process are the figures (wall time
follows the machine's load), with the default view's line count (one screen: its alike hosts folded).
Goals (issue 24): 4,096 processes in <= 2 s and 65,536 in <= 30 s on one core, the growth exponent
over 512 -> 65,536 stated (1.0 is linear).

    python3 bench/audit_scale.py [--sizes 512,4096,16384,65536] [--repeat 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import REPO, emit, git_state, load, machine, median

GROUPS = ("world", "tp", "pp", "attn_tp", "moe_ep", "moe_tp")
ENV = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512",
       "NCCL_P2P_LEVEL": "SYS", "NCCL_MAX_NCHANNELS": "16"}


def _identity(host: int, pid: int) -> dict[str, object]:
    return {"host": f"gpu-node-{host}", "boot_id": f"{host:032x}", "pidns": "4026531836", "pid": pid,
            "start": str(100000 + pid)}


def write_launch(run: Path, processes: int, per_host: int = 8) -> None:
    sys.path.insert(0, str(REPO))
    from sglang_eagle_nccl.contract.jsonlight import dumps
    from sglang_eagle_nccl.contract.launch_dir import process_file_name, reads_file_name

    def c_line(record: dict[str, object]) -> str:
        return json.dumps(record, separators=(",", ":"))

    run.mkdir(parents=True)
    (run / "launch.json").write_text(json.dumps({"profile": {"name": "pcie-8gpu", "env": ENV}}))
    for i in range(processes):
        ident = _identity(i // per_host, 1000 + i % per_host)
        reads_name = reads_file_name(ident)

        def rec(event: str, _i: int = i, _ident: dict = ident, **fields: object) -> str:
            # as AuditWriter writes a record: the start-up JSON writer (keys sorted, no spaces)
            return dumps({"event": event, "ts": 1.0 + _i, "role": "scheduler", **_ident, **fields})

        lines = [rec("process_start", expected_env=ENV, env=ENV, profile="pcie-8gpu", group_envs={}, sglang_wins=[],
                     origin="pth", invocation="python -c <multiprocessing.spawn>", node_rank=i // per_host),
                 rec("patch_set", patch_set="sglang-0.5.21-latest", sglang_version="0.5.23", status="tested",
                     uncovered=[])]
        lines += [rec("hook_installed", target=f"sglang.x:T{h}", mechanism="wrapt", handler="h") for h in range(8)]
        lines += [rec("process_role", title=f"sglang::scheduler_TP{i % per_host}"),
                  rec("scheduler_start", env=ENV, ranks={"tp_rank": i % per_host}, overwrites=[])]
        for g in GROUPS:
            ranks = list(range(processes)) if g == "world" else [i]  # a TP launch: most groups have one rank
            lines.append(rec("group_created", group=g, unique_name=f"{g}:0", ranks=ranks[:64], env=ENV,
                             torch_comm="lazy-nccl", group_overrides={}, use_pynccl=True, has_pynccl=True))
            lines.append(rec("pynccl_created", group=g, env=ENV, available=True, disabled=False, world_size=len(ranks)))
        lines += [rec("native_plugins", library="/x/lib.so", library_version="0.1.0", rules_digest="d", tuner=False,
                      reads_log=str(run / reads_name)),
                  rec("nccl_reads_log", file=reads_name)]
        (run / process_file_name(ident)).write_text("\n".join(lines) + "\n")
        pid = ident["pid"]
        # the identity line as Python writes it, then the C library's lines (its field order, no spaces)
        reads = [dumps({"event": "reads_log", "time": 1.0, **ident}),
                 c_line({"event": "env_init", "pid": pid, "time": 1.0, "abi": "v2", "nccl_version": "2.32.3",
                         "library_version": "0.1.0"})]
        for name, value in ENV.items():
            reads.append(c_line({"event": "read", "pid": pid, "time": 1.0, "name": name, "value": value,
                                 "source": "profile", "environment": value, "disagrees": False}))
        counts = [{"name": n, "value": v, "source": "profile", "environment": v, "count": 3} for n, v in ENV.items()]
        reads.append(c_line({"event": "counts", "pid": pid, "time": 2.0, "reads": counts, "unrecorded": 0}))
        (run / reads_name).write_text("\n".join(reads) + "\n")


def reader() -> str:
    """The JSON reader the audit uses here: msgspec (the 'fast' extra) when installed, else the json module."""
    try:
        import msgspec  # noqa: F401
    except ImportError:
        return "json"
    return "msgspec"


def measure(run: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[float, float, int, float, int]:
    """(CPU seconds, wall seconds, exit code, peak RSS in MiB, lines printed) of `audit` in a fresh interpreter
    on one core."""
    code = ("import resource, subprocess, sys, time; t = time.monotonic();"
            "p = subprocess.run([sys.executable, '-m', 'sglang_eagle_nccl', 'audit', *sys.argv[1:]],"
            " stdout=subprocess.PIPE); w = time.monotonic() - t;"
            "r = resource.getrusage(resource.RUSAGE_CHILDREN);"
            "print(r.ru_utime + r.ru_stime, w, p.returncode, r.ru_maxrss, p.stdout.count(b'\\n'))")
    cmd = [sys.executable, "-c", code, str(run), *extra]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})))
    cpu, wall, rc, rss, lines = out.stdout.split()
    return float(cpu), float(wall), int(rc), int(rss) / 1024, int(lines)


def _exponent(rows: list[dict], key: str) -> float | None:
    first, last = rows[0], rows[-1]
    if last["processes"] == first["processes"] or not first[key]:
        return None
    return round(math.log(last[key] / first[key]) / math.log(last["processes"] / first["processes"]), 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="512,4096,16384,65536")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--plain-reader-up-to", type=int, default=16384,
                    help="also measure the default view with the json module's reader up to this size")
    args = ap.parse_args()
    load_before = load()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as d:
        for n in (int(x) for x in args.sizes.split(",")):
            run = Path(d) / f"launch-{n}"
            write_launch(run, n)
            size = sum(p.stat().st_size for p in run.iterdir())
            row: dict[str, object] = {"processes": n, "files": 2 * n + 1, "bytes": size}
            for view, extra in (("text", ()), ("json", ("--json",))):
                got = [measure(run, *extra) for _ in range(args.repeat)]
                if any(g[2] != 0 for g in got):
                    raise SystemExit(f"audit {' '.join(extra)} of {n} processes exited {got[0][2]}: the synthetic "
                                     "launch should pass")
                row[f"{view}_cpu_s"] = round(median([g[0] for g in got]), 3)
                row[f"{view}_wall_s"] = round(median([g[1] for g in got]), 3)
                row[f"{view}_peak_rss_mib"] = round(max(g[3] for g in got), 1)
                if view == "text":
                    row["text_lines"] = got[0][4]
            row["text_per_process_ms"] = round(1000 * row["text_cpu_s"] / n, 3)  # type: ignore[operator]
            if args.plain_reader_up_to >= n and reader() != "json":  # the fallback, without the 'fast' extra
                got = measure(run, env={"SGLANG_EAGLE_NCCL_AUDIT_READER": "json"})
                row["text_cpu_s_json_reader"] = round(got[0], 3)
                row["text_peak_rss_mib_json_reader"] = round(got[3], 1)
            rows.append(row)
            shutil.rmtree(run)
    by = {r["processes"]: r for r in rows}
    result = {
        "benchmark": "audit (default view) and audit --json of a synthetic launch (records + NCCL reads logs), one core",
        "rows": rows,
        "growth_exponent_text_cpu": _exponent(rows, "text_cpu_s"),
        "growth_exponent_json_cpu": _exponent(rows, "json_cpu_s"),
        "growth_exponent_text_rss": _exponent(rows, "text_peak_rss_mib"),
        "goal": "4,096 processes <= 2 s and 65,536 <= 30 s CPU on one core (default view)",
        "met": {str(n): (by[n]["text_cpu_s"] <= limit) if n in by else None for n, limit in ((4096, 2), (65536, 30))},
        "repeat": args.repeat,
        "reader": reader(),
        "plugin": git_state(),
        "load_before": load_before,
        "load_after": load(),
        "machine": machine(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
