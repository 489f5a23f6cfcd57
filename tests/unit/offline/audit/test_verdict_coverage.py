"""A verdict that teaches (issue 27): under the verdict, what was checked and held, what could not be
checked here and why, what to run next (offline/audit/coverage.py); and a rank that stopped says why
(rank_stopped) instead of the audit guessing.

Generated reports are held to a reference of the rules, written here from the marks alone: "held"
never counts what failed and names NCCL communicators only when one was checked; "not here" names
NCCL communicators / NCCL's reads exactly when none was judged (unless the ranks never built a group,
for a reason of their own); "next" gives the GPU command exactly when something NCCL-level was not
checked and the verdict did not fail, and points at Problems exactly when it failed.
"""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.offline.audit.coverage import coverage, coverage_lines
from sglang_eagle_nccl.offline.audit.judge import CommVerdict, ProcessVerdict, Report, load_report, worst
from sglang_eagle_nccl.offline.audit.render import format_text
from support.written_launch import new_launch, write_process

M = ("h", "b" * 32, "4026531836")
ENV = {"NCCL_PROTO": "LL"}
PROFILE = {"name": "pcie-8gpu", "env": ENV, "policy": {"sglang_wins": []}}
ROLES = ("launcher", "scheduler_TP0", "scheduler_TP1", "preflight_TP0", "detokenizer")
VERDICTS = ("ok", "warn", "fail", "absent")


@st.composite
def reports(draw):
    procs = []
    for pid in range(100, 100 + draw(st.integers(0, 4))):
        role = draw(st.sampled_from(ROLES))
        procs.append(ProcessVerdict(
            pid=pid, role=role, file=f"proc-{pid}.jsonl", verdict=draw(st.sampled_from(("ok", "warn", "fail"))),
            sglang_rank=role.startswith(("scheduler", "preflight")), host="h", process=f"h/{pid}", machine=M,
        ))
    comms = []
    for _ in range(draw(st.integers(0, 5)) if procs else 0):
        p = draw(st.sampled_from(procs))
        kind = draw(st.sampled_from(("group", "pynccl")))
        comms.append(CommVerdict(
            pid=p.pid, role=p.role, kind=kind, group=draw(st.sampled_from(("tp", "world", "pp"))), unique_name=None,
            ranks=draw(st.sampled_from(([0], [0, 1]))), rank=0,
            backend=draw(st.sampled_from(("nccl", "gloo", None))) if kind == "group" else None,
            verdict=draw(st.sampled_from(VERDICTS)), host="h", process=p.process,
        ))
    reads = {p.process: {"verdict": draw(st.sampled_from(VERDICTS)), "reads": []}
             for p in procs if draw(st.booleans())}
    agreements = [{"group": draw(st.sampled_from(("tp", "world"))),
                   "ranks": draw(st.sampled_from(([0], [0, 1], [0, 1, 2], [1, 2, 3], [0, 2, 3], [4]))),
                   "process": draw(st.sampled_from(procs)).process} for _ in range(draw(st.integers(0, 3)) if procs else 0)]
    eagle = [{"pid": p.pid} for p in procs[:draw(st.integers(0, 2))]]
    problems = ["something"] if draw(st.booleans()) else []
    verdict = worst([p.verdict for p in procs] + [c.verdict for c in comms] + (["fail"] if problems else []))
    return Report(run_dir="r", profile=draw(st.sampled_from(("pcie-8gpu", None, "pcie-8gpu-eagle", "/etc/" + "nccl-profiles/" * 9 + "p.toml"))), verdict=verdict,
                  processes=procs,
                  communicators=comms, eagle=eagle, sglang_writes=[], problems=problems, nccl_reads=reads,
                  agreements=agreements)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


