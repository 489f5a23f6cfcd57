"""The report: gpu-check.json (everything), gpu-check.txt (short), gpu-check-logs.tar.gz (every
step's logs, NCCL debug files and audit records)."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpu_check.common import DEBUG_SUBSYS, PLUGIN_DIST, Options

REPORT_JSON = "gpu-check.json"
REPORT_TEXT = "gpu-check.txt"
REPORT_LOGS = "gpu-check-logs.tar.gz"
# The device tool brings back files of at most 16 MiB; NCCL INFO files of a run this small are KBs.
MAX_LOG_BYTES = 4 * 2**20



VERDICT_WORDS = {0: "PASS", 1: "FAIL", 2: "INCOMPLETE (something needed is missing)"}


def format_text(report: Mapping[str, Any]) -> str:
    env = report.get("environment") or {}
    torch_facts = env.get("torch") or {}
    dists = env.get("dists") or {}
    if torch_facts.get("cuda_build"):
        devices = f"{torch_facts.get('devices', 0)} device(s)" + (
            f" {torch_facts['device_name']}" if torch_facts.get("device_name") else "")
        torch_text = f"CUDA {torch_facts['cuda_build']}, {devices}, NCCL {torch_facts.get('nccl')}"
    else:
        torch_text = "CPU build"
    lines = [
        f"gpu-check ({report['mode']}): {VERDICT_WORDS.get(report['exit_code'], 'FAIL')} "
        f"(exit {report['exit_code']}) in {report['total_s']:.1f}s",
        f"python {env.get('python')} {env.get('python_version', '')}; torch {torch_facts.get('version')} "
        f"({torch_text}); sglang {dists.get('sglang')}; plugin {dists.get(PLUGIN_DIST)}",
        f"profile {report.get('profile', {}).get('spec')} + {report.get('profile', {}).get('nccl_env') or []} "
        f"+ NCCL debug (INFO, {DEBUG_SUBSYS}, one file per process)",
    ]
    if report.get("scrubbed_env"):
        lines.append(f"removed from the inherited environment: {', '.join(report['scrubbed_env'])}")
    lines.append("")
    for step in report["steps"]:
        lines.append(f"[{step['status'].upper():7}] {step['title']} ({step['wall_s']:.1f}s)")
        details = step.get("details") or {}
        for proc in details.get("nccl_processes") or []:
            confirmed = ", ".join(f"{k}={v}" for k, v in proc["confirmed"].items()) or "none"
            lines.append(f"    pid {proc['pid']} {proc['role']}: NCCL {proc['nccl_version'] or '?'}, "
                         f"{proc['comm_inits_complete']}/{proc['comm_inits']} comm init(s) complete; "
                         f"confirmed: {confirmed}")
            if proc["not_reported"]:
                lines.append(f"        not reported by NCCL in this process: {', '.join(proc['not_reported'])}")
        if "request_s" in details:
            lines.append(f"    sglang {details.get('sglang')}: start {details.get('engine_start_s')}s, requests "
                         f"{details.get('request_s')}s, accept length {details.get('accept_length')}, "
                         f"cuda graph {details.get('cuda_graph')}, shutdown {details.get('shutdown_s')}s")
        audit = details.get("audit")
        if audit:
            roles = ", ".join(f"{p['role']}:{p['verdict']}" for p in audit["processes"])
            lines.append(f"    plugin audit {audit['verdict']}: {roles}; "
                         f"{len(audit['communicators'])} communicator record(s)")
        for problem in step["problems"]:
            lines.append(f"    ✗ {problem}")
        for note in step["notes"]:
            lines.append(f"    · {note}")
    lines.append("")
    lines.append(f"timings: {json.dumps(report['timings'])}")
    lines.append(f"work directory: {report.get('work_dir')}")
    return "\n".join(lines) + "\n"


def pack_logs(work: Path, target: Path) -> list[str]:
    """The step logs, NCCL debug files and audit records in one tarball (the device tool returns at
    most 8 files); files over MAX_LOG_BYTES are left out and listed."""
    left_out = []
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if not path.is_file() or "venv" in path.relative_to(work).parts[:1] or "models" in path.parts:
                continue
            if path.stat().st_size > MAX_LOG_BYTES:
                left_out.append(str(path))
                continue
            tar.add(path, arcname=str(path.relative_to(work)))
    return left_out


def write_report(opts: Options, report: dict[str, Any]) -> tuple[Path, Path]:
    opts.out.mkdir(parents=True, exist_ok=True)
    report["logs_left_out"] = pack_logs(opts.work, opts.out / REPORT_LOGS)
    json_path, text_path = opts.out / REPORT_JSON, opts.out / REPORT_TEXT
    json_path.write_text(json.dumps(report, indent=1, sort_keys=False, default=str) + "\n")
    text_path.write_text(format_text(report))
    return json_path, text_path
