"""Cross-check the plugin's audit with NCCL's own debug output (``audit --nccl-debug-dir``).

The audit says what each process had in its environment; NCCL's ``NCCL_X set by environment
to Y`` lines say what NCCL actually read. Both must agree with the profile, per pid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sglang_eagle_nccl.audit.report import Report, read_launch
from sglang_eagle_nccl.nccl.debug_log import compare, format_text, parse_dir

ENV_EVENTS = ("env_restored", "scheduler_start", "profile_replaced", "process_start")


def audit_env_by_pid(run_dir: str | Path) -> dict[int, dict[str, str]]:
    """The NCCL environment each audited process ended up with."""
    _, processes = read_launch(run_dir)
    out: dict[int, dict[str, str]] = {}
    for proc in processes:
        for event in ENV_EVENTS:
            recs = proc.events(event)
            if recs and isinstance(recs[-1].get("env"), dict):
                out[proc.pid] = recs[-1]["env"]
                break
    return out


def cross_check(report: Report, nccl_debug_dir: str | Path) -> dict[str, Any]:
    meta, _ = read_launch(report.run_dir)
    expected = dict((meta.get("profile") or {}).get("env", {}))
    logs = parse_dir(nccl_debug_dir)
    disagreements = compare(logs, expected, audit_env_by_pid(report.run_dir))
    errors = [d for d in disagreements if d.severity == "error"]
    text = "NCCL's own debug output (" + str(nccl_debug_dir) + ")\n" + format_text(disagreements, logs)
    return {
        "ok": bool(logs) and not errors,
        "processes": len(logs),
        "disagreements": [d.to_dict() for d in disagreements],
        "text": text if logs else text + "no NCCL debug files found (was NCCL_DEBUG=INFO with NCCL_DEBUG_FILE set?)\n",
    }
