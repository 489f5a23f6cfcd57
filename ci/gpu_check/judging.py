"""Judging (pure): NCCL's own debug output and the plugin's audit of the same processes, plugin
failures in an SGLang log, and the exit status of the whole run."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpu_check.common import Step, last_exception_line

# Lines in an engine log that mean the plugin itself broke in some SGLang process.
PLUGIN_FAILURE_PATTERNS = (
    re.compile(r"Failed to execute general plugin: sglang_eagle_nccl"),
    re.compile(r"\[sglang-eagle-nccl\] internal error.*"),
    re.compile(r"\[sglang-eagle-nccl\] WARNING: .*"),
)

# compare()'s kinds that count as a disagreement here: "error" ones (another value) and "warning"
# ones (NCCL ran in a pid the audit does not know, or read a variable the audit lacks). A
# "not_reported" variable is only a notice: NCCL logs a variable only where and when it reads it.
FAILING_SEVERITIES = frozenset({"error", "warning"})


def judge_nccl(
    audit: Mapping[str, Any] | None,
    nccl_logs: Sequence[Mapping[str, Any]],
    expected_env: Mapping[str, str],
    *,
    required_pids: Mapping[int, str] = {},  # noqa: B006 - read only
    require_nccl: bool = False,
    require_comm_inits: bool = False,
    nccl_dir: str = "",
) -> dict[str, Any]:
    """Judge one step from the plugin's audit (``audit --nccl-debug-dir --json``) and the parsed
    NCCL debug files (``python -m sglang_eagle_nccl.knowledge.nccl.debug_log DIR``). Pure.

    Returns {"problems", "notes", "processes"}: one entry per process NCCL ran in, with the profile
    variables NCCL confirmed, those it did not report, and every disagreement."""
    problems: list[str] = []
    notes: list[str] = []
    if audit is None:
        return {"problems": ["the plugin's audit could not be read"], "notes": [], "processes": []}
    if audit.get("verdict") == "fail":
        problems += [f"plugin audit: {p}" for p in audit.get("problems") or ["verdict fail"]]
    elif audit.get("verdict") == "warn":
        notes.append("plugin audit verdict: warn (see the audit text)")
    roles = {int(p["pid"]): p.get("role", "?") for p in audit.get("processes", [])}
    disagreements = (audit.get("nccl_debug") or {}).get("disagreements", [])
    by_pid: dict[int, list[Mapping[str, Any]]] = {}
    for d in disagreements:
        by_pid.setdefault(int(d["pid"]), []).append(d)
    processes = []
    for log in nccl_logs:
        pid = int(log["pid"])
        role = roles.get(pid, "not audited")
        found = by_pid.get(pid, [])
        different = {d["name"] for d in found if d["kind"] in ("different", "audit_mismatch")}
        reported = log.get("env") or {}
        confirmed = {k: reported[k] for k in sorted(expected_env) if k in reported and k not in different}
        comms = log.get("comms") or []
        entry = {
            "pid": pid,
            "host": log.get("host"),
            "role": role,
            "nccl_version": log.get("version"),
            "comm_inits": len(comms),
            "comm_inits_complete": sum(1 for c in comms if c.get("completed")),
            "nranks": sorted({c.get("nranks") for c in comms if c.get("nranks") is not None}),
            "channels": [c.get("channels") for c in comms if c.get("channels")][:8],
            "confirmed": confirmed,
            "not_reported": sorted(d["name"] for d in found if d["kind"] == "not_reported"),
            "unverifiable": sorted(d["name"] for d in found if d["kind"] == "unverifiable"),
            "reported_not_in_profile": {k: v for k, v in sorted(reported.items()) if k not in expected_env},
            "disagreements": [dict(d) for d in found if d.get("severity") in FAILING_SEVERITIES],
            "nccl_warnings": [w.get("message") for w in log.get("warnings") or []][:5],
            "sources": [Path(s).name for s in log.get("sources") or []],
        }
        processes.append(entry)
        for d in entry["disagreements"]:
            values = " ".join(f"{k}={d[k]!r}" for k in ("expected", "reported", "audit") if d.get(k) is not None)
            problems.append(f"pid {pid} ({role}): {d['kind']} {d.get('name') or ''} {values} "
                            f"({d.get('detail', '')})".replace("  ", " "))
        if entry["nccl_warnings"]:
            notes.append(f"pid {pid} ({role}): NCCL WARN: {entry['nccl_warnings'][0]}")
        if pid in required_pids:
            if require_comm_inits and entry["comm_inits_complete"] == 0:
                problems.append(f"pid {pid} ({required_pids[pid]}): NCCL logged no completed communicator "
                                "init (was the collective run on NCCL?)")
            if not confirmed:
                problems.append(f"pid {pid} ({required_pids[pid]}): NCCL confirmed none of the profile's "
                                f"variables (reported: {sorted(reported) or 'nothing'}); "
                                "is NCCL_DEBUG_SUBSYS missing ENV?")
    logged = {int(log["pid"]) for log in nccl_logs}
    for pid, role in sorted(required_pids.items()):
        if pid not in logged:
            problems.append(f"{role} pid {pid} left no NCCL debug file in {nccl_dir or 'the NCCL directory'}")
    if require_nccl and not nccl_logs:
        problems.append(f"no NCCL debug file was written to {nccl_dir or 'the NCCL directory'} "
                        "(NCCL never initialised, or NCCL_DEBUG_FILE did not reach the process)")
    return {"problems": problems, "notes": notes, "processes": processes}


def scan_plugin_failures(text: str) -> list[str]:
    """Lines of an SGLang log in which the plugin reported that it broke, each with the exception that
    follows it within a traceback, if any (deduplicated)."""
    found: list[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        for pattern in PLUGIN_FAILURE_PATTERNS:
            match = pattern.search(line)
            if not match:
                continue
            message = match.group(0)
            if lines[i + 1:i + 2] == ["Traceback (most recent call last):"]:
                cause = last_exception_line("\n".join(lines[i + 1:i + 80]))
                message += f" ({cause})" if cause else ""
            if message not in found:
                found.append(message)
    return found


def overall_exit(steps: Iterable[Step]) -> int:
    """1 if any step failed (a disagreement wins over anything missing), 2 if a step could not run
    for a missing prerequisite, else 0."""
    statuses = [s.status for s in steps]
    if "fail" in statuses:
        return 1
    if "missing" in statuses:
        return 2
    return 0


def judge_native(
    audit: Mapping[str, Any] | None,
    result: Mapping[str, Any],
    plugin_lines: Sequence[str],
    *,
    gpu: bool,
    expected: Mapping[str, str],
) -> dict[str, Any]:
    """Judge step (d) from the child's result, NCCL's plugin lines and the audit's ``nccl_reads``. Pure.

    Both modes: the plugin set NCCL_ENV_PLUGIN to its library in the child, NCCL logged loading it,
    and the audit holds the child's reads with each ``expected`` variable served from the profile.
    On a GPU also: the communicator worked, NCCL logged loading the tuner plugin, and the tuner was
    initialised for one rank. On a CPU the communicator init fails (no CUDA device) before NCCL
    loads a tuner: that is noted, not failed."""
    problems: list[str] = []
    notes: list[str] = []
    if result.get("error"):
        problems.append(f"the one-rank communicator's process failed: {result['error']}")
    plugin_env = result.get("plugin_env") or {}
    env_lib = plugin_env.get("NCCL_ENV_PLUGIN")
    if not env_lib:
        problems.append("the plugin set no NCCL_ENV_PLUGIN in the activated process: its native library is "
                        "missing (a py3-none-any wheel, built without a C compiler? `sglang-eagle-nccl doctor`)")
    elif not any(line.startswith(f"Successfully loaded external env plugin {env_lib}") for line in plugin_lines):
        problems.append(f"NCCL did not log loading the env plugin {env_lib} (lines about plugins: "
                        f"{list(plugin_lines) or 'none'})")
    tuner_lib = plugin_env.get("NCCL_TUNER_PLUGIN")
    tuner_loaded = bool(tuner_lib) and any(
        line.startswith(f"Successfully loaded external tuner plugin {tuner_lib}") for line in plugin_lines)
    pid = result.get("pid")
    # nccl_reads is keyed by the whole process identity; this machine's child is the one with its pid.
    by_process = (audit or {}).get("nccl_reads") or {}
    process_reads = next((r for r in by_process.values() if r.get("pid") == pid), None) or {}
    reads = process_reads.get("reads") or []
    tuner_inits = process_reads.get("tuner_inits") or []
    if audit is not None and pid is not None:
        if not any(int(p.get("pid", -1)) == pid for p in audit.get("processes", [])):
            problems.append(f"the audit holds no record of pid {pid}: the plugin did not activate in it")
        if not process_reads:
            problems.append(f"the audit's nccl_reads has nothing for pid {pid} (no reads log from the env plugin)")
        elif process_reads.get("verdict") == "fail":
            problems += [f"nccl_reads pid {pid}: {n}" for n in process_reads.get("notes") or ["verdict fail"]]
        for name, value in sorted(expected.items()):
            got = [r for r in reads if r.get("name") == name]
            if process_reads and not any(r.get("value") == value and r.get("source") == "profile" for r in got):
                problems.append(f"nccl_reads pid {pid}: NCCL did not read {name}={value} from the profile "
                                f"through the env plugin (its reads of {name}: {got or 'none'})")
    if gpu:
        if not result.get("comm_ok"):
            problems.append("the one-rank NCCL communicator did not complete an all-reduce")
        if not tuner_lib:
            problems.append("the plugin set no NCCL_TUNER_PLUGIN (does the profile have [[tuner.rules]]?)")
        elif not tuner_loaded:
            problems.append(f"NCCL did not log loading the tuner plugin {tuner_lib}")
        if tuner_lib and not any(t.get("nranks") == 1 for t in tuner_inits):
            problems.append(f"the reads log of pid {pid} has no tuner_init for a one-rank communicator")
    elif not result.get("comm_ok"):
        notes.append("communicator init failed without a CUDA device, as expected on a CPU "
                     f"({result.get('comm_init_error') or 'no detail'}); NCCL loads a tuner plugin only inside "
                     "communicator init, so the tuner is shown loaded on a GPU only")
    notes.append("one rank never asks the tuner for an algorithm or protocol: its choices are not shown here "
                 "(tests/native/test_native_tuner.py drives them through every tuner ABI)")
    return {"problems": problems, "notes": notes, "reads": reads, "tuner_inits": tuner_inits}
