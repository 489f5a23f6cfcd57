"""Showing a verdict: one screen per cluster by default, every record with ``--verbose`` (``--json``: all of it).

The default view has one section per machine (host name, boot, PID namespace: a container is a machine of
its own) with four lines -- processes, communicators, NCCL's own reads, the EAGLE groups -- and, under
them, every process or communicator that is not ✓ with why. Groups of one rank are counted, not listed
(a TP 16 launch has dozens). Machines that are all ✓ and whose four lines are the same, five or more of
them, are folded into one section with their count (3,000 alike hosts take five lines); every machine that is not all ✓ is
shown on its own. ``--verbose`` adds every process, every communicator, every read and the per-group
all-reduce tables, one section per machine.

Everything printed from a record is untrusted text (an audit directory may be copied, shared or
tampered with): every line goes through the one terminal escaper (:mod:`sglang_eagle_nccl.contract.terminal`:
control, bidirectional and invisible format characters), so a value cannot move the cursor, clear the
screen, reorder or forge a line of the verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from sglang_eagle_nccl.contract.terminal import printable
from sglang_eagle_nccl.offline.audit.judge import MARK, CommVerdict, ProcessVerdict, Report, shown

__all__ = ["format_text", "printable"]


def _is_helper(p: ProcessVerdict) -> bool:
    return not p.loaded_sglang and p.role not in ("launcher",) and not p.sglang_rank


def _machine_label(grouped: _ByMachine, machine: tuple[str, str, str]) -> str:
    host, boot, pidns = machine
    if grouped.host_names[host] == 1:
        return f"host {host}"
    # Several machines share the name (containers, cloned VMs): say what tells them apart.
    return f"host {host} (boot {boot[:8]}, pid namespace {pidns})"


def _counts(marks: Iterable[str]) -> str:
    counted = Counter(marks)
    return ", ".join(f"{MARK[v]} {counted[v]}" for v in ("fail", "warn", "ok", "absent") if counted[v])


def _comm_name(c: CommVerdict) -> str:
    return c.unique_name or c.group


_NO_PROCESS = object()  # before the first communicator (any process key differs from it)


class _ByMachine:
    """The report's processes, communicators, reads and EAGLE records grouped by machine once (a cluster's
    report has thousands of each: grouping per section would be quadratic)."""

    def __init__(self, report: Report) -> None:
        self.procs: dict[tuple[str, str, str], list[ProcessVerdict]] = {}
        machine_of: dict[str, tuple[str, str, str]] = {}
        for p in report.processes:
            self.procs.setdefault(p.machine, []).append(p)
            machine_of[p.process] = p.machine
        self.comms: dict[tuple[str, str, str], list[CommVerdict]] = {}
        # a process's communicators come one after another: the machine is looked up once per run of them
        process: object = _NO_PROCESS
        into: list[CommVerdict] = []
        for c in report.communicators:
            if c.process != process:
                process = c.process
                into = self.comms.setdefault(machine_of.get(process, ("", "", "")), [])
            into.append(c)
        self.reads: dict[tuple[str, str, str], list[dict]] = {}
        for key, r in report.nccl_reads.items():
            self.reads.setdefault(machine_of.get(r.get("process", key), ("", "", "")), []).append(r)
        # how many machines share each host name (counted once: a cluster has thousands of machines)
        self.host_names = Counter(m[0] for m in report.machines())
        self.eagle: dict[tuple[str, str, str], list[dict]] = {}
        for e in report.eagle:
            self.eagle.setdefault(machine_of.get(e.get("process", ""), ("", "", "")), []).append(e)


def _compact_host(report: Report, machine: tuple[str, str, str], grouped: _ByMachine) -> list[str]:
    procs = grouped.procs.get(machine, [])
    comms = grouped.comms.get(machine, [])
    lines = [f"{_machine_label(grouped, machine)}: {len(procs)} process(es)"]
    roles = Counter(("helper" if _is_helper(p) else p.role.split("_TP")[0].split("_DP")[0]) for p in procs)
    lines.append(f"  processes      {_counts(p.verdict for p in procs)}  ("
                 + ", ".join(f"{n} {role}" for role, n in sorted(roles.items())) + ")")
    multi = [c for c in comms if len(c.ranks) != 1]
    single = [c for c in comms if len(c.ranks) == 1]
    groups = Counter(f"{c.group}/{c.kind}" for c in multi)
    text = _counts(c.verdict for c in multi) or "(none recorded)"
    if groups:
        text += "  (" + ", ".join(f"{g} x{n}" if n > 1 else g for g, n in sorted(groups.items())) + ")"
    if single:
        text += f"; {len(single)} one-rank group(s) {_counts(c.verdict for c in single)}"
    lines.append(f"  communicators  {text}")
    reads = grouped.reads.get(machine, [])
    if reads:
        total = sum(len(r["reads"]) for r in reads)
        lines.append(f"  NCCL's reads   {_counts(r['verdict'] for r in reads)}  ({total} read(s) in {len(reads)} process(es))")
    else:
        lines.append("  NCCL's reads   – none recorded (NCCL < 2.28.7, no native plugins, or NCCL never loaded)")
    eagle = grouped.eagle.get(machine, [])
    if eagle:
        draft = sorted({str(g.get("unique_name") or g.get("group")) for e in eagle for g in (e.get("draft") or {}).values()})
        verify = sorted({str(g.get("unique_name") or g.get("group")) for e in eagle for g in (e.get("verify") or {}).values()})
        notes = sorted({str(e.get("draft_note")) for e in eagle if e.get("draft_note") and not e.get("draft")})
        lines.append(f"  EAGLE groups   {len(eagle)} worker(s): draft on {', '.join(draft) or '; '.join(notes) or 'unknown'}; "
                     f"verify on {', '.join(verify) or 'unknown'}")
    else:
        lines.append("  EAGLE groups   – no EAGLE worker")
    # only the ✗ and ⚠ ones are listed: picked before sorting (a machine has a hundred communicators)
    for p in sorted((p for p in procs if p.verdict in ("fail", "warn")), key=lambda x: (x.role, x.pid)):
        lines.append(f"    {MARK[p.verdict]} {p.role} pid {p.pid}: " + "; ".join(p.notes))
    for c in sorted((c for c in comms if c.verdict in ("fail", "warn")), key=lambda x: (x.pid, x.group, x.kind)):
        lines.append(f"    {MARK[c.verdict]} {c.role} pid {c.pid} {c.kind} {_comm_name(c)}: " + "; ".join(c.notes))
    return lines


def _verbose_host(report: Report, machine: tuple[str, str, str], grouped: _ByMachine) -> list[str]:
    procs = grouped.procs.get(machine, [])
    lines = [f"{_machine_label(grouped, machine)}", "", "Processes"]
    lines.append(f"  {'':2}{'role':<26}{'pid':>8}  {'patch set':<22} notes")
    helpers = [p for p in procs if _is_helper(p) and p.verdict == "ok"]
    for p in sorted(procs, key=lambda x: (x.role != "launcher", x.role, x.pid)):
        if p in helpers:
            continue
        note = "; ".join(p.notes) if p.notes else ""
        lines.append(f"  {MARK[p.verdict]} {p.role:<26}{p.pid:>8}  {(p.patch_set or '-'):<22} {note}")
    if helpers:
        lines.append(
            f"  ✓ {len(helpers)} helper process(es) that never imported SGLang (profile in force in each): "
            + ", ".join(sorted({p.role for p in helpers}))
        )
    lines += ["", "Communicators"]
    comms = grouped.comms.get(machine, [])
    if not comms:
        lines.append("  (none recorded)")
    for c in sorted(comms, key=lambda x: (x.pid, x.group, x.kind)):
        lines.append(
            f"  {MARK[c.verdict]} {c.role:<14}{c.pid:>8}  {c.kind:<6} {_comm_name(c):<20} ranks {c.ranks} "
            f"{'backend ' + c.backend if c.backend else ''}"
        )
        lines += [f"        {n}" for n in c.notes]
    lines += ["", "NCCL's own reads (native env plugin)"]
    reads = grouped.reads.get(machine, [])
    if not reads:
        lines.append(
            "  unavailable: no process recorded any (NCCL < 2.28.7 has no env plugin interface, the native plugins "
            "are not installed, or NCCL was never loaded in this launch)"
        )
    for r in sorted(reads, key=lambda x: x["pid"]):
        version = (f"NCCL {r.get('nccl_version') or '?'}, env plugin {r.get('env_plugin_abi') or '?'}"
                   if r.get("nccl_version") or r.get("env_plugin_abi") else "NCCL did not load the env plugin")
        lines.append(f"  {MARK[r['verdict']]} pid {r['pid']} ({version}): {len(r['reads'])} read(s)")
        lines += [f"        {x}" for x in read_lines(r["reads"])]
        if r.get("unrecorded"):
            lines.append(f"        ... and {r['unrecorded']} read(s) the library had no room to record one by one")
        lines += [f"        {n}" for n in r["notes"]]
    eagle = grouped.eagle.get(machine, [])
    if eagle:
        lines += ["", "EAGLE speculative decoding (no new groups: draft and verify reuse existing ones)"]
        for e in eagle:
            draft = sorted({str(g.get("unique_name") or g.get("group")) for g in (e.get("draft") or {}).values()})
            verify = sorted({str(g.get("unique_name") or g.get("group")) for g in (e.get("verify") or {}).values()})
            draft_text = ", ".join(draft) or (e.get("draft_note") or "unknown (the worker holds no group object)")
            verify_text = ", ".join(verify) or "unknown (the worker holds no group object)"
            lines.append(f"  pid {e['pid']} {e.get('worker')}: draft on {draft_text}; verify on {verify_text}")
    return lines


def read_lines(reads: list[dict[str, object]]) -> list[str]:
    """One line per variable NCCL read: what it got, from where, and how often."""
    out = []
    for r in sorted(reads, key=lambda x: (str(x["name"]), str(x.get("source")))):
        value = "(unset)" if r.get("value") is None else r["value"]
        count = r.get("count")
        out.append(f"{r['name']}={value}  [{r['source']}]"
                   + (f" x{count}" if isinstance(count, int) and count > 1 else ""))
    return out


def format_text(report: Report, *, verbose: bool = False) -> str:
    lines = [f"Audit of {', '.join(report.run_dirs) if len(report.run_dirs) > 1 else report.run_dir}"]
    if report.picked:
        lines.append(f"(picked the {report.picked})")
    lines += [f"Profile: {report.profile or '(unknown)'}", ""]
    machines = report.machines()
    grouped = _ByMachine(report)
    if verbose:
        for machine in machines:
            lines += _verbose_host(report, machine, grouped)
            lines.append("")
    else:
        lines += _folded_hosts(report, machines, grouped)
    if not machines:
        lines += ["(no process left valid records)", ""]
    if verbose and report.allreduce_paths:
        from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import format_paths

        lines.append("Which all-reduce runs, per group (first rank that recorded it)")
        for _group, description in sorted(report.allreduce_paths.items()):
            lines += [f"  {x}" for x in format_paths(description)]
        lines.append("")
    if report.sglang_writes:
        lines.append("SGLang's own NCCL writes")
        writes = report.sglang_writes if verbose else _distinct_writes(report.sglang_writes)
        for w in writes:
            why = f" (for --{str(w['for_correctness']).replace('_', '-')})" if w.get("for_correctness") else ""
            lines.append(f"  {w.get('name')}: {shown(w.get('before'))} -> {shown(w.get('after'))} in {w.get('where')}{why}")
        lines.append("")
    if report.unreadable:
        lines.append("Not judged (unreadable files and lines)")
        listed = report.unreadable if verbose else report.unreadable[:20]
        lines += [f"  ⚠ {u.text()}" for u in listed]
        if len(report.unreadable) > len(listed):
            lines.append(f"  ... and {len(report.unreadable) - len(listed)} more (--verbose or --json lists all)")
        lines.append("")
    lines += _copies_section(report, verbose) + _cut_lines_section(report, verbose)
    if report.problems:
        lines.append("Problems")
        lines += [f"  ✗ {p}" for p in report.problems]
        lines.append("")
    # Say what the ✓ covers: with no NCCL communicator checked (all "–", e.g. gloo on CPU) it vouches
    # for the processes only.
    checked_comms = any(c.verdict != "absent" for c in report.communicators)
    if not verbose:
        lines += _what_the_verdict_covers(report)
        lines.append("(--verbose: every process, communicator, NCCL read and all-reduce table; --json: every record)")
    lines.append(
        f"Verdict: {MARK[report.verdict]} "
        + {"ok": "the profile is in force in every audited process and communicator" if checked_comms else
                 "the profile is in force in every audited process (no NCCL communicator existed to check)",
           "warn": "in force, with warnings above",
           "fail": "the profile is NOT shown to be in force everywhere (see above)",
           "absent": "nothing to judge"}[report.verdict]
    )
    return "\n".join(printable(line) for line in lines)


def _what_the_verdict_covers(report: Report) -> list[str]:
    """In the default view, right above the verdict line (which stays the last): what was checked and
    held, what could not be checked here, what to run next (offline/audit/coverage.py)."""
    from sglang_eagle_nccl.offline.audit.coverage import coverage_lines

    lines = coverage_lines(report)
    return ["What the verdict covers", *lines, ""] if lines else []


def _distinct_writes(writes: list[dict[str, object]]) -> list[dict[str, object]]:
    # Every node's launcher reports the same writes: the default view lists each once.
    seen: set[tuple[object, ...]] = set()
    out = []
    for w in writes:
        key = (w.get("name"), w.get("before"), w.get("after"), w.get("where"))
        if key not in seen:
            seen.add(key)
            out.append(w)
    return out


# Fewer alike machines than this are shown one by one (a small launch reads better host by host).
FOLD_AT = 5


def _all_ok(machine: tuple[str, str, str], grouped: _ByMachine) -> bool:
    """Every process, communicator and NCCL read of the machine ✓ or – (nothing to list under it)."""
    fine = ("ok", "absent")
    return (all(p.verdict in fine for p in grouped.procs.get(machine, []))
            and all(c.verdict in fine for c in grouped.comms.get(machine, []))
            and all(r.get("verdict") in fine for r in grouped.reads.get(machine, [])))


def _folded_hosts(report: Report, machines: list[tuple[str, str, str]], grouped: _ByMachine) -> list[str]:
    """The default view's machine sections: all-✓ machines with the same four lines as one section with their
    count (at the place of the first of them), every other machine on its own."""
    blocks = [(m, _compact_host(report, m, grouped), _all_ok(m, grouped)) for m in machines]
    alike: dict[tuple[str, ...], list[tuple[str, str, str]]] = {}
    for machine, block, ok in blocks:
        if ok:
            alike.setdefault(tuple(block[1:]), []).append(machine)
    lines: list[str] = []
    shown: set[tuple[str, ...]] = set()
    for _machine, block, ok in blocks:
        same = alike.get(tuple(block[1:]), []) if ok else []
        if len(same) < FOLD_AT:
            lines += block + [""]
            continue
        if tuple(block[1:]) in shown:
            continue
        shown.add(tuple(block[1:]))
        names = [_machine_label(grouped, m).removeprefix("host ") for m in same]
        listed = ", ".join(names[:3]) + (f", ... {names[-1]}" if len(names) > 3 else "")
        count = block[0].rsplit(": ", 1)[-1]
        lines += [f"✓ {len(same)} hosts alike, each {count}: {listed} (--verbose or --json lists every one)"]
        lines += block[1:] + [""]
    return lines


def _copies_section(report: Report, verbose: bool) -> list[str]:
    """Copies that disagree (each place), and how many files were found more than once and reconciled."""
    conflicts = [c for c in report.copies if c.conflict]
    lines: list[str] = []
    if conflicts:
        lines.append("Copies that disagree (each judged as it is; the verdict is ⚠ at best, ✗ where a copy holds a ✗)")
        lines += [f"  ⚠ {c.text()}" for c in conflicts]
    reconciled = [c for c in report.copies if not c.conflict]
    if reconciled:
        if not conflicts:
            lines.append("Copies")
        if verbose:
            lines += [f"  {c.text()}" for c in reconciled]
        else:
            lines.append(f"  {len(reconciled)} process file(s) found in several places and counted once (identical "
                         "copies, or a prefix of a longer copy; --verbose lists them)")
    return lines + ([""] if lines else [])


def _cut_lines_section(report: Report, verbose: bool) -> list[str]:
    """Cut last lines (a process killed mid-write, a copy of a live file): listed, not a mark (see records)."""
    if not report.cut_lines:
        return []
    listed = report.cut_lines if verbose else report.cut_lines[:20]
    lines = ["Cut lines (the end of a file after its last newline: a process killed mid-write, or a copy of a file "
             "being written; not a mark)"]
    lines += [f"  {c.text()}" for c in listed]
    if len(report.cut_lines) > len(listed):
        lines.append(f"  ... and {len(report.cut_lines) - len(listed)} more (--verbose or --json lists all)")
    return lines + [""]