def reference_text(report: Report) -> tuple[list[str], list[str], list[str]]:
    """Every item of held / not here / next, word for word, from the rules of the module docstring."""
    held: list[str] = []
    ok = [p for p in report.processes if p.verdict in ("ok", "warn")]
    failing = {p.process for p in report.processes if p.verdict == "fail"}
    if ok:
        kinds = Counter("launcher" if p.role == "launcher" else "SGLang rank" if p.sglang_rank else "other process"
                        for p in ok)
        held.append(f"the profile in {_plural(len(ok), 'process')} from their start ("
                    + ", ".join(_plural(n, k) for k, n in sorted(kinds.items())) + ")")
        handed = sum(p.role != "launcher" for p in ok)
        if handed:
            held.append(f"the hand-off: {handed} of them applied the profile the launch handed down")
    agreed = [a for a in report.agreements if len(a["ranks"]) > 1 and a["process"] not in failing]
    if agreed:
        groups = sorted({a["group"] for a in agreed})
        ranks = sorted({r for a in agreed for r in a["ranks"]})
        text = (f"ranks {ranks[0]}-{ranks[-1]}" if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1))
                else "rank(s) " + ", ".join(map(str, ranks)))
        held.append(f"cross-rank agreement: {text} agreed on every must-match variable in "
                    f"{_plural(len(groups), 'group')} ({', '.join(groups)})")
    built = sorted({c.group for c in report.communicators
                    if c.kind == "group" and c.verdict != "fail" and c.process not in failing})
    if built:
        held.append(f"{_plural(len(built), 'SGLang group')} built with the profile in force ({', '.join(built)})")
    checked = [c for c in report.communicators if c.verdict in ("ok", "warn")]
    if checked:
        kinds = Counter(f"{c.group}/{c.kind}" for c in checked)
        held.append(f"{_plural(len(checked), 'NCCL communicator')} checked ("
                    + ", ".join(k if n == 1 else f"{k} x{n}" for k, n in sorted(kinds.items())) + ")")
    matched = sum(r["verdict"] in ("ok", "warn") for r in report.nccl_reads.values())
    if matched:
        held.append(f"NCCL's own reads: the profile's values in {_plural(matched, 'process')}")
    if report.eagle:
        held.append(f"EAGLE: the draft and verify groups of {_plural(len(report.eagle), 'worker')}")

    here: list[str] = []
    with_groups = {c.process for c in report.communicators}
    bare = [p for p in report.processes if p.sglang_rank and p.process not in with_groups]
    early = bool(bare) and not report.communicators
    comms_judged = any(c.verdict != "absent" for c in report.communicators)
    reads_judged = any(r["verdict"] != "absent" for r in report.nccl_reads.values())
    if not comms_judged and not early:
        why = []
        backends = sorted({c.backend for c in report.communicators if c.kind == "group" and c.backend})
        if backends:
            why.append("device groups: " + ", ".join(backends))
        if any(c.kind == "pynccl" for c in report.communicators):
            why.append("SGLang's PyNccl unavailable: no GPU or no libnccl")
        here.append(f"NCCL communicators: none existed ({'; '.join(why) or 'no SGLang group was recorded'}), "
                    "so the values NCCL itself uses could not be checked")
    if not reads_judged and not early:
        here.append("NCCL's own reads: none (" + ("NCCL older than 2.28.7, or the plugin's native library is not "
                    "installed" if comms_judged else "NCCL never loaded in this launch") + ")")
    if not report.eagle:
        preflight = any(p.role.startswith("preflight") for p in report.processes)
        here.append("EAGLE groups: no EAGLE worker ran" + (" (preflight loads no model)" if preflight else ""))
    if bare:
        here.append(f"SGLang's groups: never built in {_plural(len(bare), 'rank')} (Problems says why)")

    nxt: list[str] = []
    if report.verdict == "fail":
        nxt.append("fix what Problems lists (README.md, Troubleshooting), then run it again")
    elif not comms_judged or not reads_judged:
        ranks = max(2, sum(p.sglang_rank for p in report.processes))
        nxt.append(f"on a machine with NVIDIA GPUs: sglang-eagle-nccl preflight --tp {ranks} --profile "
                   f"{report.profile or 'PROFILE'} (NCCL communicators and NCCL's own reads); from a checkout, "
                   "ci/gpu-check also runs an EAGLE-3 engine and checks NCCL's debug log (docs/gpu-check.md)")
    return held, here, nxt


