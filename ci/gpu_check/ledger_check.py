"""Step (b)'s phase ledger (the engine runs with ``SGLANG_EAGLE_NCCL_LEDGER=1``): pure judging of the
``ledger`` section of ``sglang-eagle-nccl audit --json``.

What must hold, on a GPU and in the CPU rehearsal alike: both schedulers' ledgers were read, the
EAGLE-3 run went through the extend and target-verify phases (counted from SGLang's forward mode),
and every collective line names its implementation. On a GPU (CUDA graphs on) some phase must also
count CUDA-graph replays: the replay hooks ran, and the captured collectives are the ``capture``
lines. One GPU runs TP = 1, where SGLang issues no collective on its one-rank groups: the ledger
then counts steps and replays only (PyNccl against torch's communicator needs TP >= 2: run with
more GPUs and the same step shows which carried each all-reduce, with the tuner's answer).

The tuner's actual answers (counted in C per communicator and size, ``tuner_answers`` of the
section, joined per line as ``actual``): on a GPU, an NCCL-carried line whose size NCCL never asked
the tuner about is a problem (the tuner plugin did not run in that process); an actual answer that
is not the rules' answer is reported as a note naming the line ("differs"), not a failure -- it is
the finding the ledger exists to show. The CPU rehearsal has no NCCL: no answer is expected.
"""

from __future__ import annotations

from typing import Any


def judge_ledger(section: Any, *, rehearsal: bool) -> tuple[list[str], list[str], dict[str, Any]]:
    """(problems, notes, details) of one engine run's ledger section."""
    problems: list[str] = []
    notes: list[str] = []
    if not isinstance(section, dict):
        return (["the audit has no phase ledger although the engine ran with SGLANG_EAGLE_NCCL_LEDGER=1 "
                 "(the ledger's hooks did not run, or wrote nothing)"], notes, {})
    steps = [s for s in section.get("steps", []) if isinstance(s, dict)]
    lines = [ln for ln in section.get("lines", []) if isinstance(ln, dict)]
    phases = sorted({str(s.get("phase")) for s in steps})
    replays = sum(sum(s.get("replays") or []) for s in steps)
    details = {
        "ledger_processes": section.get("processes"), "ledger_phases": phases, "ledger_replays": replays,
        "ledger_lines": [
            {k: ln.get(k) for k in ("phase", "mode", "op", "group", "impl", "ranks")}
            | {"sizes": [(s.get("bytes"), s.get("calls_per_step")) for s in ln.get("sizes", [])],
               "decisions": sorted({str((s.get("decision") or {}).get("answer")) for s in ln.get("sizes", [])})}
            for ln in lines
        ],
    }
    if section.get("unreadable"):
        problems.append(f"ledger lines could not be read: {section['unreadable'][:3]}")
    for want in ("extend", "target verify"):
        if want not in phases:
            problems.append(f"the ledger counted no '{want}' step (phases: {phases}): the forward hook missed it")
    unidentified = [ln for ln in lines if ln.get("impl") == "unidentified"]
    if unidentified:
        problems.append(f"{len(unidentified)} collective line(s) with no identified implementation: "
                        f"{[(ln.get('phase'), ln.get('op'), ln.get('group')) for ln in unidentified[:3]]}")
    if rehearsal:
        notes.append("CPU rehearsal: no CUDA graph, so no replay or capture line is expected")
    elif replays == 0:
        problems.append("the ledger counted no CUDA-graph replay although CUDA graphs were on: "
                        "the replay hooks did not run on this SGLang")
    if not lines:
        notes.append("no collective in the ledger: at TP = 1 SGLang skips every collective of a one-rank group")
    tuner = [c for p in section.get("tuner_answers") or [] if isinstance(p, dict) for c in p.get("communicators", [])]
    details["tuner_communicators"] = [
        {k: c.get(k) for k in ("context", "group", "nranks", "abi", "final", "unrecorded")}
        | {"answers": [(a.get("collective"), a.get("bytes"), a.get("answer"), a.get("count"))
                       for a in c.get("answers", [])]}
        for c in tuner if isinstance(c, dict)
    ]
    for ln in lines:
        if not ln.get("nccl"):
            continue
        for size in ln.get("sizes", []):
            where = f"{ln.get('phase')} {ln.get('op')} {size.get('bytes')} B on {ln.get('group')} via {ln.get('impl')}"
            actual = size.get("actual")
            if not actual and not rehearsal:
                problems.append(f"{where}: NCCL carried it but the tuner plugin recorded no answer for that size")
            for a in actual or []:
                if a.get("differs"):
                    rule = (size.get("decision") or {}).get("answer")
                    notes.append(f"{where}: the tuner answered {a.get('answer')} x {a.get('count')} (group "
                                 f"{a.get('group') or 'no label'}), the rules answer {rule}: differs")
    if rehearsal and not tuner:
        notes.append("CPU rehearsal: NCCL never asks the tuner here, so no actual tuner answer is expected")
    return problems, notes, details
