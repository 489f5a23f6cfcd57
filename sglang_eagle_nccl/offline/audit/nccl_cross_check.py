"""Cross-check the plugin's audit with NCCL's own debug output (``audit --nccl-debug-dir``).

The audit says what each process had in its environment; NCCL's ``NCCL_X set by environment
to Y`` lines say what NCCL actually read. Both must agree with the profile in force in that
process (per-node values included), per pid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sglang_eagle_nccl.knowledge.nccl.debug_log import compare, format_text, parse_dir
from sglang_eagle_nccl.offline.audit.judge import ENV_EVENTS, Report, expectations
from sglang_eagle_nccl.offline.audit.read import read_launch


def per_process(run_dir: str | Path) -> tuple[dict[int, dict[str, str]], dict[int, dict[str, str]]]:
    """For each audited pid: the NCCL environment it ended with, and the profile then in force."""
    meta, processes = read_launch(run_dir)
    env_by_pid: dict[int, dict[str, str]] = {}
    expected_by_pid: dict[int, dict[str, str]] = {}
    for proc in processes:
        for rec, exp in expectations(proc.records, meta.get("profile") if isinstance(meta, dict) else None):
            if rec.get("event") in ENV_EVENTS and isinstance(rec.get("env"), dict):
                env_by_pid[proc.pid] = rec["env"]
            if exp is not None:
                expected_by_pid[proc.pid] = dict(exp.env)
    return env_by_pid, expected_by_pid


def cross_check(report: Report, nccl_debug_dir: str | Path) -> dict[str, Any]:
    meta, _ = read_launch(report.run_dir)
    launch_env = dict(((meta.get("profile") or {}) if isinstance(meta, dict) else {}).get("env", {}))
    env_by_pid, expected_by_pid = per_process(report.run_dir)
    logs = parse_dir(nccl_debug_dir)
    disagreements = compare(logs, launch_env, env_by_pid, expected_by_pid=expected_by_pid)
    errors = [d for d in disagreements if d.severity == "error"]
    text = "NCCL's own debug output (" + str(nccl_debug_dir) + ")\n" + format_text(disagreements, logs)
    return {
        "ok": bool(logs) and not errors,
        "processes": len(logs),
        "disagreements": [d.to_dict() for d in disagreements],
        "text": text if logs else text + "no NCCL debug files found (was NCCL_DEBUG=INFO with NCCL_DEBUG_FILE set?)\n",
    }