@settings(max_examples=300)
@given(report=reports())
def test_coverage_says_exactly_what_the_reference_says(report):
    got = coverage(report)
    assert (got.held, got.not_here, got.next) == reference_text(report)
    # The lines: each paragraph wrapped at 100 columns under its label, only at spaces, nothing lost.
    lines = coverage_lines(report)
    if not report.processes:
        assert lines == []
        return
    paragraphs: list[list[str]] = []
    for line in lines:
        if line[2:3] in "✓–→":
            paragraphs.append([line])
        else:
            assert line.startswith(" " * 14) and not line[14:15].isspace(), line
            paragraphs[-1].append(line)
    labels = [(label, items) for label, items in (("✓ held", got.held), ("– not here", got.not_here),
                                                  ("→ next", got.next)) if items]
    assert len(paragraphs) == len(labels)
    for lines_of, (label, items) in zip(paragraphs, labels, strict=True):
        assert lines_of[0].startswith(f"  {label:<11} ")
        words = " ".join(line[14:] for line in lines_of).split(" ")
        assert words == "; ".join(items).split(" ")  # broken only between words, none split at a hyphen
        for line, after in zip(lines_of, lines_of[1:], strict=False):
            # Filled to 100 columns: a line ends where the next word would not fit (a longer word overflows).
            assert len(line) <= 100 or " " not in line[14:], line
            assert len(line) + 1 + len(after[14:].split(" ")[0]) > 100, (line, after)


def reference(report: Report) -> dict[str, object]:
    held = [p for p in report.processes if p.verdict in ("ok", "warn")]
    with_groups = {c.process for c in report.communicators}
    stopped_early = any(p.sglang_rank and p.process not in with_groups for p in report.processes) \
        and not report.communicators
    comms_judged = any(c.verdict != "absent" for c in report.communicators)
    reads_judged = any(r["verdict"] != "absent" for r in report.nccl_reads.values())
    return {
        "held processes": len(held),
        "comms checked": any(c.verdict in ("ok", "warn") for c in report.communicators),
        "comms not here": not comms_judged and not stopped_early,
        "reads not here": not reads_judged and not stopped_early,
        "gpu next": report.verdict != "fail" and (not comms_judged or not reads_judged),
        "problems next": report.verdict == "fail",
    }


@settings(max_examples=300)
@given(report=reports())
def test_coverage_follows_the_rules(report):
    want = reference(report)
    got = coverage(report)
    held = " ; ".join(got.held)
    not_here = " ; ".join(got.not_here)
    nxt = " ; ".join(got.next)
    count = re.search(r"the profile in (\d+) process", held)
    assert (int(count.group(1)) if count else 0) == want["held processes"]
    assert ("NCCL communicator" in held) == want["comms checked"]
    assert ("NCCL communicators: none existed" in not_here) == want["comms not here"]
    assert ("NCCL's own reads: none" in not_here) == want["reads not here"]
    assert ("sglang-eagle-nccl preflight --tp" in nxt) == want["gpu next"]
    assert ("Problems" in nxt) == want["problems next"]
    # A group is "built with the profile in force" only from a record that did not fail, in a process
    # that did not fail.
    built = re.search(r"built with the profile in force \(([^)]*)\)", held)
    failing = {p.process for p in report.processes if p.verdict == "fail"}
    fine = {c.group for c in report.communicators
            if c.kind == "group" and c.verdict != "fail" and c.process not in failing}
    assert (set(built.group(1).split(", ")) if built else set()) == fine
    lines = coverage_lines(report)
    assert all(len(line) <= 100 or " " not in line.strip() for line in lines)


def _rank(pid: int, *events):
    start = ("process_start", {"expected_env": dict(ENV), "env": dict(ENV), "profile": "pcie-8gpu",
                               "group_envs": {}, "sglang_wins": []})
    return [start, ("process_role", {"title": f"sglang::preflight_TP{pid - 100}"}), *events]


