"""What a verdict covers, in a few lines under it: what was checked and held, what could not be checked
on this machine and why, and what to run next to check it.

A ✓ on a CPU machine ("in force in every audited process") is true and thin: no NCCL communicator
existed, so what NCCL itself would use was never seen. A newcomer cannot tell that from the marks
alone. The rules, from the judged report only (nothing is re-read):

- **held** (✓) names only what was checked and held: processes whose verdict is ✓ or ⚠ (with their
  roles), the hand-off (every such process other than the launcher applied the profile it was handed:
  its records are in this launch only because the hand-off named the launch), cross-rank agreement
  (groups of two or more ranks whose ranks agreed on every must-match variable: consistency_ok), the
  SGLang groups built while the profile was in force, the NCCL communicators checked (✓/⚠), NCCL's
  own reads that matched, the EAGLE groups recorded. Nothing that failed is ever listed here.
- **not here** (–) names what did not exist to be checked, with the reason the records give: no NCCL
  communicator (device groups of another backend, such as gloo on a CPU machine; PyNccl unavailable),
  no NCCL reads (NCCL never loaded, or no env plugin), no EAGLE worker, SGLang ranks that built no group.
- **next** (→) says what to run to check what was not: on a machine with NVIDIA GPUs, the same
  preflight (its communicators and NCCL's own reads), and ``ci/gpu-check`` from a checkout; when the
  verdict failed, only to fix what Problems lists (more checks elsewhere come after that).
- SGLang ranks that built no group at all stopped for a reason of their own (Problems names it): then
  "not here" says so, and not that NCCL was missing.

The lines are text for a person, in ``audit``'s default view (``--verbose`` lists every record they
sum up; ``--json`` carries them all).
"""

from __future__ import annotations

import shlex
import textwrap
from collections import Counter
from dataclasses import dataclass, field

from sglang_eagle_nccl.offline.audit.judge import Report

HELD, NOT_HERE, NEXT = "✓ held", "– not here", "→ next"
WIDTH = 100


@dataclass
class Coverage:
    held: list[str] = field(default_factory=list)
    not_here: list[str] = field(default_factory=list)
    next: list[str] = field(default_factory=list)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "es" if word.endswith("s") else "s")


def _kind(role: str, sglang_rank: bool) -> str:
    if role == "launcher":
        return "launcher"
    return "SGLang rank" if sglang_rank else "other process"


def _ranks_text(ranks: set[int]) -> str:
    ordered = sorted(ranks)
    if ordered and ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
        return f"ranks {ordered[0]}-{ordered[-1]}"
    return "rank(s) " + ", ".join(str(r) for r in ordered)


