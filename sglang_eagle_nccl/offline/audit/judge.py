"""Judging a launch's audit records (pure, apart from reading the files): one small function per event.

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

Every event of :data:`sglang_eagle_nccl.contract.events.EVENTS` marked ``judged`` has exactly one
function in :data:`JUDGES` (a test checks both ways); the launch-wide rules (expected schedulers, a
rank without communicators, nothing audited) follow in :func:`judge`. Processes are told apart by
their whole identity and grouped by machine (host name, boot, PID namespace: a container is a
machine of its own). Showing the verdict is :mod:`sglang_eagle_nccl.offline.audit.render`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sglang_eagle_nccl.offline.audit.read import (
    Budget,
    CopyNote,
    CutLine,
    Key,
    LaunchRecords,
    ProcessReads,
    ProcessRecords,
    Unreadable,
    find_launch_dir,
    merge,
    no_cycle_collector,
    read_evidence,
    refuse_if_nothing,
    unique_dirs,
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
    if expected.items() <= actual.items():  # the common case in one C-level test (every pair present, equal)
        return []
    if all(actual.get(name) == value for name, value in expected.items()):
        return []  # the common case, without sorting (a cluster's audit asks this a million times)
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


def machine_of(identity: Mapping[str, Any]) -> tuple[str, str, str]:
    """The machine a process ran on: host name, boot id and PID namespace (a container is a machine)."""
    return str(identity.get("host")), str(identity.get("boot_id")), str(identity.get("pidns"))


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
    host: str = ""
    process: str = ""  # the process key (key_text): host/boot/pidns/pid/start

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
    host: str = ""
    process: str = ""
    machine: tuple[str, str, str] = ("", "", "")

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["machine"] = list(self.machine)
        return out


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
    # process key -> what NCCL itself read in that process (native env plugin), with its verdict
    nccl_reads: dict[str, dict[str, Any]] = field(default_factory=dict)
    # group -> all-reduce paths SGLang enabled (first rank that recorded them)
    allreduce_paths: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_dirs: list[str] = field(default_factory=list)
    cut_lines: list[CutLine] = field(default_factory=list)
    copies: list[CopyNote] = field(default_factory=list)
    # groups whose ranks agreed on every must-match variable (consistency_ok), one entry per rank's record
    agreements: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "fail" else 0

    def machines(self) -> list[tuple[str, str, str]]:
        """Every machine that left records, in a stable order (host name first)."""
        return sorted({p.machine for p in self.processes})

    def to_dict(self) -> dict[str, Any]:
        on: dict[tuple[str, str, str], list[str]] = {}
        for p in self.processes:  # grouped once: a cluster has thousands of machines and processes
            on.setdefault(p.machine, []).append(p.process)
        return {
            "run_dir": self.run_dir,
            "run_dirs": self.run_dirs or [self.run_dir],
            "picked": self.picked,
            "profile": self.profile,
            "verdict": self.verdict,
            "hosts": [{"host": m[0], "boot_id": m[1], "pidns": m[2], "processes": on[m]} for m in sorted(on)],
            "processes": [p.to_dict() for p in self.processes],
            "communicators": [c.to_dict() for c in self.communicators],
            "eagle": self.eagle,
            "sglang_writes": self.sglang_writes,
            "problems": self.problems,
            "unreadable": [u.to_dict() for u in self.unreadable],
            "cut_lines": [c.to_dict() for c in self.cut_lines],
            "copies": [c.to_dict() for c in self.copies],
            "nccl_reads": dict(sorted(self.nccl_reads.items())),
            "allreduce_paths": self.allreduce_paths,
            "agreements": self.agreements,
        }


# --- judging: one function per event --------------------------------------------------------------

ENV_EVENTS = ("process_start", "profile_changed", "scheduler_start", "env_restored")


class _Launch:
    """What the judge gathers across processes (communicators, EAGLE groups, SGLang's writes ...)."""

    def __init__(self, launch_profile: Mapping[str, Any]) -> None:
        self.profile = launch_profile
        rules = launch_profile.get("tuner_rules") if isinstance(launch_profile.get("tuner_rules"), list) else []
        self.group_rules = frozenset(str(r["group"]) for r in rules if isinstance(r, dict) and r.get("group"))
        self.comms: list[CommVerdict] = []
        self.eagle: list[dict[str, Any]] = []
        self.sglang_writes: list[dict[str, Any]] = []
        self.paths: dict[str, dict[str, Any]] = {}
        # machine (None: the whole launch) -> schedulers its launcher said it would start
        self.expected_schedulers: dict[tuple[str, str, str] | None, int] = {}
        # processes (key_text) that recorded why they stopped (rank_stopped): the cause, not a guess
        self.stopped: set[str] = set()
        # consistency_ok records: the groups whose ranks agreed on every must-match variable
        self.agreements: list[dict[str, Any]] = []


class _Process:
    """The judging state of one process while its records are read in order."""

    def __init__(self, proc: ProcessRecords, launch: _Launch) -> None:
        self.proc = proc
        self.role = proc.role
        self.launch = launch
        self.notes: list[str] = []
        self.verdicts: list[Verdict] = []
        self.first_env: dict[str, str] | None = None  # NCCL environment at its first NCCL communicator

    def mark(self, verdict: Verdict, note: str | None = None) -> None:
        self.verdicts.append(verdict)
        if note:
            self.notes.append(note)


Judge = Callable[[_Process, Mapping[str, Any], "Expectation | None"], None]


def _env_in_force(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    """process_start, profile_changed, scheduler_start: the environment must hold the profile in force."""
    if exp is not None:
        diffs = differences(exp.env, rec["env"], skip=exp.keep)
        if diffs:
            state.mark("fail", f"profile not in force at {rec['event']}: " + "; ".join(diffs))


def _env_restored(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    """After SGLang's writes in the launcher: restored (said), kept by sglang_wins (⚠), and the profile in force."""
    _env_in_force(state, rec, exp)
    for o in rec.get("overwrites") or []:
        if o.get("restored"):
            state.notes.append(f"SGLang wrote {o['name']}={shown(o.get('foreign_value'))}; restored {o['profile_value']}")
        else:
            state.mark("warn", f"kept SGLang's {o['name']}={shown(o.get('foreign_value'))} "
                               f"(policy sglang_wins; profile {o['profile_value']})")


def _communicator(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    """group_created, pynccl_created: one communicator's verdict (and the process's, for what it held)."""
    proc, launch = state.proc, state.launch
    if rec["event"] == "group_created" and isinstance(rec.get("allreduce_paths"), dict):
        launch.paths.setdefault(str(rec.get("group")), rec["allreduce_paths"])
    comm = _judge_communicator(proc, state.role, rec, exp, state.first_env, launch.group_rules)
    if comm.verdict == "absent" and exp is not None:
        # No NCCL communicator to judge, but the process still had to hold the profile when it
        # built the group: a difference there is the process's failure.
        ov = rec.get("group_overrides") if isinstance(rec.get("group_overrides"), dict) else None
        diffs = differences(exp.for_group(comm.group, ov), rec["env"], skip=exp.keep)
        if diffs:
            state.mark("fail", f"profile not in force when {comm.kind} '{comm.group}' was created: " + "; ".join(diffs))
    if comm.verdict != "absent" and state.first_env is None:
        state.first_env = dict(rec["env"])
    launch.comms.append(comm)


def _sglang_env_writes(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    """SGLang's own NCCL writes (listed), and how many schedulers this machine's launcher starts."""
    where = rec.get("where") or "_set_envs_and_config"
    for w in rec["writes"]:
        state.launch.sglang_writes.append({**w, "where": where, "pid": state.proc.pid, "process": state.proc.name})
    flags = rec.get("server_flags") or {}
    tp, dp, pp, nnodes = (flags.get(k) for k in ("tp_size", "dp_size", "pp_size", "nnodes"))
    if isinstance(tp, int) and not isinstance(tp, bool) and where == "_set_envs_and_config":
        total = tp * _positive(dp) * _positive(pp)
        # A Ray driver starts every rank of every node as an actor, all of them in its launch; else each
        # node's launcher spawns (and audits) only its own share of the ranks, on its machine. Two claims
        # for one place (copies that disagree, two launchers): the larger holds, whatever the order.
        ray = flags.get("use_ray") is True or bool(state.proc.events("ray_actor_env"))
        where_key = None if ray else machine_of(state.proc.identity)
        claim = total if ray else max(1, total // _positive(nnodes))
        expected = state.launch.expected_schedulers
        expected[where_key] = max(claim, expected.get(where_key, 0))


def _positive(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _correctness_conflict(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    first = next((line for line in str(rec.get("message") or "").splitlines() if line.strip()), None)
    state.mark("fail", "refused: " + (first or "the profile would override "
                                      + ", ".join(rec["variables"]) + ", which SGLang sets for correctness"))


def _refused(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    first = next((line for line in rec["message"].splitlines() if line.strip()), "") or "(no message)"
    state.mark("fail", f"refused SGLang at {rec['door']}: {first}")


def _ray_actor_env(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    for r in rec.get("replaced_user_values") or []:
        state.notes.append(f"Ray actor {rec.get('actor')}: runtime_env {r.get('name')}={shown(r.get('user_value'))} "
                           f"replaced by {shown(r.get('value'))} (the profile's precedence)")


def _ray_refused(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    first = next((line for line in rec["error"].splitlines() if line.strip()), "") or "(no message)"
    state.mark("fail", f"refused to start Ray actors: {first}")


def _hook_uncovered(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    state.mark("fail" if rec["required"] else "warn", f"hook not installed: {rec['target']} ({rec.get('reason')})")


def _plugin_error(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    state.mark("warn", f"plugin error in {rec.get('handler')}: {rec.get('error')}")


def _audit_error(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    state.mark("warn", f"an audit record could not be encoded ({rec.get('lost_event')}: {rec.get('error')})")


def _consistency(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    """consistency_mismatch, consistency_failed: ranks disagreed (or did not answer): ✗ unless consistency=warn."""
    mode = rec.get("mode") or "error"
    detail = rec.get("error") or "; ".join(
        f"{m['variable']}: " + ", ".join(f"rank {r}={shown(v)}" for r, v in m["values_by_rank"].items())
        for m in rec.get("mismatches") or []
    )
    state.mark("fail" if mode == "error" else "warn",
               f"ranks disagree in group '{rec['group']}' (consistency={mode}): {detail}")


def _rank_stopped(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    """rank_stopped: a preflight rank stopped before its groups existed; the cause it saw, as its note."""
    from sglang_eagle_nccl.contract.events import STAGE_IMPORT_SGLANG

    what = "SGLang was never imported" if rec["stage"] == STAGE_IMPORT_SGLANG else f"stopped at {rec['stage']}"
    state.mark("fail", f"{what}: {rec['error']}")
    state.launch.stopped.add(state.proc.name)


def _patch_set(state: _Process, rec: Mapping[str, Any], exp: Expectation | None) -> None:
    for u in rec.get("uncovered") or []:
        state.mark("warn", f"uncovered (allow_partial): {u['target']}")


JUDGES: dict[str, Judge] = {
    "process_start": _env_in_force,
    "profile_changed": _env_in_force,
    "scheduler_start": _env_in_force,
    "env_restored": _env_restored,
    "group_created": _communicator,
    "pynccl_created": _communicator,
    "sglang_env_writes": _sglang_env_writes,
    "correctness_conflict": _correctness_conflict,
    "hook_uncovered": _hook_uncovered,
    "refused": _refused,
    "ray_actor_env": _ray_actor_env,
    "ray_refused": _ray_refused,
    "plugin_error": _plugin_error,
    "audit_error": _audit_error,
    "consistency_mismatch": _consistency,
    "consistency_failed": _consistency,
    "patch_set": _patch_set,
    "rank_stopped": _rank_stopped,
}


def _judge_communicator(proc: ProcessRecords, role: str, rec: Mapping[str, Any], exp: Expectation | None,
                        first_env: dict[str, str] | None, group_rules: frozenset[str] = frozenset()) -> CommVerdict:
    event = rec.get("event")
    env = rec["env"]
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
            group_values = overrides if overrides is not None else (exp.groups.get(group, {}) if exp is not None else {})
            if group_values:
                verdicts.append("warn")
                notes.append(
                    "per-group override " + ", ".join(f"{k}={v}" for k, v in group_values.items())
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
    if first_env is not None and not absent and first_env != env:  # equal environments: nothing changed
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
        ranks=list(rec.get("ranks") or []),
        rank=rec.get("global_rank", rec.get("rank")),
        backend=rec.get("device_group_backend") or rec.get("backend"),
        verdict=verdict,
        notes=notes,
        host=proc.host,
        process=proc.name,
    )


def _reads_candidates(got: ProcessReads | list[ProcessReads] | None) -> list[ProcessReads]:
    return [] if got is None else got if isinstance(got, list) else [got]


def judge(meta: Mapping[str, Any], processes: list[ProcessRecords], run_dir: str = "",
          reads: Mapping[Key, ProcessReads | list[ProcessReads]] | None = None) -> Report:
    """The verdict of a launch's processes (each version of a process whose copies disagree is judged as it
    is: see :mod:`.read`), in an order that depends on identities only."""
    launch_profile = meta.get("profile") if isinstance(meta, Mapping) and isinstance(meta.get("profile"), dict) else {}
    launch = _Launch(launch_profile)
    problems: list[str] = []
    pverdicts: list[ProcessVerdict] = []
    reads = reads or {}
    nccl_reads: dict[str, dict[str, Any]] = {}
    order = {"absent": -1, "ok": 0, "warn": 1, "fail": 2}

    for proc in sorted(processes, key=lambda p: p.name):
        state = _Process(proc, launch)
        patch = proc.first("patch_set")
        if proc.bad_lines:
            state.mark("warn", f"{proc.bad_lines} unreadable line(s) in {proc.file}")
        if proc.conflicts:
            state.mark("warn", "copies of its records disagree: this one from " + ", ".join(proc.places)
                       + "; other version(s) from " + " / ".join(", ".join(o) for o in proc.conflicts)
                       + " (each judged; the worse counts)")
        if proc.first("process_start") is None:
            state.mark("fail", "no process_start record")
        last_exp: Expectation | None = None
        for rec, exp in expectations(proc.records, launch_profile):
            last_exp = exp
            judge_event = JUDGES.get(rec["event"])
            if judge_event is not None:
                judge_event(state, rec, exp)
        candidates = _reads_candidates(reads.get(proc.key))
        if candidates:
            from sglang_eagle_nccl.offline.audit.nccl_reads import judge_reads

            # Every version of its reads log is judged; the worst one is shown (the first of equals).
            judged = [(got, judge_reads(got, last_exp.env if last_exp else {}, last_exp.groups if last_exp else {},
                                        last_exp.keep if last_exp else ())) for got in candidates]
            got, rv = max(judged, key=lambda gr: order[gr[1].verdict])
            state.verdicts.append(rv.verdict)  # type: ignore[arg-type]
            if rv.verdict != "absent":  # "nothing read" is said once, in the reads section
                state.notes += [f"NCCL's own reads: {n}" for n in rv.notes]
            if any(g.conflicts for g in candidates):
                state.mark("warn", "copies of its NCCL reads log disagree: " + " / ".join(
                    ", ".join(g.places) for g in candidates) + " (each judged; the worse counts)")
            entry = {**got.to_dict(), "verdict": rv.verdict, "notes": rv.notes}
            before = nccl_reads.get(proc.name)
            if before is None or order[rv.verdict] > order[before["verdict"]]:
                nccl_reads[proc.name] = entry
        for rec in proc.events("consistency_ok"):
            launch.agreements.append({"group": rec["group"], "ranks": list(rec.get("ranks") or []),
                                      "process": proc.name})
        for rec in proc.events("eagle_groups"):
            launch.eagle.append({"pid": proc.pid, "host": proc.host, "process": proc.name,
                                 **{k: rec.get(k) for k in ("worker", "draft", "verify", "draft_note")}})
        sglang_rank = state.role.startswith(("scheduler", "preflight")) or bool(proc.events("scheduler_start"))
        pverdicts.append(
            ProcessVerdict(
                pid=proc.pid,
                role=state.role,
                file=proc.file,
                verdict=worst(state.verdicts),
                notes=state.notes,
                patch_set=patch.get("patch_set") if patch else None,
                sglang_version=patch.get("sglang_version") if patch else None,
                loaded_sglang=patch is not None,
                sglang_rank=sglang_rank,
                host=proc.host,
                process=proc.name,
                machine=machine_of(proc.identity),
            )
        )

    comms = launch.comms
    rank_processes = [p for p in pverdicts if p.sglang_rank]
    for machine, expected in sorted(launch.expected_schedulers.items(), key=lambda kv: kv[0] or ("",)):
        # Processes, not versions: two disagreeing copies of one scheduler are one scheduler.
        found = {p.process for p in pverdicts if p.role.startswith("scheduler") and (machine is None or p.machine == machine)}
        if len(found) < expected:
            where = ("in this launch (tp x dp x pp: the Ray driver starts every rank)" if machine is None
                     else f"on host {machine[0]} (tp x dp x pp / nnodes)")
            problems.append(
                f"expected {expected} scheduler process(es) {where}, found audit records from {len(found)}: "
                "a process ran without the plugin"
            )
    with_comms = {c.process for c in comms}  # a set: a launch of thousands of processes stays linear
    for p in rank_processes:
        stopped = any("ranks disagree" in n for n in p.notes) or p.process in launch.stopped
        if not stopped and p.process not in with_comms:
            # Say what the records show, not a guess at why (a rank that recorded its cause is listed with it).
            problems.append(f"{p.role} pid {p.pid} on {p.host} recorded no communicator: it built no SGLang group "
                            "and left no record of why (its own output says where it stopped)")
    for p in pverdicts:
        if p.verdict == "fail":
            problems.append(f"{p.role} pid {p.pid} on {p.host}: " + "; ".join(n for n in p.notes if n))
    for c in comms:
        if c.verdict == "fail":
            problems.append(f"{c.role} pid {c.pid} on {c.host} {c.kind} '{c.group}': " + "; ".join(c.notes))
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
        eagle=launch.eagle,
        sglang_writes=launch.sglang_writes,
        problems=problems,
        nccl_reads=nccl_reads,
        allreduce_paths=launch.paths,
        agreements=launch.agreements,
    )


def judge_launch(launch: LaunchRecords) -> Report:
    """The verdict of what :mod:`.read` read: judged, with everything not judged demoting a pass."""
    reads: Mapping[Key, ProcessReads | list[ProcessReads]] = launch.reads_versions or launch.reads
    report = judge(launch.meta, launch.processes, launch.run_dirs[0] if launch.run_dirs else "", reads)
    report.run_dirs = list(launch.run_dirs)
    report.unreadable = list(launch.unreadable)
    report.cut_lines = list(launch.cut_lines)
    report.copies = list(launch.copies)
    profiles = {json.dumps((m.get("profile") or {}).get("env"), sort_keys=True) for m in launch.metas
                if isinstance(m.get("profile"), dict)}
    if len(profiles) > 1:
        report.problems.append("the launch directories given name different profiles (launch.json): they are not "
                               "one launch, or its nodes ran different profiles")
        report.verdict = "fail"
    for full in launch.disk_full:
        if full.required:  # the process stopped where its disk filled: the launch did not run as asked
            report.problems.append(full.text())
            report.verdict = "fail"
    if report.unreadable and report.verdict == "ok":
        # Something in the launch was not judged (a planted symlink, a corrupt line): the
        # verdict cannot be an unqualified pass.
        report.verdict = "warn"
    return report


def load_report(path: str | Path | Iterable[str | Path], budget: Budget | None = None) -> Report:
    """Judge the launch at ``path`` (a launch directory, or a root: its newest launch), or at several paths
    (one launch directory per node, however collected), as one launch: the same report for the same set
    of directories, in any order (:mod:`.read`), within one budget for the whole audit."""
    with no_cycle_collector():
        return _load_report(path, budget)


def _load_report(path: str | Path | Iterable[str | Path], budget: Budget | None = None) -> Report:
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    runs = [find_launch_dir(Path(p)) for p in paths]
    budget = budget or Budget()
    unique = unique_dirs(runs)
    launch = merge(read_evidence(run, budget) for run in unique)
    refuse_if_nothing(launch, ", ".join(map(str, unique)))
    report = judge_launch(launch)
    picked = sorted({f"newest launch under {p}: {run.name}" for p, run in zip(paths, runs, strict=True)
                     if run.resolve() != Path(p).resolve()})
    if picked:
        report.picked = "; ".join(picked)
    return report


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
