"""Reading a launch's audit records and judging them (pure, apart from reading the files).

Verdicts per process and per communicator:

- ``ok``   (✓) the profile's values were in force;
- ``fail`` (✗) a profile variable was missing or different, a required hook was not installed,
  ranks disagreed, or an expected scheduler process left no audit file;
- ``warn`` (⚠) in force but with a caveat the operator must know about: a process-cached variable
  changed after the first communicator of its process (NCCL keeps the first value), a per-group
  override that cannot reach torch's lazily created communicator, SGLang's value kept by policy.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sglang_eagle_nccl.audit.records import (
    CannotJudge,
    Unreadable,
    entry_kind,
    is_record_file_name,
    list_entries,
    pid_from_file_name,
    read_meta,
    read_record_file,
)
from sglang_eagle_nccl.audit.writer import FILE_PREFIX, FILE_SUFFIX, LAUNCH_META

__all__ = ["CannotJudge", "Unreadable"]

Verdict = Literal["ok", "warn", "fail"]
MARK = {"ok": "✓", "warn": "⚠", "fail": "✗"}
_ORDER = {"ok": 0, "warn": 1, "fail": 2}


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    result: Verdict = "ok"
    for v in verdicts:
        if _ORDER[v] > _ORDER[result]:
            result = v
    return result


@dataclass
class ProcessRecords:
    file: str
    pid: int
    records: list[dict[str, Any]]
    bad_lines: int = 0

    @property
    def role(self) -> str:
        role = "process"
        for r in self.records:
            if r.get("event") == "process_role":
                role = r["title"].removeprefix("sglang::")
            elif r.get("event") == "scheduler_start" and role in ("process", "child"):
                role = "scheduler"
            elif r.get("event") == "process_start" and role == "process":
                role = r.get("role", role)
        return role

    def events(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("event") == name]

    def first(self, name: str) -> dict[str, Any] | None:
        found = self.events(name)
        return found[0] if found else None


def _holds_records(entries: list[Any]) -> bool:
    return any(is_record_file_name(e.name) or e.name == LAUNCH_META for e in entries)


def find_launch_dir(path: str | Path) -> Path:
    """``path`` itself if it holds process files, else its newest launch sub-directory.

    Only real directories are considered (a symlinked launch sub-directory is skipped, as it
    may lead anywhere); raises :class:`CannotJudge` when there is no launch to judge.
    """
    p = Path(path)
    try:
        st = os.stat(p)  # the path the user named may be a symlink to their audit root
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise CannotJudge(
            f"audit directory {p} cannot be used: {reason}. Fix: give the launch directory printed at start, "
            "or its audit root"
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise CannotJudge(f"audit path {p} is not a directory. Fix: give the launch directory printed at start, or its audit root")
    entries = list_entries(p)
    if _holds_records(entries):
        return p
    launches: list[tuple[float, str, Path]] = []
    for entry in entries:
        if entry_kind(entry) != "dir":
            continue
        try:
            inner = list_entries(Path(entry.path))
            mtime = entry.stat(follow_symlinks=False).st_mtime
        except (CannotJudge, OSError):
            continue
        if _holds_records(inner):
            launches.append((mtime, entry.name, Path(entry.path)))
    if not launches:
        raise CannotJudge(
            f"no audit records under {p} (expected {FILE_PREFIX}*{FILE_SUFFIX} files or launch sub-directories). "
            "Fix: give the launch directory printed at start, or the --audit-dir root it was created under"
        )
    return max(launches)[2]


@dataclass
class LaunchRecords:
    """What a launch directory holds: its launch.json, the valid records per process, and the rest."""

    meta: dict[str, Any]
    processes: list[ProcessRecords]
    unreadable: list[Unreadable] = field(default_factory=list)


def read_launch_records(run_dir: str | Path) -> LaunchRecords:
    """Read a launch directory as hostile input (see :mod:`sglang_eagle_nccl.audit.records`).

    Files that are not regular (symlinks, FIFOs, devices), too large, or not readable are
    listed as unreadable and not opened; lines that are not valid records are listed with
    their line number and left out. Raises :class:`CannotJudge` when the directory cannot be
    listed, or when it held record files and not one valid record could be read from them.
    """
    run = Path(run_dir)
    meta, unreadable = read_meta(run)
    processes: list[ProcessRecords] = []
    record_files = 0
    for entry in list_entries(run):
        if not is_record_file_name(entry.name):
            continue
        record_files += 1
        records, bad = read_record_file(Path(entry.path))
        unreadable += bad
        if records is None:
            continue
        pid = records[0]["pid"] if records else pid_from_file_name(entry.name)
        processes.append(ProcessRecords(entry.name, pid if pid is not None else 0, records, len(bad)))
    if not any(p.records for p in processes) and (record_files or unreadable):
        lines = "; ".join(u.text() for u in unreadable[:5]) + ("; ..." if len(unreadable) > 5 else "")
        raise CannotJudge(
            f"no valid audit record could be read in {run} ({lines}). Fix: audit the launch directory the plugin "
            "wrote; its files may have been replaced or damaged"
        )
    return LaunchRecords(meta, processes, unreadable)


def read_launch(run_dir: str | Path) -> tuple[dict[str, Any], list[ProcessRecords]]:
    """(launch.json, valid records per process); see :func:`read_launch_records` for the rest."""
    launch = read_launch_records(run_dir)
    return launch.meta, launch.processes


@dataclass
class CommVerdict:
    pid: int
    role: str
    kind: str  # "group" (GroupCoordinator: torch device group) or "pynccl"
    group: str
    unique_name: str | None
    ranks: list[int]
    rank: int | None
    backend: str | None
    verdict: Verdict
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ProcessVerdict:
    pid: int
    role: str
    file: str
    verdict: Verdict
    notes: list[str] = field(default_factory=list)
    patch_set: str | None = None
    sglang_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Report:
    run_dir: str
    profile: str | None
    verdict: Verdict
    processes: list[ProcessVerdict]
    communicators: list[CommVerdict]
    eagle: list[dict[str, Any]]
    sglang_writes: list[dict[str, Any]]
    problems: list[str]
    # Files and lines of the launch directory that were not judged, and why (audit.records).
    unreadable: list[Unreadable] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_dir": self.run_dir,
            "profile": self.profile,
            "verdict": self.verdict,
            "processes": [p.to_dict() for p in self.processes],
            "communicators": [c.to_dict() for c in self.communicators],
            "eagle": self.eagle,
            "sglang_writes": self.sglang_writes,
            "problems": self.problems,
            "unreadable": [u.to_dict() for u in self.unreadable],
        }


def _differences(expected: Mapping[str, str], actual: Mapping[str, str], skip: Iterable[str] = ()) -> list[str]:
    skip = set(skip)
    out = []
    for name, value in sorted(expected.items()):
        if name in skip:
            continue
        got = actual.get(name)
        if got is None:
            out.append(f"{name} missing (profile: {value})")
        elif got != value:
            out.append(f"{name}={got} (profile: {value})")
    return out


def _process_cached(name: str) -> bool:
    from sglang_eagle_nccl.nccl.variables import scope_of

    return scope_of(name) == "process"


def judge(meta: Mapping[str, Any], processes: list[ProcessRecords], run_dir: str = "") -> Report:
    profile = meta.get("profile", {}) if meta else {}
    policy = profile.get("policy", {}) if profile else {}
    keep = set(policy.get("sglang_wins", []))
    group_envs: dict[str, dict[str, str]] = profile.get("groups", {}) if profile else {}
    problems: list[str] = []
    pverdicts: list[ProcessVerdict] = []
    comms: list[CommVerdict] = []
    eagle: list[dict[str, Any]] = []
    sglang_writes: list[dict[str, Any]] = []
    expected_schedulers: int | None = None

    for proc in processes:
        role = proc.role
        notes: list[str] = []
        verdicts: list[Verdict] = []
        start = proc.first("process_start")
        patch = proc.first("patch_set")
        if proc.bad_lines:
            notes.append(f"{proc.bad_lines} unreadable line(s) in {proc.file}")
            verdicts.append("warn")
        if start is None:
            notes.append("no process_start record")
            verdicts.append("fail")
            expected_env: dict[str, str] = {}
        else:
            expected_env = dict(start.get("expected_env", {}))
        # The environment the process runs with once the plugin is done with it.
        final_env = None
        for event in ("env_restored", "scheduler_start", "profile_replaced", "process_start"):
            rec = proc.events(event)
            if rec:
                final_env = rec[-1].get("env")
                if event == "profile_replaced":
                    expected_env = {k: v for k, v in expected_env.items()}
                break
        if final_env is not None and expected_env:
            diffs = _differences(expected_env, final_env, skip=keep)
            if diffs:
                verdicts.append("fail")
                notes.append("profile not in force: " + "; ".join(diffs))
        for rec in proc.events("sglang_env_writes"):
            if rec.get("writes"):
                sglang_writes.extend(rec["writes"])
            flags = rec.get("server_flags", {})
            tp, dp, pp, nnodes = (flags.get(k) for k in ("tp_size", "dp_size", "pp_size", "nnodes"))
            if isinstance(tp, int):
                total = tp * (dp if isinstance(dp, int) and dp > 0 else 1) * (pp if isinstance(pp, int) and pp > 0 else 1)
                # Each node's launcher spawns (and audits) only its own share of the ranks.
                expected_schedulers = max(1, total // (nnodes if isinstance(nnodes, int) and nnodes > 0 else 1))
        for rec in proc.events("env_restored"):
            for o in rec.get("overwrites", []):
                if o.get("restored"):
                    notes.append(f"SGLang wrote {o['name']}={o.get('foreign_value')}; restored {o['profile_value']}")
                else:
                    notes.append(f"kept SGLang's {o['name']}={o.get('foreign_value')} (policy sglang_wins; profile {o['profile_value']})")
                    verdicts.append("warn")
        for rec in proc.events("hook_uncovered"):
            sev: Verdict = "fail" if rec.get("required") else "warn"
            verdicts.append(sev)
            notes.append(f"hook not installed: {rec['target']} ({rec.get('reason')})")
        for rec in proc.events("plugin_error"):
            verdicts.append("warn")
            notes.append(f"plugin error in {rec.get('handler')}: {rec.get('error')}")
        for rec in proc.events("consistency_mismatch") + proc.events("consistency_failed"):
            verdicts.append("fail")
            detail = rec.get("error") or "; ".join(
                f"{m['variable']}: " + ", ".join(f"rank {r}={v}" for r, v in m["values_by_rank"].items())
                for m in rec.get("mismatches", [])
            )
            notes.append(f"ranks disagree in group '{rec.get('group')}': {detail}")
        if patch and patch.get("uncovered"):
            for u in patch["uncovered"]:
                verdicts.append("warn")
                notes.append(f"uncovered (allow_partial): {u.get('target')}")

        # Communicators of this process.
        first_env: dict[str, str] | None = None
        for rec in proc.records:
            event = rec.get("event")
            if event not in ("group_created", "pynccl_created"):
                continue
            env = rec.get("env", {})
            group = rec.get("group", "?")
            cnotes: list[str] = []
            cverdicts: list[Verdict] = []
            process_env = rec.get("process_env", expected_env)
            overrides = dict(rec.get("group_overrides") or group_envs.get(group, {}))
            if event == "pynccl_created":
                expected = {**process_env, **overrides}
                kind = "pynccl"
                if not rec.get("available", False):
                    cnotes.append("PyNccl library not available here (no GPU / no libnccl): communicator not created")
            else:
                expected = {**process_env, **overrides}
                kind = "group"
                if rec.get("torch_comm") == "lazy-nccl":
                    cnotes.append("torch NCCL communicator is created lazily at the first collective")
                    if overrides:
                        cverdicts.append("warn")
                        cnotes.append(
                            "per-group override " + ", ".join(f"{k}={v}" for k, v in overrides.items())
                            + " is in force only for the eager PyNccl communicator; torch's lazy one uses the process environment"
                        )
                else:
                    cnotes.append(f"device group backend {rec.get('device_group_backend') or rec.get('backend')} (no NCCL communicator)")
            diffs = _differences(expected, env, skip=keep)
            if diffs:
                cverdicts.append("fail")
                cnotes.append("missing/different: " + "; ".join(diffs))
            if first_env is None:
                first_env = env
            else:
                changed = [
                    f"{k}: {first_env.get(k)} -> {env.get(k)}"
                    for k in sorted(set(first_env) | set(env))
                    if first_env.get(k) != env.get(k) and _process_cached(k) and k not in overrides
                ]
                if changed:
                    cverdicts.append("warn")
                    cnotes.append(
                        "process-cached variable changed after the first NCCL communicator of this process "
                        "(NCCL keeps the first value): " + "; ".join(changed)
                    )
            comms.append(
                CommVerdict(
                    pid=proc.pid,
                    role=role,
                    kind=kind,
                    group=group,
                    unique_name=rec.get("unique_name"),
                    ranks=list(rec.get("ranks", [])),
                    rank=rec.get("global_rank", rec.get("rank")),
                    backend=rec.get("device_group_backend") or rec.get("backend"),
                    verdict=worst(cverdicts),
                    notes=cnotes,
                )
            )
        for rec in proc.events("eagle_groups"):
            eagle.append({"pid": proc.pid, **{k: rec.get(k) for k in ("worker", "draft", "verify", "current_tp")}})
        pverdicts.append(
            ProcessVerdict(
                pid=proc.pid,
                role=role,
                file=proc.file,
                verdict=worst(verdicts),
                notes=notes,
                patch_set=patch.get("patch_set") if patch else None,
                sglang_version=patch.get("sglang_version") if patch else None,
            )
        )

    schedulers = [p for p in pverdicts if p.role.startswith("scheduler")]
    rank_processes = [p for p in pverdicts if p.role.startswith(("scheduler", "preflight"))]
    if expected_schedulers is not None and len(schedulers) < expected_schedulers:
        problems.append(
            f"expected {expected_schedulers} scheduler process(es) on this node (tp x dp x pp / nnodes), found audit records from "
            f"{len(schedulers)}: a process ran without the plugin"
        )
    for p in rank_processes:
        stopped = any("ranks disagree" in n for n in p.notes)
        if not stopped and not any(c.pid == p.pid for c in comms):
            problems.append(f"{p.role} pid {p.pid} recorded no communicator (group hooks not installed?)")
    for p in pverdicts:
        if p.verdict == "fail":
            problems.append(f"{p.role} pid {p.pid}: " + "; ".join(n for n in p.notes if n))
    for c in comms:
        if c.verdict == "fail":
            problems.append(f"{c.role} pid {c.pid} {c.kind} '{c.group}': " + "; ".join(c.notes))
    verdict = worst([p.verdict for p in pverdicts] + [c.verdict for c in comms] + (["fail"] if problems else []))
    if not processes:
        verdict = "fail"
        problems.append("no audit records found")
    return Report(
        run_dir=run_dir,
        profile=profile.get("name") if profile else None,
        verdict=verdict,
        processes=pverdicts,
        communicators=comms,
        eagle=eagle,
        sglang_writes=sglang_writes,
        problems=problems,
    )


def load_report(path: str | Path) -> Report:
    """Find the launch under ``path``, read it and judge it; CannotJudge when there is nothing to judge."""
    run = find_launch_dir(path)
    launch = read_launch_records(run)
    report = judge(launch.meta, launch.processes, str(run))
    report.unreadable = list(launch.unreadable)
    if report.unreadable and report.verdict == "ok":
        # Something in the launch was not judged (a planted symlink, a corrupt line): the
        # verdict cannot be an unqualified pass.
        report.verdict = "warn"
    return report


def format_text(report: Report) -> str:
    lines = [f"Audit of {report.run_dir}", f"Profile: {report.profile or '(unknown)'}", ""]
    lines.append("Processes")
    lines.append(f"  {'':2}{'role':<26}{'pid':>8}  {'patch set':<22} notes")
    for p in sorted(report.processes, key=lambda x: (x.role != "launcher", x.role, x.pid)):
        note = "; ".join(p.notes) if p.notes else ""
        lines.append(f"  {MARK[p.verdict]} {p.role:<26}{p.pid:>8}  {(p.patch_set or '-'):<22} {note}")
    lines.append("")
    lines.append("Communicators")
    if not report.communicators:
        lines.append("  (none recorded)")
    for c in sorted(report.communicators, key=lambda x: (x.pid, x.group, x.kind)):
        name = c.unique_name or c.group
        lines.append(
            f"  {MARK[c.verdict]} {c.role:<14}{c.pid:>8}  {c.kind:<6} {name:<20} ranks {c.ranks} "
            f"{'backend ' + c.backend if c.backend else ''}"
        )
        for n in c.notes:
            lines.append(f"        {n}")
    if report.eagle:
        lines.append("")
        lines.append("EAGLE speculative decoding (no new groups: draft and verify reuse these)")
        for e in report.eagle:
            draft = sorted({n for g in (e.get("draft") or {}).values() if (n := g.get("unique_name") or g.get("group"))})
            verify = sorted({n for g in (e.get("verify") or {}).values() if (n := g.get("unique_name") or g.get("group"))})
            lines.append(f"  pid {e['pid']} {e.get('worker')}: draft on {', '.join(draft) or '?'}; verify on {', '.join(verify) or '?'}")
    if report.sglang_writes:
        lines.append("")
        lines.append("SGLang's own NCCL writes (launcher)")
        for w in report.sglang_writes:
            lines.append(f"  {w['name']}: {w.get('before')} -> {w.get('after')}")
    if report.unreadable:
        lines.append("")
        lines.append("Not judged (unreadable files and lines)")
        shown = report.unreadable[:20]
        lines += [f"  ⚠ {u.text()}" for u in shown]
        if len(report.unreadable) > len(shown):
            lines.append(f"  ... and {len(report.unreadable) - len(shown)} more (--json lists all)")
    lines.append("")
    if report.problems:
        lines.append("Problems")
        lines += [f"  ✗ {p}" for p in report.problems]
        lines.append("")
    lines.append(
        f"Verdict: {MARK[report.verdict]} "
        + {"ok": "the profile is in force in every audited process and communicator",
           "warn": "in force, with warnings above",
           "fail": "the profile is NOT in force everywhere (see above)"}[report.verdict]
    )
    return "\n".join(lines)


def problems_for_analyze(report: Report) -> list[str]:
    """Short findings for ``analyze`` (e.g. 'NCCL profile not in force on rank 3')."""
    out = []
    for c in report.communicators:
        if c.verdict == "fail":
            out.append(f"NCCL profile not in force on rank {c.rank} (group {c.group}, pid {c.pid})")
    for p in report.processes:
        if p.verdict == "fail":
            out.append(f"NCCL profile not in force in {p.role} pid {p.pid}")
    out += [p for p in report.problems if "expected" in p]
    return out