def test_a_rank_that_never_imported_sglang_is_named_with_its_cause(tmp_path):
    """The first hour of issue 27: each rank 'operator torchvision::nms does not exist'; the audit
    said 'recorded no communicator (group hooks not installed?)'."""
    run = new_launch(tmp_path / "audit", PROFILE)
    stop = ("rank_stopped", {"stage": "import SGLang", "error": "RuntimeError: operator torchvision::nms does not exist"})
    for pid in (100, 101):
        write_process(run, pid, _rank(pid, stop))
    report = load_report(run)
    assert report.verdict == "fail"
    assert report.problems == [
        f"preflight_TP{pid - 100} pid {pid} on h: SGLang was never imported: "
        "RuntimeError: operator torchvision::nms does not exist" for pid in (100, 101)
    ]
    text = " ".join(format_text(report).split())  # the coverage lines are wrapped
    assert "hooks not installed" not in text
    assert "SGLang's groups: never built in 2 ranks" in text
    assert "fix what Problems lists (README.md, Troubleshooting)" in text
    assert "preflight --tp" not in text  # no GPU advice before what failed here is fixed


def test_a_rank_stopped_later_names_its_stage(tmp_path):
    run = new_launch(tmp_path / "audit", PROFILE)
    write_process(run, 100, _rank(100, ("rank_stopped", {"stage": "SGLang's distributed init",
                                                          "error": "TimeoutError: rendezvous"})))
    report = load_report(run)
    assert report.problems == ["preflight_TP0 pid 100 on h: stopped at SGLang's distributed init: TimeoutError: rendezvous"]


def test_a_rank_without_groups_and_without_a_cause_says_only_what_is_seen(tmp_path):
    run = new_launch(tmp_path / "audit", PROFILE)
    write_process(run, 100, _rank(100))
    report = load_report(run)
    assert report.problems == ["preflight_TP0 pid 100 on h recorded no communicator: it built no SGLang group and "
                               "left no record of why (its own output says where it stopped)"]


def test_a_cpu_preflight_says_what_it_proved_and_what_to_run_on_a_gpu(tmp_path):
    """The shape of a real CPU preflight (gloo groups, PyNccl unavailable, ranks that agreed)."""
    run = new_launch(tmp_path / "audit", PROFILE)
    for pid in (100, 101):
        events = []
        for group in ("world", "tp"):
            events += [("consistency_ok", {"group": group, "ranks": [0, 1]}),
                       ("group_created", {"group": group, "unique_name": f"{group}:0", "ranks": [0, 1],
                                          "env": dict(ENV), "device_group_backend": "gloo", "torch_comm": "none"})]
        events.append(("pynccl_created", {"group": "tp", "env": dict(ENV), "available": False, "disabled": False}))
        write_process(run, pid, _rank(pid, *events))
    report = load_report(run)
    assert report.verdict == "ok"
    text = " ".join(format_text(report).split())  # the coverage lines are wrapped
    assert "✓ held the profile in 2 processes from their start (2 SGLang ranks)" in text
    assert "rank(s) 0, 1 agreed on every must-match variable in 2 groups (tp, world)" in text
    assert "NCCL communicators: none existed (device groups: gloo; SGLang's PyNccl unavailable" in text
    assert "on a machine with NVIDIA GPUs: sglang-eagle-nccl preflight --tp 2 --profile pcie-8gpu" in text


def test_the_backends_of_the_groups_are_all_named():
    procs = [ProcessVerdict(pid=1, role="preflight_TP0", file="f", verdict="ok", sglang_rank=True, host="h",
                            process="h/1", machine=M)]
    comms = [CommVerdict(pid=1, role="preflight_TP0", kind="group", group=g, unique_name=None, ranks=[0, 1], rank=0,
                         backend=b, verdict="absent", host="h", process="h/1") for g, b in (("tp", "gloo"), ("pp", "mpi"))]
    report = Report(run_dir="r", profile="p", verdict="ok", processes=procs, communicators=comms, eagle=[],
                    sglang_writes=[], problems=[])
    assert coverage(report).not_here[0].startswith("NCCL communicators: none existed (device groups: gloo, mpi)")
