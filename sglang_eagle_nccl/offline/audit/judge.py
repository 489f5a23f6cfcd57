"""Judging a launch's audit records, and showing the verdict (pure, apart from reading the files).

Marks, per process and per communicator:

- ✓ ``ok``     checked, and the profile was in force;
- ✗ ``fail``   checked, and it was not (a variable missing or different, a required hook not
  installed, ranks that disagreed, an expected scheduler without records);
- ⚠ ``warn``   in force with a caveat the operator must know (a process-cached variable changed
  after the first communicator, a per-group override that cannot reach torch's lazy communicator,
  SGLang's value kept by policy);
- – ``absent`` nothing to check: the thing does not exist (a PyNccl communicator that was not
  created, a device group that is not NCCL). Never a ✓, never a failure.

Every record is judged against the profile *in force for that process at that moment*
(:func:`expectations`): a process's ``process_start`` sets the expected environment, and each
``profile_changed`` (launch flags, a node rank learned late) replaces it from then on.

A launch passes only when something real was audited: an SGLang rank, a communicator, or NCCL's
own reads. A directory where only helper processes ran (``pip``, the plugin's CLI) is not a pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sglang_eagle_nccl.offline.audit.read import (
    ProcessRecords,
    Unreadable,
    find_launch_dir,
    read_launch_records,
)

Verdict = Literal["ok", "warn", "fail", "absent"]
MARK = {"ok": "✓", "warn": "⚠", "fail": "✗", "absent": "–"}
_ORDER = {"absent": -1, "ok": 0, "warn": 1, "fail": 2}
UNSET = "(unset)"


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    result: Verdict = "ok"
    for v in verdicts:
        if _ORDER[v] > _ORDER[result]:
            result = v
    return result


def shown(value: Any) -> str:
    """A value as NCCL users write it: ``(unset)`` for a missing variable."""
    return UNSET if value is None else str(value)


# --- the profile in force ---------------------------------------------------------------------


@dataclass(frozen=True)
class Expectation:
    """What one process had to hold from one record on."""

    env: Mapping[str, str]
    groups: Mapping[str, Mapping[str, str]]
    keep: frozenset[str]
    profile: str | None
    since: str  # the event that set it

    def for_group(self, group: str, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(self.env)
        env.update(self.groups.get(group, {}) if overrides is None else overrides)
        return env


def expectations(records: Iterable[Mapping[str, Any]], launch_profile: Mapping[str, Any] | None = None
                 ) -> Iterator[tuple[Mapping[str, Any], Expectation | None]]:
    """Each record with the expectation in force when it was written (None before the first one).

    The one helper every judgement uses, so that a record is never compared with a profile that
    was replaced before it (or not yet in force when it was written).
    """
    fallback_groups = (launch_profile or {}).get("groups", {}) if isinstance(launch_profile, Mapping) else {}
    current: Expectation | None = None
    for rec in records:
        if rec.get("event") in ("process_start", "profile_changed") and isinstance(rec.get("expected_env"), dict):
            groups = rec.get("group_envs")
            current = Expectation(
                env=dict(rec["expected_env"]),
                groups=dict(groups) if isinstance(groups, dict) else dict(fallback_groups),
                keep=frozenset(rec.get("sglang_wins") or ()),
                profile=rec.get("profile"),
                since=str(rec.get("event")),
            )
        yield rec, current


def differences(expected: Mapping[str, str], actual: Mapping[str, str], skip: Iterable[str] = ()) -> list[str]:
    skip = set(skip)
    out = []
    for name, value in sorted(expected.items()):
        if name in skip:
            continue
        got = actual.get(name)
        if got != value:
            out.append(f"{name}={shown(got)} (profile: {value})")
    return out


def _process_cached(name: str) -> bool:
    from sglang_eagle_nccl.knowledge.nccl.variables import scope_of

    return scope_of(name) == "process"


# --- results ------------------------------------------------------------------------------------


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
    loaded_sglang: bool = False
    sglang_rank: bool = False

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
    picked: str | None = None  # how the launch was chosen from a root directory
    # Files and lines of the launch directory that were not judged, and why (audit.records).
    unreadable: list[Unreadable] = field(default_factory=list)
    # pid -> what NCCL itself read in that process (native env plugin), with its verdict
    nccl_reads: dict[int, dict[str, Any]] = field(default_factory=dict)
    # group -> all-reduce paths SGLang enabled (first rank that recorded them)
    allreduce_paths: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "fail" else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_dir": self.run_dir,
            "picked": self.picked,
            "profile": self.profile,
            "verdict": self.verdict,
            "processes": [p.to_dict() for p in self.processes],
            "communicators": [c.to_dict() for c in self.communicators],
            "eagle": self.eagle,
            "sglang_writes": self.sglang_writes,
            "problems": self.problems,
            "unreadable": [u.to_dict() for u in self.unreadable],
            "nccl_reads": {str(pid): r for pid, r in sorted(self.nccl_reads.items())},
            "allreduce_paths": self.allreduce_paths,
        }


# --- judging ------------------------------------------------------------------------------------

ENV_EVENTS = ("process_start", "profile_changed", "scheduler_start", "env_restored")


def _judge_communicator(proc: ProcessRecords, role: str, rec: Mapping[str, Any], exp: Expectation | None,
                        first_env: dict[str, str] | None, group_rules: frozenset[str] = frozenset()) -> CommVerdict:
    event = rec.get("event")
    env = rec.get("env") if isinstance(rec.get("env"), dict) else {}
    group = str(rec.get("group", "?"))
    notes: list[str] = []
    verdicts: list[Verdict] = []
    overrides = rec.get("group_overrides") if isinstance(rec.get("group_overrides"), dict) else None
    expected = exp.for_group(group, overrides) if exp is not None else None
    keep = exp.keep if exp is not None else frozenset()
    absent = False
    if event == "pynccl_created":
        kind = "pynccl"
        if not rec.get("available", False):
            absent = True
            notes.append("not created: PyNccl's library is unavailable here (no GPU / no libnccl)")
    else:
        kind = "group"
        if rec.get("torch_comm") == "lazy-nccl":
            notes.append("torch NCCL communicator is created lazily at the first collective, with the process environment")
            if overrides or (exp is not None and exp.groups.get(group)):
                verdicts.append("warn")
                ov = overrides if overrides is not None else exp.groups.get(group, {})  # type: ignore[union-attr]
                notes.append(
                    "per-group override " + ", ".join(f"{k}={v}" for k, v in ov.items())
                    + " reaches only the eager PyNccl communicator; torch's lazy one uses the process environment"
                )
            if group in group_rules:
                verdicts.append("warn")
                notes.append(
                    f"tuner rules for group '{group}' reach only the eager PyNccl communicator (labelled while the group "
                    "was built); torch's lazy one carries no label and gets size/rank rules only"
                )
        else:
            absent = True
            backend = rec.get("device_group_backend") or rec.get("backend")
            notes.append(f"device group backend {backend or '?'}: no NCCL communicator")
    if absent:
        pass  # nothing NCCL reads was created: the process-level records carry the environment
    elif expected is None:
        verdicts.append("fail")
        notes.append("no profile in force when it was created (no process_start record before it)")
    else:
        diffs = differences(expected, env, skip=keep)
        if diffs:
            verdicts.append("fail")
            notes.append("missing/different: " + "; ".join(diffs))
    if first_env is not None and not absent:
        changed = [
            f"{k}: {shown(first_env.get(k))} -> {shown(env.get(k))}"
            for k in sorted(set(first_env) | set(env))
            if first_env.get(k) != env.get(k) and _process_cached(k) and k not in (overrides or {})
        ]
        if changed:
            verdicts.append("warn")
            notes.append(
                "process-cached variable changed after the first NCCL communicator of this process "
                "(NCCL keeps the first value): " + "; ".join(changed)
            )
    verdict: Verdict = worst(verdicts)
    if absent and verdict == "ok":
        verdict = "absent"
    return CommVerdict(
        pid=proc.pid,
        role=role,
        kind=kind,
        group=group,
        unique_name=rec.get("unique_name"),
        ranks=[r for r in rec.get("ranks", []) if isinstance(r, int)] if isinstance(rec.get("ranks"), list) else [],
        rank=rec.get("global_rank", rec.get("rank")),
        backend=rec.get("device_group_backend") or rec.get("backend"),
        verdict=verdict,
        notes=notes,
    )


def judge(meta: Mapping[str, Any], processes: list[ProcessRecords], run_dir: str = "",
          reads: Mapping[int, Any] | None = None) -> Report:
    launch_profile = meta.get("profile") if isinstance(meta, Mapping) and isinstance(meta.get("profile"), dict) else {}
    problems: list[str] = []
    pverdicts: list[ProcessVerdict] = []
    comms: list[CommVerdict] = []
    eagle: list[dict[str, Any]] = []
    sglang_writes: list[dict[str, Any]] = []
    expected_schedulers: int | None = None
    expected_where = "on this node"
    reads = reads or {}
    rules = launch_profile.get("tuner_rules") if isinstance(launch_profile.get("tuner_rules"), list) else []
    group_rules = frozenset(str(r["group"]) for r in rules if isinstance(r, dict) and r.get("group"))
    nccl_reads: dict[int, dict[str, Any]] = {}
    paths: dict[str, dict[str, Any]] = {}

    for proc in processes:
        role = proc.role
        notes: list[str] = []
        verdicts: list[Verdict] = []
        patch = proc.first("patch_set")
        if proc.bad_lines:
            notes.append(f"{proc.bad_lines} unreadable line(s) in {proc.file}")
            verdicts.append("warn")
        if proc.first("process_start") is None:
            notes.append("no process_start record")
            verdicts.append("fail")
        first_env: dict[str, str] | None = None
        last_exp: Expectation | None = None
        for rec, exp in expectations(proc.records, launch_profile):
            last_exp = exp
            if rec.get("event") == "group_created" and isinstance(rec.get("allreduce_paths"), dict):
                paths.setdefault(str(rec.get("group")), rec["allreduce_paths"])
            event = rec.get("event")
            if event in ENV_EVENTS and isinstance(rec.get("env"), dict) and exp is not None:
                diffs = differences(exp.env, rec["env"], skip=exp.keep)
                if diffs:
                    verdicts.append("fail")
                    notes.append(f"profile not in force at {event}: " + "; ".join(diffs))
            elif event in ("group_created", "pynccl_created"):
                comm = _judge_communicator(proc, role, rec, exp, first_env, group_rules)
                if comm.verdict == "absent" and exp is not None and isinstance(rec.get("env"), dict):
                    # No NCCL communicator to judge, but the process still had to hold the profile
                    # when it built the group: a difference there is the process's failure.
                    ov = rec.get("group_overrides") if isinstance(rec.get("group_overrides"), dict) else None
                    diffs = differences(exp.for_group(comm.group, ov), rec["env"], skip=exp.keep)
                    if diffs:
                        verdicts.append("fail")
                        notes.append(f"profile not in force when {comm.kind} '{comm.group}' was created: " + "; ".join(diffs))
                if comm.verdict != "absent" and first_env is None and isinstance(rec.get("env"), dict):
                    first_env = dict(rec["env"])
                comms.append(comm)
        for rec in proc.events("sglang_env_writes"):
            for w in rec.get("writes") or []:
                sglang_writes.append({**w, "where": rec.get("where", "_set_envs_and_config"), "pid": proc.pid})
            flags = rec.get("server_flags") or {}
            tp, dp, pp, nnodes = (flags.get(k) for k in ("tp_size", "dp_size", "pp_size", "nnodes"))
            if isinstance(tp, int) and rec.get("where", "_set_envs_and_config") == "_set_envs_and_config":
                total = tp * (dp if isinstance(dp, int) and dp > 0 else 1) * (pp if isinstance(pp, int) and pp > 0 else 1)
                # Each node's launcher spawns (and audits) only its own share of the ranks; a Ray driver
                # starts every rank of every node as an actor, all of them joining its launch.
                on_ray = flags.get("use_ray") is True or bool(proc.events("ray_actor_env"))
                share = nnodes if isinstance(nnodes, int) and nnodes > 0 and not on_ray else 1
                expected_schedulers = max(1, total // share)
                expected_where = "in this launch (the Ray driver starts every rank)" if on_ray else "on this node"
        for rec in proc.events("env_restored"):
            for o in rec.get("overwrites") or []:
                if o.get("restored"):
                    notes.append(f"SGLang wrote {o['name']}={shown(o.get('foreign_value'))}; restored {o['profile_value']}")
                else:
                    notes.append(f"kept SGLang's {o['name']}={shown(o.get('foreign_value'))} (policy sglang_wins; profile {o['profile_value']})")
                    verdicts.append("warn")
        for rec in proc.events("correctness_conflict"):
            verdicts.append("fail")
            notes.append("refused: " + (str(rec.get("message", "")).splitlines() or [""])[0])
        for rec in proc.events("ray_refused"):
            verdicts.append("fail")
            notes.append("refused to start Ray actors: " + (str(rec.get("error", "")).splitlines() or [""])[0])
        for rec in proc.events("ray_actor_env"):
            for r in rec.get("replaced_user_values") or []:
                notes.append(f"Ray actor {rec.get('actor')}: runtime_env {r.get('name')}={shown(r.get('user_value'))} "
                             f"replaced by {shown(r.get('value'))} (the profile's precedence)")
        for rec in proc.events("hook_uncovered"):
            sev: Verdict = "fail" if rec.get("required") else "warn"
            verdicts.append(sev)
            notes.append(f"hook not installed: {rec.get('target')} ({rec.get('reason')})")
        for rec in proc.events("plugin_error"):
            verdicts.append("warn")
            notes.append(f"plugin error in {rec.get('handler')}: {rec.get('error')}")
        for rec in proc.events("audit_error"):
            verdicts.append("warn")
            notes.append(f"an audit record could not be encoded ({rec.get('lost_event')}: {rec.get('error')})")
        for rec in proc.events("consistency_mismatch") + proc.events("consistency_failed"):
            mode = rec.get("mode", "error")
            verdicts.append("fail" if mode in ("error", None) else "warn")
            detail = rec.get("error") or "; ".join(
                f"{m.get('variable')}: " + ", ".join(f"rank {r}={shown(v)}" for r, v in (m.get("values_by_rank") or {}).items())
                for m in rec.get("mismatches") or []
            )
            notes.append(f"ranks disagree in group '{rec.get('group')}' (consistency={mode}): {detail}")
        if patch and patch.get("uncovered"):
            for u in patch["uncovered"]:
                verdicts.append("warn")
                notes.append(f"uncovered (allow_partial): {u.get('target')}")
        if proc.pid in reads:
            from sglang_eagle_nccl.offline.audit.nccl_reads import judge_reads

            got = reads[proc.pid]
            rv = judge_reads(got, last_exp.env if last_exp else {}, last_exp.groups if last_exp else {},
                             last_exp.keep if last_exp else ())
            verdicts.append(rv.verdict)  # type: ignore[arg-type]
            if rv.verdict != "absent":  # "nothing read" is said once, in the reads section
                notes += [f"NCCL's own reads: {n}" for n in rv.notes]
            nccl_reads[proc.pid] = {**got.to_dict(), "verdict": rv.verdict, "notes": rv.notes}
        for rec in proc.events("eagle_groups"):
            eagle.append({"pid": proc.pid, **{k: rec.get(k) for k in ("worker", "draft", "verify", "draft_note")}})
        sglang_rank = role.startswith(("scheduler", "preflight")) or bool(proc.events("scheduler_start"))
        pverdicts.append(
            ProcessVerdict(
                pid=proc.pid,
                role=role,
                file=proc.file,
                verdict=worst(verdicts),
                notes=notes,
                patch_set=patch.get("patch_set") if patch else None,
                sglang_version=patch.get("sglang_version") if patch else None,
                loaded_sglang=patch is not None,
                sglang_rank=sglang_rank,
            )
        )

    schedulers = [p for p in pverdicts if p.role.startswith("scheduler")]
    rank_processes = [p for p in pverdicts if p.sglang_rank]
    if expected_schedulers is not None and len(schedulers) < expected_schedulers:
        problems.append(
            f"expected {expected_schedulers} scheduler process(es) {expected_where} (tp x dp x pp"
            f"{'' if 'Ray' in expected_where else ' / nnodes'}), found audit records from "
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
    if not processes:
        problems.append("no audit records found")
    elif not rank_processes and not comms and not any(r.get("reads") for r in nccl_reads.values()):
        problems.append(
            "nothing real was audited in this launch: no process recorded an SGLang rank, a communicator or "
            "NCCL's own reads (only helper processes ran). This is not a pass; audit the launch directory "
            "printed by the SGLang launch"
        )
    verdict = worst([p.verdict for p in pverdicts] + [c.verdict for c in comms] + (["fail"] if problems else []))
    return Report(
        run_dir=run_dir,
        profile=launch_profile.get("name") if launch_profile else None,
        verdict=verdict,
        processes=pverdicts,
        communicators=comms,
        eagle=eagle,
        sglang_writes=sglang_writes,
        problems=problems,
        nccl_reads=nccl_reads,
        allreduce_paths=paths,
    )


def load_report(path: str | Path) -> Report:
    """Judge the launch at ``path`` (a launch directory, or a root: its newest launch)."""
    root = Path(path)
    from sglang_eagle_nccl.offline.audit.nccl_reads import read_reads

    run = find_launch_dir(root)
    launch = read_launch_records(run)
    report = judge(launch.meta, launch.processes, str(run), read_reads(run))
    report.unreadable = list(launch.unreadable)
    if report.unreadable and report.verdict == "ok":
        # Something in the launch was not judged (a planted symlink, a corrupt line): the
        # verdict cannot be an unqualified pass.
        report.verdict = "warn"
    if run.resolve() != root.resolve():
        report.picked = f"newest launch under {root}: {run.name}"
    return report


# --- text -------------------------------------------------------------------------------------


def _is_helper(p: ProcessVerdict) -> bool:
    return not p.loaded_sglang and p.role not in ("launcher",) and not p.sglang_rank


def format_text(report: Report) -> str:
    lines = [f"Audit of {report.run_dir}"]
    if report.picked:
        lines.append(f"(picked the {report.picked})")
    lines += [f"Profile: {report.profile or '(unknown)'}", ""]
    lines.append("Processes")
    lines.append(f"  {'':2}{'role':<26}{'pid':>8}  {'patch set':<22} notes")
    helpers = [p for p in report.processes if _is_helper(p) and p.verdict == "ok"]
    for p in sorted(report.processes, key=lambda x: (x.role != "launcher", x.role, x.pid)):
        if p in helpers:
            continue
        note = "; ".join(p.notes) if p.notes else ""
        lines.append(f"  {MARK[p.verdict]} {p.role:<26}{p.pid:>8}  {(p.patch_set or '-'):<22} {note}")
    if helpers:
        lines.append(
            f"  ✓ {len(helpers)} helper process(es) that never imported SGLang (profile in force in each): "
            + ", ".join(sorted({p.role for p in helpers}))
        )
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
    lines.append("")
    lines.append("NCCL's own reads (native env plugin)")
    if not report.nccl_reads:
        lines.append(
            "  unavailable: no process recorded any (NCCL < 2.28.7 has no env plugin interface, the native plugins "
            "are not installed, or NCCL was never loaded in this launch)"
        )
    for pid, r in sorted(report.nccl_reads.items()):
        from sglang_eagle_nccl.offline.audit.nccl_reads import ProcessReads, read_lines

        holder = ProcessReads(pid, r["file"], reads=r["reads"])
        version = (f"NCCL {r.get('nccl_version') or '?'}, env plugin {r.get('env_plugin_abi') or '?'}"
                   if r.get("nccl_version") or r.get("env_plugin_abi") else "NCCL did not load the env plugin")
        lines.append(f"  {MARK[r['verdict']]} pid {pid} ({version}): {len(r['reads'])} read(s)")
        lines += [f"        {x}" for x in read_lines(holder)]
        lines += [f"        {n}" for n in r["notes"]]
    if report.allreduce_paths:
        from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import format_paths

        lines.append("")
        lines.append("Which all-reduce runs, per group (first rank that recorded it)")
        for _group, description in sorted(report.allreduce_paths.items()):
            lines += [f"  {x}" for x in format_paths(description)]
    if report.eagle:
        lines.append("")
        lines.append("EAGLE speculative decoding (no new groups: draft and verify reuse existing ones)")
        for e in report.eagle:
            draft = sorted({str(g.get("unique_name") or g.get("group")) for g in (e.get("draft") or {}).values()})
            verify = sorted({str(g.get("unique_name") or g.get("group")) for g in (e.get("verify") or {}).values()})
            draft_text = ", ".join(draft) or (e.get("draft_note") or "unknown (the worker holds no group object)")
            verify_text = ", ".join(verify) or "unknown (the worker holds no group object)"
            lines.append(f"  pid {e['pid']} {e.get('worker')}: draft on {draft_text}; verify on {verify_text}")
    if report.sglang_writes:
        lines.append("")
        lines.append("SGLang's own NCCL writes")
        for w in report.sglang_writes:
            why = f" (for --{str(w['for_correctness']).replace('_', '-')})" if w.get("for_correctness") else ""
            lines.append(f"  {w.get('name')}: {shown(w.get('before'))} -> {shown(w.get('after'))} in {w.get('where')}{why}")
    lines.append("")
    if report.unreadable:
        lines.append("Not judged (unreadable files and lines)")
        listed = report.unreadable[:20]
        lines += [f"  ⚠ {u.text()}" for u in listed]
        if len(report.unreadable) > len(listed):
            lines.append(f"  ... and {len(report.unreadable) - len(listed)} more (--json lists all)")
        lines.append("")
    if report.problems:
        lines.append("Problems")
        lines += [f"  ✗ {p}" for p in report.problems]
        lines.append("")
    # Say what the ✓ covers: with no NCCL communicator checked (all "–", e.g. gloo on CPU) it vouches
    # for the processes only.
    checked_comms = any(c.verdict != "absent" for c in report.communicators)
    lines.append(
        f"Verdict: {MARK[report.verdict]} "
        + {"ok": "the profile is in force in every audited process and communicator" if checked_comms else
                 "the profile is in force in every audited process (no NCCL communicator existed to check)",
           "warn": "in force, with warnings above",
           "fail": "the profile is NOT shown to be in force everywhere (see above)",
           "absent": "nothing to judge"}[report.verdict]
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
