#!/usr/bin/env python3
"""Hostile input, bounded: `audit` of a launch with 1, 10 and 100 record files of 16 MiB of junk lines each.

Each junk file is exactly at the per-file cap (16 MiB) and holds short lines that are not records (a
million of them), next to one valid scheduler, so the audit reads everything and judges something. Per
size, `audit --json` runs in a fresh process pinned to one core (``taskset -c 0`` when available) twice:
with the default budget (16 million lines: it stops with exit 2 past it) and with ``--budget`` raised
(``lines``, ``bytes``) so that every line is read -- the figure that shows memory does not grow with the
number of bad lines or files. Reported: exit code, CPU seconds, and peak RSS of the audit process.
Before issue 24, one such file cost about 2.4 GB and a minute, and two ended in a MemoryError.

    python3 bench/audit_junk.py [--files 1,10,100] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import REPO, emit, git_state, load, machine

MIB16 = 16 * 1024 * 1024
LINE = b"this is not a record\n"  # 21 bytes: about 800,000 lines per file
ENV = {"NCCL_PROTO": "LL"}
RAISED = ["--budget", "lines=4000000000", "--budget", "bytes=100000000000"]


def write_launch(run: Path, files: int) -> None:
    run.mkdir(parents=True)
    (run / "launch.json").write_text(json.dumps({"profile": {"name": "p", "env": ENV}}))
    ident = {"host": "h", "boot_id": "b" * 32, "pidns": "1", "pid": 1, "start": "1"}

    def rec(event: str, **fields: object) -> str:
        return json.dumps({"event": event, "ts": 1.0, "role": "scheduler", **ident, **fields})

    (run / "proc-h-1.jsonl").write_text("\n".join([
        rec("process_start", expected_env=ENV, env=ENV, profile="p"),
        rec("process_role", title="sglang::scheduler_TP0"),
        rec("group_created", group="tp", ranks=[0, 1], env=ENV, torch_comm="lazy-nccl", group_overrides={}),
    ]) + "\n")
    junk = LINE * (MIB16 // len(LINE))
    junk += b"x" * (MIB16 - len(junk) - 1) + b"\n"
    first = run / "proc-junk-0.jsonl"
    first.write_bytes(junk)
    for n in range(1, files):
        os.link(first, run / f"proc-junk-{n}.jsonl")  # the same bytes, no extra disk


def measure(run: Path, extra: list[str]) -> dict[str, object]:
    """CPU seconds, peak RSS (MiB) and exit code of `audit --json` in a fresh process on one core."""
    code = ("import resource, subprocess, sys;"
            "p = subprocess.run([sys.executable, '-m', 'sglang_eagle_nccl', 'audit', *sys.argv[1:], '--json'],"
            " stdout=subprocess.PIPE, stderr=subprocess.STDOUT);"
            "r = resource.getrusage(resource.RUSAGE_CHILDREN);"
            "print(r.ru_utime + r.ru_stime, r.ru_maxrss, p.returncode, 'Traceback' in p.stdout.decode(errors='replace'))")
    cmd = [sys.executable, "-c", code, str(run), *extra]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    cpu, rss_kib, rc, traceback = out.stdout.split()
    return {"exit": int(rc), "cpu_s": round(float(cpu), 2), "peak_rss_mib": round(int(rss_kib) / 1024, 1),
            "traceback": traceback == "True"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", default="1,10,100")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = load()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-audit-junk-") as d:
        for n in (int(x) for x in args.files.split(",")):
            run = Path(d) / f"launch-{n}"
            write_launch(run, n)
            rows.append({"junk_files": n, "junk_bytes": n * MIB16, "default_budget": measure(run, []),
                         "raised_budget": measure(run, RAISED)})
            shutil.rmtree(run)
    result = {
        "benchmark": "audit --json of a launch with N record files of 16 MiB of junk lines, one core",
        "rows": rows,
        "goal": "memory bounded whatever the number of bad lines or files; no traceback; past the budget exit 2",
        "met": all(not r[k]["traceback"] for r in rows for k in ("default_budget", "raised_budget")),
        "plugin": git_state(),
        "load_before": load_before,
        "load_after": load(),
        "machine": machine(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
