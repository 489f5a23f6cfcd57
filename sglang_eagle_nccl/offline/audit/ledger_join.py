"""The phase ledger of a launch, per phase and line, joined with what NCCL's tuner is told for each size.

Rules:

- **Per step is exact or says it is not.** A line's calls per step, in one process, is its count
  divided by the number of completed steps of the same context (phase, mode, batch, tokens) in
  that process. When every process gives the same quotient, that is the line's value; otherwise
  the line shows the range (and ``exact`` is False). A count with no step of its context (a
  collective outside any forward) has no per-step value (``None``), only totals.
- **Phases in the screen's order:** target verify first, then ``contract.ledger.PHASES``, then
  any other phase by name, then collectives outside a forward pass; inside a phase, eager before
  capture before replay, then by batch and tokens.
- **The decision is the compiled library's.** For each (op, bytes, ranks, group label) the answer
  comes from ``decide`` (by default the shipped tuner library through
  :func:`sglang_eagle_nccl.native.library.query_rules`, with the launch profile's
  ``tuner_rules``), asked once per distinct query. A line whose implementation does not go
  through NCCL says so (``nccl`` False): what the rules would answer is shown, marked as not used.
- **What the tuner actually answered is the C side's count.** Where the tuner plugin ran (NCCL loaded
  it: a GPU machine), its answers per communicator are in the reads logs
  (:mod:`.tuner_answers`). For an NCCL-carried line and size, the answers the tuner gave that
  line's processes for the same collective, size and rank count are summed per (answer,
  communicator's group label); one that is not the rules' answer (rule, applied, algorithm,
  protocol, channels) is marked ``differs`` -- a torch communicator created without the group's
  label misses a group rule, for instance. No recorded answer is ``[]`` (not run through NCCL here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl.contract import ledger as contract
from sglang_eagle_nccl.contract.launch_dir import identity_key
from sglang_eagle_nccl.offline.audit.ledger_read import LaunchLedger
from sglang_eagle_nccl.offline.audit.tuner_answers import TunerAnswers

NCCL_COLLECTIVES = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
                    "broadcast": "Broadcast"}
MODE_ORDER = {m: i for i, m in enumerate(contract.MODES)}

Decide = Callable[[str, int, int, int, str], dict[str, Any]]
# The fields an answer is compared by: the same rule, taken or not, with the same cell and channels.
SAME_ANSWER = ("rule_index", "applied", "algorithm", "protocol", "channels")


def phase_rank(phase: str) -> tuple[int, str]:
    if phase in contract.PHASES:
        return (contract.PHASES.index(phase), "")
    if phase == contract.OUTSIDE:
        return (len(contract.PHASES) + 1, "")
    return (len(contract.PHASES), phase)


@dataclass
class Line:
    """One line of the screen: a step context, a group and an implementation, with every size it sent."""

    phase: str
    mode: str
    batch: int | None
    tokens: int | None
    op: str
    group: str
    impl: str
    ranks: int
    dtype: str
    # bytes -> (min, max) calls per step over the processes (None: no step to divide by)
    per_step: dict[int, tuple[float, float] | None] = field(default_factory=dict)
    # bytes -> total calls in each process (sorted)
    totals: dict[int, list[int]] = field(default_factory=dict)
    decisions: dict[int, dict[str, Any]] = field(default_factory=dict)
    # bytes -> what the tuner plugin answered these processes (see the module's rules); absent: not looked up
    actual: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def differs(self, nbytes: int) -> bool:
        return any(a.get("differs") for a in self.actual.get(nbytes, []))

    @property
    def nccl(self) -> bool:
        return self.impl in contract.NCCL_CARRIED

    def exact(self) -> bool:
        return all(v is not None and v[0] == v[1] for v in self.per_step.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase, "mode": self.mode, "batch": self.batch, "tokens": self.tokens, "op": self.op,
            "group": self.group, "impl": self.impl, "implementation": contract.IMPLEMENTATIONS.get(self.impl, self.impl),
            "ranks": self.ranks, "dtype": self.dtype, "nccl": self.nccl, "exact": self.exact(),
            "sizes": [
                {"bytes": b, "calls_per_step": _shown_ratio(self.per_step.get(b)), "totals": self.totals[b],
                 "decision": self.decisions.get(b), "actual": self.actual.get(b), "differs": self.differs(b)}
                for b in sorted(self.totals)
            ],
        }


def _shown_ratio(r: tuple[float, float] | None) -> Any:
    if r is None:
        return None
    return _num(r[0]) if r[0] == r[1] else [_num(r[0]), _num(r[1])]


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


@dataclass
class Steps:
    phase: str
    mode: str
    batch: int | None
    tokens: int | None
    per_process: list[int]
    replays: list[int]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LedgerView:
    lines: list[Line]
    steps: list[Steps]
    processes: int
    models: dict[str, Any]
    unreadable: list[str]
    decision_note: str | None = None
    tuner_answers: list[dict[str, Any]] = field(default_factory=list)  # every communicator's, per process

    def to_dict(self) -> dict[str, Any]:
        return {
            "processes": self.processes, "models": self.models, "unreadable": self.unreadable,
            "decision_note": self.decision_note, "tuner_answers": self.tuner_answers,
            "steps": [s.to_dict() for s in self.steps], "lines": [line.to_dict() for line in self.lines],
        }


def _ctx(fields: dict[str, Any]) -> tuple:
    return tuple(fields.get(k) for k in contract.STEP_KEY)


def _sort_key(ctx: tuple) -> tuple:
    phase, mode, batch, tokens = ctx
    return (phase_rank(str(phase)), MODE_ORDER.get(mode, 9), batch if isinstance(batch, int) else -1,
            tokens if isinstance(tokens, int) else -1)


def actual_answers(answers: TunerAnswers, idents: list[tuple], collective: str, nbytes: int, ranks: int,
                   decision: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The tuner's recorded answers to these processes for this call, summed per (answer, group label)."""
    merged: dict[tuple, dict[str, Any]] = {}
    for ident in idents:
        for a in answers.matching(ident, collective, nbytes, ranks):
            key = (a["answer"], a["group"])
            got = merged.get(key)
            if got is None:
                got = merged[key] = {k: a[k] for k in (*SAME_ANSWER, "answer", "group")} | {"count": 0,
                                                                                              "communicators": 0}
                got["differs"] = decision is not None and any(a[k] != decision.get(k) for k in SAME_ANSWER)
            got["count"] += a["count"]
            got["communicators"] += 1
    return sorted(merged.values(), key=lambda a: (-a["count"], a["answer"], str(a["group"])))


