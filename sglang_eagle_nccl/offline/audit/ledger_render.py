"""The phase ledger on one screen: per phase, one line per group and implementation, target verify first.

A line reads like the question it answers: ``target verify (eager, 3 tokens, batch 1; 4 steps per
rank): 2 all-reduces per layer (× 2 layers + 1) = 5 per step of 256 B bfloat16 on tp:0 (2 ranks)
via gloo → NCCL not used here (the profile's rules would answer: no rule: NCCL decides)``. Counts are
per rank (each process counts its own calls); where ranks differ the range is shown.
"""

from __future__ import annotations

from typing import Any

from sglang_eagle_nccl.contract import ledger as contract
from sglang_eagle_nccl.offline.audit.ledger_join import LedgerView, Line, Steps

OP_WORDS = {"all_reduce": ("all-reduce", "all-reduces"), "all_gather": ("all-gather", "all-gathers"),
            "reduce_scatter": ("reduce-scatter", "reduce-scatters"), "broadcast": ("broadcast", "broadcasts")}
DRAFT_PHASES = ("draft decode", "draft extend")


def size_text(n: int) -> str:
    """``256`` -> ``256 B``; ``43008`` -> ``42 KiB``; one decimal when not whole."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


def _range(values: list[int]) -> str:
    if not values:
        return "0"
    return str(values[0]) if values[0] == values[-1] else f"{values[0]}–{values[-1]}"


def context_text(phase: str, mode: str, batch: int | None, tokens: int | None) -> str:
    parts = [mode if mode != "replay" else "graph replay"]
    if tokens is not None:
        parts.append(f"{tokens} token{'s' if tokens != 1 else ''}")
    if batch is not None:
        parts.append(f"batch {batch}")
    return f"{phase} ({', '.join(parts)})"


def _per_step_text(line: Line, nbytes: int, layers: int | None) -> str:
    r = line.per_step.get(nbytes)
    one, many = OP_WORDS.get(line.op, (line.op, line.op + "s"))
    if r is None:
        totals = line.totals[nbytes]
        return f"{_range(totals)} {many if totals[-1] != 1 else one} in all"
    lo, hi = r
    if lo != hi:
        return f"{lo:g}–{hi:g} {many} per step"
    n = lo
    if n.is_integer() and layers and layers > 1 and n >= layers:
        per_layer, rest = divmod(int(n), layers)
        tail = f" + {rest}" if rest else ""
        return f"{per_layer} {one if per_layer == 1 else many} per layer (× {layers} layers{tail}) = {int(n)} per step"
    return f"{n:g} {one if n == 1 else many} per step"


def _decision_text(line: Line, nbytes: int, note: str | None) -> str:
    d = line.decisions.get(nbytes)
    if d is None:
        return f"→ {note}" if note and line.nccl else ""
    answer = d.get("answer", "?")
    if line.nccl:
        return f"→ {answer}" + _actual_text(line, nbytes)
    return f"→ NCCL not used here (the profile's rules would answer: {answer})"


def _actual_text(line: Line, nbytes: int) -> str:
    """What the tuner plugin answered (counted in C), and ``⚠ differs`` where it is not the rules' answer."""
    if nbytes not in line.actual:
        return ""
    got = line.actual[nbytes]
    if not got:
        return "; the tuner recorded no answer for it (NCCL did not ask the plugin here)"
    parts = []
    for a in got:
        where = f"communicator{'s' if a['communicators'] != 1 else ''} of group {a['group'] or '(no label)'}"
        text = f"{a['answer']} × {a['count']} ({a['communicators']} {where})"
        parts.append(("⚠ differs: " if a.get("differs") else "") + text)
    return "; the tuner answered: " + "; ".join(parts)


def _layers(view: LedgerView, phase: str) -> int | None:
    model = view.models.get("draft" if phase in DRAFT_PHASES else "target")
    layers = model.get("layers") if isinstance(model, dict) else None
    return layers if isinstance(layers, int) and layers > 0 else None


