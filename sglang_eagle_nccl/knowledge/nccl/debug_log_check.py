"""Judge NCCL's debug log: do the values NCCL says it read agree with the expected environment
and with the plugin's audit, process by process (:func:`compare`), and say so (:func:`format_text`).
The log itself is parsed by :mod:`.debug_log`.

NCCL prints a variable only where and when its code reads it (``NCCL_X set by environment to V``
at the first read in a process, with the ENV debug subsystem on), so a missing report is softer
than a different one, and some variables are never echoed at all. NCCL logs a number as
``strtoll`` parsed it and a path level by its name: the comparison reads the expected value the
same way, through :mod:`.c_reading` (the one copy of both rules).

Only the standard library is used.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sglang_eagle_nccl.knowledge.nccl.c_reading import read_level, strtol_int, strtoll0
from sglang_eagle_nccl.knowledge.nccl.debug_log import EnvReport, NcclProcessLog

__all__ = [
    "Disagreement",
    "KIND_SEVERITY",
    "compare",
    "format_text",
]

# Disagreement kinds and how serious each one is.
KIND_SEVERITY: dict[str, str] = {
    "different": "error",  # NCCL reported another value than the expected one
    "audit_mismatch": "error",  # the plugin audit recorded another value than NCCL read
    "not_in_audit": "warning",  # NCCL read it, the plugin audit of that pid lacks it
    "process_not_audited": "warning",  # NCCL ran in a pid the audit does not know
    "not_reported": "notice",  # expected, but NCCL never printed it in that process
    "unverifiable": "info",  # NCCL never prints this variable, whatever its value
}


@dataclass(frozen=True)
class Disagreement:
    kind: str
    host: str
    pid: int
    name: str | None
    expected: str | None = None
    reported: str | None = None
    audit: str | None = None
    comm: str | None = None
    detail: str = ""

    @property
    def severity(self) -> str:
        return KIND_SEVERITY.get(self.kind, "error")

    def to_dict(self) -> dict[str, Any]:
        d = {name: getattr(self, name) for name in self.__dataclass_fields__}
        d["severity"] = self.severity
        return d


# --------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------

# Read with getenv in ncclDebugInit/initEnv, never echoed by a "set by environment" line.
_UNOBSERVABLE = frozenset(
    {
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_FILE",
        "NCCL_DEBUG_TIMESTAMP_LEVELS",
        "NCCL_DEBUG_TIMESTAMP_FORMAT",
        "NCCL_CONF_FILE",
        "NCCL_ENV_PLUGIN",
    }
)
_LEVEL_VARS = frozenset({"NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_IB_GDR_LEVEL"})
_HINTS = {
    "NCCL_P2P_LEVEL": "read once per process by the topology code of the first communicator "
    "init (graph/paths.cc); only upper-case level names or digits are accepted, anything else "
    "is ignored without a log line",
    "NCCL_NET_GDR_LEVEL": "read once per process, only when a network device is considered",
    "NCCL_P2P_DISABLE": "logged only when it disables P2P (value 1)",
    "NCCL_SOCKET_IFNAME": "logged when NCCL builds its interface list (bootstrap/socket/IB "
    "init); values of one character are ignored",
    "NCCL_PROTO": "logged at each communicator init (tuning); absent means no init reached tuning",
    "NCCL_ALGO": "logged at each communicator init (tuning); absent means no init reached tuning",
}
_GENERIC_HINT = (
    "NCCL logs 'set by environment' only at the first read of a variable in a process, only if "
    "the code that reads it runs, and only with the ENV debug subsystem enabled"
)


def _strtoll(text: str) -> tuple[int | None, bool]:
    """C ``strtoll(text, &end, 0)`` (the one emulation): (value, or None when NCCL would keep its
    default: no digits or an overflow; whether the whole string was read)."""
    parsed = strtoll0(text)
    if parsed.consumed == "" or parsed.overflow:
        return None, False
    return parsed.value, parsed.rest == ""


def _level_name(text: str) -> str | None:
    """The level ncclGetLevel uses for ``text``; None where NCCL ignores it (or reads outside its table)."""
    return read_level(text).level


def _agree(name: str, expected: str, report: EnvReport) -> tuple[bool, str]:
    """Whether NCCL's report matches ``expected``; the second item explains a mismatch."""
    if expected in (report.value, report.raw):
        return True, ""
    if name in _LEVEL_VARS:
        level = _level_name(expected)
        if level is None:
            return False, f"NCCL ignores {name}={expected!r} (not an upper-case level name or a number)"
        return level == report.value, ""
    if name == "NCCL_P2P_DISABLE" and report.value == "LOC":
        # ncclGetLevel reads the *_DISABLE switch with strtol into a C int and compares it with 1.
        return strtoll0(expected).consumed != "" and strtol_int(expected) == 1, ""
    if re.fullmatch(r"-?[0-9]{1,19}", report.value):
        value, whole = _strtoll(expected)
        if value is None:
            return False, ""
        if value == int(report.value):
            if whole:
                return True, ""
            return False, (
                f"NCCL parsed {expected!r} as {value} (strtoll stops at the first "
                "non-digit: no unit suffixes)"
            )
    return False, ""