def summarize(ledger: LaunchLedger, decide: Decide | None = None, answers: TunerAnswers | None = None) -> LedgerView:
    """Lines and steps of a launch's ledger, in the screen's order, each size joined with ``decide`` and,
    when given, with what the tuner plugin actually answered (``answers``)."""
    procs = [p for p in ledger.processes.values() if p.counts]
    steps_by: dict[tuple, dict[int, int]] = {}
    replays_by: dict[tuple, dict[int, int]] = {}
    groups: dict[tuple, dict[int, dict[int, int]]] = {}  # line key -> bytes -> process index -> count
    meta: dict[tuple, tuple[int, str]] = {}
    models: dict[str, Any] = {}
    for i, proc in enumerate(procs):
        models.update(proc.models)
        for key, n in proc.counts.items():
            fields = proc.lines[key]
            kind = fields["kind"]
            ctx = _ctx(fields)
            if kind == "step":
                steps_by.setdefault(ctx, {})[i] = steps_by.get(ctx, {}).get(i, 0) + n
            elif kind == "replay":
                replays_by.setdefault(ctx, {})[i] = replays_by.get(ctx, {}).get(i, 0) + n
            elif kind == "collective":
                lk = ctx + (fields.get("op"), fields.get("group"), fields.get("impl"))
                sizes = groups.setdefault(lk, {})
                per = sizes.setdefault(int(fields.get("bytes") or 0), {})
                per[i] = per.get(i, 0) + n
                meta[lk] = (int(fields.get("ranks") or 0), str(fields.get("dtype")))
    lines = []
    asked: dict[tuple, dict[str, Any]] = {}
    for lk in sorted(groups, key=lambda k: (_sort_key(k[:4]), str(k[4]), str(k[5]), str(k[6]))):
        phase, mode, batch, tokens, op, group, impl = lk
        ranks, dtype = meta[lk]
        line = Line(str(phase), str(mode), batch, tokens, str(op), str(group), str(impl), ranks, dtype)
        step_counts = steps_by.get(lk[:4], {})
        for nbytes, per in groups[lk].items():
            line.totals[nbytes] = sorted(per.values())
            # Every process that counted this line must have completed steps of its context.
            ratios = [per[i] / step_counts[i] for i in per if step_counts.get(i)]
            line.per_step[nbytes] = (min(ratios), max(ratios)) if ratios and len(ratios) == len(per) else None
            if decide is not None and op in NCCL_COLLECTIVES:
                q = (NCCL_COLLECTIVES[str(op)], nbytes, ranks, str(group).split(":")[0])
                if q not in asked:
                    asked[q] = decide(q[0], q[1], q[2], 1, q[3])
                line.decisions[nbytes] = asked[q]
            if answers is not None and line.nccl and op in NCCL_COLLECTIVES:
                idents = [identity_key(procs[i].identity) for i in sorted(per)]
                line.actual[nbytes] = actual_answers(answers, idents, NCCL_COLLECTIVES[str(op)], nbytes, ranks,
                                                     line.decisions.get(nbytes))
        lines.append(line)
    steps = [
        Steps(str(c[0]), str(c[1]), c[2], c[3], sorted(steps_by.get(c, {}).values()), sorted(replays_by.get(c, {}).values()))
        for c in sorted(set(steps_by) | set(replays_by), key=_sort_key)
    ]
    return LedgerView(lines, steps, len(procs), models, list(ledger.unreadable),
                      tuner_answers=answers.to_dict() if answers is not None else [])


def native_decider(tuner_rules: list[Any], lib: Any = None) -> tuple[Decide | None, str | None]:
    """``decide`` backed by the shipped tuner library (or ``lib``) with the launch profile's rules, or why not."""
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import rule_from_dict
    from sglang_eagle_nccl.native import library

    try:
        rules = [rule_from_dict(r, "the launch profile") for r in tuner_rules]
    except Exception as exc:  # noqa: BLE001 - the rules the launch recorded do not check out
        return None, f"the launch's tuner rules cannot be read: {exc}"

    try:
        native = lib if lib is not None else library.load()
        native.configure_tuner(rules)
    except library.NativeUnavailable as exc:
        return None, f"the native tuner library is not available here ({exc}): no decision shown"

    def decide(collective: str, nbytes: int, nranks: int, nnodes: int, group: str) -> dict[str, Any]:
        # Tuner ABI v6 (NCCL 2.30+): the newest NCCL's view; the rules match the same way in every ABI.
        return native.query_tuner(6, collective, nbytes, nranks, nnodes, group).to_dict()

    return decide, None