def _steps_text(s: Steps | None) -> str:
    if s is None:
        return ""
    text = f"; {_range(s.per_process)} step{'s' if s.per_process[-1:] != [1] else ''} per rank" if s.per_process else ""
    if s.replays:
        text += f", {_range(s.replays)} graph replays per rank"
    return text


def format_ledger(view: LedgerView, comms: dict[tuple[str, str], str] | None = None) -> str:
    """The screen. ``comms`` maps (group unique name, implementation) to what the audit knows of that communicator."""
    if not view.lines and not view.steps and not view.tuner_answers:
        return ("Phase ledger: nothing recorded (was the launch started with --nccl-ledger / "
                "SGLANG_EAGLE_NCCL_LEDGER=1, and did it run a forward pass?)")
    out = [f"Phase ledger ({view.processes} process{'es' if view.processes != 1 else ''}; counts per rank, "
           "collectives SGLang issued through its group coordinators):"]
    steps = {(s.phase, s.mode, s.batch, s.tokens): s for s in view.steps}
    shown: set[tuple] = set()
    for line in view.lines:
        ctx = (line.phase, line.mode, line.batch, line.tokens)
        if ctx not in shown:
            shown.add(ctx)
            out.append(context_text(*ctx) + _steps_text(steps.get(ctx)) + ":")
        impl = contract.IMPLEMENTATIONS.get(line.impl, line.impl)
        comm = (comms or {}).get((line.group, line.impl))
        for nbytes in sorted(line.totals):
            text = (f"  {_per_step_text(line, nbytes, _layers(view, line.phase))} of {size_text(nbytes)} {line.dtype} "
                    f"on {line.group} ({line.ranks} ranks) via {impl}")
            if comm:
                text += f" ({comm})"
            decision = _decision_text(line, nbytes, view.decision_note)
            out.append(text + (f" {decision}" if decision else ""))
    for s in view.steps:
        ctx = (s.phase, s.mode, s.batch, s.tokens)
        if ctx not in shown:
            out.append(context_text(*ctx) + _steps_text(s) + ": no collective")
    if view.decision_note:
        out.append(f"Decisions: {view.decision_note}")
    for proc in view.tuner_answers:
        for c in proc["communicators"]:
            sizes = ", ".join(f"{a['collective']} {size_text(a['bytes'])}: {a['answer']} × {a['count']}"
                              for a in c["answers"][:6])
            more = f" (+{len(c['answers']) - 6} more)" if len(c["answers"]) > 6 else ""
            out.append(f"Tuner answers, pid {proc['process'][3]} communicator {c['context']} "
                       f"(group {c['group'] or '(no label)'}, {c['nranks']} ranks, ABI v{c['abi']}): "
                       f"{sizes or 'no collective asked'}{more}"
                       + (f"; {c['unrecorded']} call(s) beyond the recorded sizes" if c["unrecorded"] else ""))
    if view.unreadable:
        out.append(f"⚠ {len(view.unreadable)} ledger line(s) could not be read: " + "; ".join(view.unreadable[:3]))
    return "\n".join(out)


def comm_notes(report: Any) -> dict[tuple[str, str], str]:
    """What the audit knows of the NCCL communicators of each group, by (group unique name, implementation).

    Only NCCL-carried implementations get a note (which communicator, created when, the profile's
    verdict on it); a gloo or shared-memory line already says all there is."""
    out: dict[tuple[str, str], str] = {}
    for c in getattr(report, "communicators", []):
        name = c.unique_name or c.group
        if c.kind == "pynccl":
            impl, what = "pynccl", "SGLang's PyNccl communicator, created eagerly with the group"
        elif str(c.backend or "").lower() == "nccl":
            impl, what = "torch_nccl", "torch's NCCL communicator of the group, created lazily at its first collective"
        else:
            continue
        mark = {"ok": "✓", "warn": "⚠", "fail": "✗"}.get(c.verdict, "–")
        out.setdefault((name, impl), f"{what}, profile {mark}" + (f": {c.notes[0]}" if c.notes and c.verdict != "ok" else ""))
    return out


def ledger_json(view: LedgerView) -> dict[str, Any]:
    return view.to_dict()