def _norm_audit(audit_by_pid: Mapping[Any, Mapping[str, Any]]) -> dict[int, dict[str, str]]:
    out: dict[int, dict[str, str]] = {}
    for pid, env in audit_by_pid.items():
        try:
            key = int(pid)
        except (TypeError, ValueError):
            continue
        out[key] = {str(k): str(v) for k, v in env.items()}
    return out


def compare(
    logs: Iterable[NcclProcessLog],
    expected_env: Mapping[str, Any],
    audit_by_pid: Mapping[Any, Mapping[str, Any]] | None = None,
    expected_by_pid: Mapping[Any, Mapping[str, Any]] | None = None,
) -> list[Disagreement]:
    """Disagreements between NCCL's own reports, the expected env and the plugin audit.

    Per process: ``different`` (NCCL reported another value; numbers are compared the way NCCL
    parses them, level names through NCCL's legacy digit mapping), ``not_reported`` (softer:
    NCCL prints a variable only where and when it reads it), ``unverifiable`` (NCCL never
    prints it). With ``audit_by_pid`` (pid -> {NCCL_X: value} recorded by the plugin):
    ``not_in_audit`` (NCCL read it, the audit of that pid lacks it), ``audit_mismatch`` and
    ``process_not_audited``. ``expected_by_pid`` (pid -> expected env) replaces ``expected_env``
    for the processes it names (the profile in force in that process, per-node values included).
    """
    default_expected = {str(k): str(v) for k, v in expected_env.items()}
    per_pid = {int(k): {str(n): str(v) for n, v in e.items()} for k, e in (expected_by_pid or {}).items()}
    audit = _norm_audit(audit_by_pid) if audit_by_pid is not None else None
    out: list[Disagreement] = []
    for log in sorted(logs, key=lambda lg: (lg.host, lg.pid)):
        expected = per_pid.get(log.pid, default_expected)
        for name, want in sorted(expected.items()):
            if name in _UNOBSERVABLE:
                out.append(
                    Disagreement(
                        "unverifiable",
                        log.host,
                        log.pid,
                        name,
                        expected=want,
                        detail="NCCL reads it without logging its value",
                    )
                )
                continue
            reports = [r for r in log.env_reports if r.name == name]
            if not reports:
                hint = _HINTS.get(name, _GENERIC_HINT)
                if not any(c.started or c.completed for c in log.comms):
                    hint += "; no communicator init was logged by this process"
                out.append(Disagreement("not_reported", log.host, log.pid, name, expected=want, detail=hint))
                continue
            seen: set[tuple[str, str | None]] = set()
            for r in reports:
                ok, why = _agree(name, want, r)
                if ok or (r.value, r.comm) in seen:
                    continue
                seen.add((r.value, r.comm))
                detail = why or f"line {r.line_no} ({r.source})"
                out.append(
                    Disagreement(
                        "different",
                        log.host,
                        log.pid,
                        name,
                        expected=want,
                        reported=r.value,
                        comm=r.comm,
                        detail=detail,
                    )
                )
        if audit is None:
            continue
        recorded = audit.get(log.pid)
        if recorded is None:
            if log.env_reports:
                out.append(
                    Disagreement(
                        "process_not_audited",
                        log.host,
                        log.pid,
                        None,
                        detail="NCCL logged variables in a pid absent from the audit",
                    )
                )
            continue
        done: set[str] = set()
        for r in log.env_reports:
            if r.name in done:
                continue
            done.add(r.name)
            if r.name not in recorded:
                out.append(
                    Disagreement(
                        "not_in_audit",
                        log.host,
                        log.pid,
                        r.name,
                        reported=r.value,
                        detail=f"reported at line {r.line_no} ({r.source})",
                    )
                )
                continue
            ok, why = _agree(r.name, recorded[r.name], r)
            if not ok:
                out.append(
                    Disagreement(
                        "audit_mismatch",
                        log.host,
                        log.pid,
                        r.name,
                        reported=r.value,
                        audit=recorded[r.name],
                        comm=r.comm,
                        detail=why,
                    )
                )
    return out


def format_text(disagreements: Iterable[Disagreement], logs: Iterable[NcclProcessLog] | None = None) -> str:
    """Human-readable report: one line per process (if ``logs``), then one per disagreement."""
    lines: list[str] = []
    for log in logs or ():
        inits = [c for c in log.comms if c.completed]
        lines.append(
            f"{log.host}:{log.pid} NCCL {log.version or '?'}: {len(log.comms)} comm init(s) "
            f"({len(inits)} complete), {len(log.env)} variable(s) reported, "
            f"{len(log.warnings)} WARN"
        )
    items = list(disagreements)
    if not items:
        lines.append("no disagreement")
    for d in items:
        where = f"{d.host}:{d.pid}" + (f" comm {d.comm}" if d.comm else "")
        parts = [f"[{d.severity}] {d.kind}", where]
        if d.name:
            parts.append(d.name)
        values = []
        if d.expected is not None:
            values.append(f"expected={d.expected!r}")
        if d.reported is not None:
            values.append(f"nccl={d.reported!r}")
        if d.audit is not None:
            values.append(f"audit={d.audit!r}")
        if values:
            parts.append(" ".join(values))
        if d.detail:
            parts.append(f"({d.detail})")
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"
