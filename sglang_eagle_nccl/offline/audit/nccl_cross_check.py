"""Cross-check the plugin's audit with NCCL's own debug output (``audit --nccl-debug-dir``).

The audit says what each process had in its environment; NCCL's ``NCCL_X set by environment
to Y`` lines say what NCCL actually read. Both must agree with the profile in force in that
process (per-node values included), per process. NCCL names its files and lines by host and pid
(``%h``: the host name cut at its first dot); a pid alone repeats across hosts, so processes are
matched by both.
"""

from __future__ import annotations

from typing import Any

from sglang_eagle_nccl.knowledge.nccl.debug_log import parse_dir
from sglang_eagle_nccl.knowledge.nccl.debug_log_check import compare, format_text
from sglang_eagle_nccl.offline.audit.judge import ENV_EVENTS, Report, expectations
from sglang_eagle_nccl.offline.audit.read import read_launches

HostPid = tuple[str, int]


def nccl_host(host: str) -> str:
    """The host name as NCCL writes it (``%h`` and its log prefix): cut at the first dot."""
    return host.split(".")[0]


def per_process(run_dirs: list[str]) -> tuple[dict[HostPid, dict[str, str]], dict[HostPid, dict[str, str]]]:
    """For each audited process, by (NCCL's host name, pid): its last NCCL environment and the profile then in force."""
    launch = read_launches(run_dirs)
    profile = launch.meta.get("profile") if isinstance(launch.meta, dict) else None
    env: dict[HostPid, dict[str, str]] = {}
    expected: dict[HostPid, dict[str, str]] = {}
    for proc in launch.processes:
        key = (nccl_host(proc.host), proc.pid)
        for rec, exp in expectations(proc.records, profile):
            if rec.get("event") in ENV_EVENTS:
                env[key] = rec["env"]
            if exp is not None:
                expected[key] = dict(exp.env)
    return env, expected


def cross_check(report: Report, nccl_debug_dir: str) -> dict[str, Any]:
    run_dirs = report.run_dirs or [report.run_dir]
    launch = read_launches(run_dirs)
    launch_env = dict(((launch.meta.get("profile") or {}) if isinstance(launch.meta, dict) else {}).get("env", {}))
    env_by, expected_by = per_process(run_dirs)
    logs = parse_dir(nccl_debug_dir)
    disagreements = []
    for host in sorted({log.host for log in logs}):
        # compare() matches by pid: one host at a time, so a pid of another host never answers for it.
        mine = [log for log in logs if log.host == host]
        disagreements += compare(mine, launch_env, {pid: e for (h, pid), e in env_by.items() if h == host},
                                 expected_by_pid={pid: e for (h, pid), e in expected_by.items() if h == host})
    errors = [d for d in disagreements if d.severity == "error"]
    text = "NCCL's own debug output (" + str(nccl_debug_dir) + ")\n" + format_text(disagreements, logs)
    return {
        "ok": bool(logs) and not errors,
        "processes": len(logs),
        "disagreements": [d.to_dict() for d in disagreements],
        "text": text if logs else text + "no NCCL debug files found (was NCCL_DEBUG=INFO with NCCL_DEBUG_FILE set?)\n",
    }