def coverage(report: Report) -> Coverage:
    """What ``report``'s verdict covers (see the module docstring for the rules)."""
    out = Coverage()
    held_procs = [p for p in report.processes if p.verdict in ("ok", "warn")]
    failing = {p.process for p in report.processes if p.verdict == "fail"}
    if held_procs:
        kinds = Counter(_kind(p.role, p.sglang_rank) for p in held_procs)
        out.held.append(f"the profile in {_plural(len(held_procs), 'process')} from their start (" + ", ".join(_plural(n, k) for k, n in sorted(kinds.items())) + ")")
        handed = [p for p in held_procs if p.role != "launcher"]
        if handed:
            out.held.append(f"the hand-off: {len(handed)} of them applied the profile the launch handed down")
    agreed = [a for a in report.agreements if len(a.get("ranks") or []) > 1 and a.get("process") not in failing]
    if agreed:
        groups = sorted({str(a["group"]) for a in agreed})
        ranks = {int(r) for a in agreed for r in a["ranks"]}
        out.held.append(f"cross-rank agreement: {_ranks_text(ranks)} agreed on every must-match variable in "
                        f"{_plural(len(groups), 'group')} ({', '.join(groups)})")
    built = [c for c in report.communicators if c.kind == "group" and c.verdict != "fail" and c.process not in failing]
    if built:
        names = sorted({c.group for c in built})
        out.held.append(f"{_plural(len(names), 'SGLang group')} built with the profile in force ({', '.join(names)})")
    checked = [c for c in report.communicators if c.verdict in ("ok", "warn")]
    if checked:
        kinds = Counter(f"{c.group}/{c.kind}" for c in checked)
        out.held.append(f"{_plural(len(checked), 'NCCL communicator')} checked ("
                        + ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(kinds.items())) + ")")
    matched = [r for r in report.nccl_reads.values() if r.get("verdict") in ("ok", "warn")]
    if matched:
        out.held.append(f"NCCL's own reads: the profile's values in {_plural(len(matched), 'process')}")
    if report.eagle:
        out.held.append(f"EAGLE: the draft and verify groups of {_plural(len(report.eagle), 'worker')}")

    with_groups = {c.process for c in report.communicators}
    bare = [p for p in report.processes if p.sglang_rank and p.process not in with_groups]
    # Ranks that built no group at all: what NCCL would do was never reached, for a reason of their own
    # (Problems), not for want of a GPU; the NCCL lines would only repeat that.
    stopped_early = bool(bare) and not report.communicators
    judged_comms = [c for c in report.communicators if c.verdict != "absent"]
    if not judged_comms and not stopped_early:
        backends = sorted({c.backend for c in report.communicators if c.kind == "group" and c.backend})
        why = []
        if backends:
            why.append(f"device groups: {', '.join(backends)}")
        if any(c.kind == "pynccl" for c in report.communicators):
            why.append("SGLang's PyNccl unavailable: no GPU or no libnccl")
        reason = "; ".join(why) if why else "no SGLang group was recorded"
        out.not_here.append(f"NCCL communicators: none existed ({reason}), so the values NCCL itself uses "
                            "could not be checked")
    judged_reads = [r for r in report.nccl_reads.values() if r.get("verdict") != "absent"]
    if not judged_reads and not stopped_early:
        reason = ("NCCL never loaded in this launch" if not judged_comms else
                  "NCCL older than 2.28.7, or the plugin's native library is not installed")
        out.not_here.append(f"NCCL's own reads: none ({reason})")
    if not report.eagle:
        preflight = any(p.role.startswith("preflight") for p in report.processes)
        out.not_here.append("EAGLE groups: no EAGLE worker ran" + (" (preflight loads no model)" if preflight else ""))
    if bare:
        out.not_here.append(f"SGLang's groups: never built in {_plural(len(bare), 'rank')} (Problems says why)")

    if report.verdict == "fail":
        # Checking more on another machine is no use before what failed here is fixed.
        out.next.append("fix what Problems lists (README.md, Troubleshooting), then run it again")
    elif not judged_comms or not judged_reads:
        ranks = max(2, sum(1 for p in report.processes if p.sglang_rank))
        profile = shlex.quote(report.profile) if report.profile else "PROFILE"
        out.next.append(f"on a machine with NVIDIA GPUs: sglang-eagle-nccl preflight --tp {ranks} --profile {profile} "
                        "(NCCL communicators and NCCL's own reads); from a checkout, ci/gpu-check also runs an "
                        "EAGLE-3 engine and checks NCCL's debug log (docs/gpu-check.md)")
    return out


def coverage_lines(report: Report) -> list[str]:
    """The coverage as a few wrapped lines: one paragraph each for held, not here and next (none when
    no process left a valid record: there is nothing it could cover)."""
    if not report.processes:
        return []
    found = coverage(report)
    lines: list[str] = []
    for label, items in ((HELD, found.held), (NOT_HERE, found.not_here), (NEXT, found.next)):
        if items:
            lines += textwrap.wrap("; ".join(items), WIDTH, initial_indent=f"  {label:<11} ",
                                   subsequent_indent=" " * 14, break_on_hyphens=False, break_long_words=False)
    return lines
