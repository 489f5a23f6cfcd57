"""The verdict is a function of the set of evidence (offline/audit/read.py's docstring, docs/audit.md).

Hypothesis generates launches -- machines, processes, communicators, NCCL reads logs -- and lays their
files out in real directories: copies of a file in several directories, prefixes (an rsync taken while
the process ran), disagreeing copies, a record line written twice, a cut last line, stray reads logs the
process never declared, a directory named twice. The real ``load_report`` (and, for a sample, the real
``audit`` command) judges them, and the tests check

- the verdict against :func:`reference_verdict`, a few lines that say what ✓/⚠/✗ mean for the generated
  launch from its own description (not from the implementation's helpers);
- the rules as metamorphic properties: any order of the directories gives the same ``--json``; a
  directory named twice changes nothing; adding evidence of a ✗ never leaves a ✓; adding a stray never
  makes the verdict better.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.read import merge, read_evidence
from sglang_eagle_nccl.offline.audit.records import Budget
from support.audit_records import reads_header, reads_line, rec

GOOD = {"NCCL_PROTO": "LL"}
BAD = {"NCCL_PROTO": "Simple"}
MACHINES = [{"host": "a"}, {"host": "b"}, {"host": "a", "boot_id": "f" * 32}]
RANK = {"ok": 0, "warn": 1, "fail": 2}
META = {"profile": {"name": "p", "env": GOOD}}


# --- a launch, described -----------------------------------------------------------------------------------


@dataclass
class Proc:
    machine: int
    pid: int
    start_ok: bool
    comms: list[bool]  # one group_created per entry: its environment held the profile?
    reads: list[str] | None  # NCCL's reads log: one read per mark ("ok", "warn", "fail"), or no log
    declared: bool  # the process names its reads log (nccl_reads_log)
    full_dirs: list[int]  # where the whole record file is
    prefixes: list[tuple[int, int]]  # (directory, lines) copies of the first lines
    conflict: tuple[bool, bool, int] | None  # two copies that end differently: each last group ok?, its dir
    reads_dirs: list[int]
    reads_prefixes: list[tuple[int, int]]
    reads_conflict: tuple[str, str, int] | None
    stray: int | None  # a "(copy)" reads log the process never declared, in that directory
    duplicate_line: bool
    cut: bool


@dataclass
class Launch:
    dirs: int
    procs: list[Proc] = field(default_factory=list)


def reference_verdict(launch: Launch) -> str:
    """What the verdict must be, from the description alone.

    ✗ when anything judged did not hold the profile: a process's environment, a communicator's, a value
    NCCL read -- in any copy of the process's evidence (copies that disagree are each judged). ⚠ when
    nothing failed but something has a caveat or was not judged: NCCL got the profile's value while the
    environment said otherwise, copies that disagree, a reads log its process never declared (a stray,
    or an undeclared log). ✓ otherwise. Duplicated lines, prefix copies, directories named twice and
    cut last lines change nothing.
    """
    marks = ["ok"]
    for p in launch.procs:
        marks.append("ok" if p.start_ok else "fail")
        marks += ["ok" if ok else "fail" for ok in p.comms]
        if p.conflict is not None:
            marks += ["warn"] + ["ok" if ok else "fail" for ok in p.conflict[:2]]
        if p.reads is not None:
            if p.declared:
                marks += p.reads
                if p.reads_conflict is not None:
                    marks += ["warn", *p.reads_conflict[:2]]
            else:
                marks.append("warn")
        if p.stray is not None:
            marks.append("warn")
    return max(marks, key=RANK.__getitem__)


# --- the same launch, as files --------------------------------------------------------------------------------


def _machine(p: Proc) -> dict:
    return MACHINES[p.machine]


def record_lines(p: Proc) -> list[dict]:
    env = GOOD if p.start_ok else BAD
    m = _machine(p)
    lines = [
        rec("process_start", p.pid, machine=m, expected_env=GOOD, env=env, profile="p"),
        rec("process_role", p.pid, machine=m, title="sglang::scheduler_TP0"),
        rec("scheduler_start", p.pid, machine=m, env=env),
    ]
    for n, ok in enumerate(p.comms):
        lines.append(rec("group_created", p.pid, machine=m, group=f"g{n}", ranks=[0, 1], env=GOOD if ok else BAD,
                         torch_comm="lazy-nccl", group_overrides={}))
    if p.declared:
        lines.append(rec("nccl_reads_log", p.pid, machine=m, file=reads_name(p)))
    return lines


def conflict_line(p: Proc, ok: bool, which: str) -> dict:
    return rec("group_created", p.pid, machine=_machine(p), group=f"x{which}", ranks=[0, 1], env=GOOD if ok else BAD,
               torch_comm="lazy-nccl", group_overrides={})


def a_read(p: Proc, mark: str, n: int) -> dict:
    value = "Simple" if mark == "fail" else "LL"
    return reads_line("read", p.pid, name="NCCL_PROTO", value=value, source="profile",
                      environment="Simple" if mark == "warn" else value, disagrees=mark == "warn", time=1.0 + n)


def reads_lines(p: Proc) -> list[dict]:
    head = [reads_header(p.pid, _machine(p)), reads_line("env_init", p.pid, abi="v2", nccl_version="2.28.9")]
    return head + [a_read(p, mark, n) for n, mark in enumerate(p.reads or [])]


def stem(p: Proc) -> str:
    return f"{_machine(p)['host']}-{_machine(p).get('boot_id', '0')[:4]}-{p.pid}"


def reads_name(p: Proc) -> str:
    return f"nccl-reads-{stem(p)}.jsonl"


def _write(path: Path, lines: list[dict], *, duplicate: bool = False, cut: bool = False) -> None:
    texts = [json.dumps(line) for line in lines]
    if duplicate and texts:
        texts.insert(1, texts[0])
    data = "".join(t + "\n" for t in texts)
    if cut:
        data += json.dumps(lines[-1])[:-7]  # a record cut before its end: never valid JSON
    path.write_text(data)


def lay_out(launch: Launch, root: Path) -> list[Path]:
    dirs = [root / f"d{n}" for n in range(launch.dirs)]
    for d in dirs:
        d.mkdir(parents=True)
        (d / "launch.json").write_text(json.dumps(META))
    for p in launch.procs:
        lines = record_lines(p)
        name = f"proc-{stem(p)}.jsonl"
        for n, d in enumerate(p.full_dirs):
            if p.conflict is None:
                _write(dirs[d] / name, lines, duplicate=p.duplicate_line and n == 0, cut=p.cut and n == 0)
            else:
                _write(dirs[d] / name, lines + [conflict_line(p, p.conflict[0], "a")], duplicate=p.duplicate_line)
        for d, k in p.prefixes:
            _write(dirs[d] / f"proc-{stem(p)}.early.jsonl", lines[:k], cut=p.cut)
        if p.conflict is not None:
            _write(dirs[p.conflict[2]] / f"proc-{stem(p)}.other.jsonl", lines + [conflict_line(p, p.conflict[1], "b")])
        if p.reads is not None:
            rlines = reads_lines(p)
            for n, d in enumerate(p.reads_dirs):
                tail = [] if p.reads_conflict is None else [a_read(p, p.reads_conflict[0], 90)]
                _write(dirs[d] / reads_name(p), rlines + tail, cut=p.cut and n == 0)
            for d, k in p.reads_prefixes:
                if d not in p.reads_dirs:  # a reads log keeps its name in every copy
                    _write(dirs[d] / reads_name(p), rlines[:k])
            if p.reads_conflict is not None:
                other = next(d for d in range(launch.dirs) if d not in p.reads_dirs)
                _write(dirs[other] / reads_name(p), rlines + [a_read(p, p.reads_conflict[1], 91)])
        if p.stray is not None:
            _write(dirs[p.stray] / f"nccl-reads-{stem(p)} (copy).jsonl", reads_lines(Proc(**{**p.__dict__, "reads": ["ok"]})))
    return dirs


# --- generating launches ---------------------------------------------------------------------------------


MARK = st.sampled_from(["ok", "ok", "warn", "fail"])


@st.composite
def processes(draw: st.DrawFn, pid: int, dirs: int) -> Proc:
    comms = draw(st.lists(st.booleans(), min_size=1, max_size=2))
    n_lines = 3 + len(comms)
    reads = draw(st.none() | st.lists(MARK, max_size=2))
    declared = reads is not None and draw(st.booleans())
    full_dirs = draw(st.lists(st.integers(0, dirs - 1), min_size=1, max_size=dirs, unique=True))
    reads_dirs = draw(st.lists(st.integers(0, dirs - 1), min_size=1, max_size=max(1, dirs - 1), unique=True))
    reads_conflict = None
    if reads is not None and len(reads_dirs) < dirs and draw(st.booleans()):
        reads_conflict = (draw(MARK), draw(MARK), 0)
    return Proc(
        machine=draw(st.integers(0, len(MACHINES) - 1)),
        pid=pid,
        start_ok=draw(st.booleans() | st.just(True)),
        comms=comms,
        reads=reads,
        declared=declared,
        full_dirs=full_dirs,
        prefixes=draw(st.lists(st.tuples(st.integers(0, dirs - 1), st.integers(1, n_lines)), max_size=2,
                               unique_by=lambda t: t[0])),
        conflict=draw(st.none() | st.tuples(st.booleans(), st.booleans(), st.integers(0, dirs - 1))),
        reads_dirs=reads_dirs,
        reads_prefixes=draw(st.lists(st.tuples(st.integers(0, dirs - 1), st.integers(1, 2)), max_size=1)),
        reads_conflict=reads_conflict,
        stray=draw(st.none() | st.integers(0, dirs - 1)),
        duplicate_line=draw(st.booleans()),
        cut=draw(st.booleans()),
    )


@st.composite
def launches(draw: st.DrawFn) -> Launch:
    dirs = draw(st.integers(1, 3))
    count = draw(st.integers(1, 3))
    return Launch(dirs, [draw(processes(100 + n, dirs)) for n in range(count)])


RULES = settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def judged(dirs: list[Path]) -> tuple[str, str]:
    report = load_report([str(d) for d in dirs])
    return report.verdict, json.dumps(report.to_dict(), sort_keys=True)


# --- the properties --------------------------------------------------------------------------------------------


@RULES
@given(launches(), st.randoms(use_true_random=False))
def test_the_verdict_is_the_reference_verdict_in_any_order_and_with_any_directory_twice(launch, rnd):
    with tempfile.TemporaryDirectory() as tmp:
        dirs = lay_out(launch, Path(tmp))
        verdict, as_json = judged(dirs)
        assert verdict == reference_verdict(launch), as_json
        shuffled = dirs[:]
        rnd.shuffle(shuffled)
        assert judged(shuffled) == (verdict, as_json)  # order-independent: the same --json
        twice = shuffled + [shuffled[0], Path(tmp) / ".." / Path(tmp).name / shuffled[-1].name]
        assert judged(twice) == (verdict, as_json)  # idempotent: a directory named twice, by two paths


@RULES
@given(launches(), st.data())
def test_adding_evidence_of_a_fail_never_leaves_a_pass(launch, data):
    with tempfile.TemporaryDirectory() as tmp:
        dirs = lay_out(launch, Path(tmp))
        p = data.draw(st.sampled_from(launch.procs))
        d = data.draw(st.sampled_from(dirs))
        how = data.draw(st.sampled_from(["record", "read", "new-process"]))
        if how == "record":  # a longer copy of the process's records, ending in a failing communicator
            lines = record_lines(p) + [conflict_line(p, False, "z")]
            _write(d / f"proc-{stem(p)}.later.jsonl", lines)
        elif how == "read" and p.declared:  # a longer copy of its declared reads log with a failing read
            _write(d / reads_name(p), reads_lines(p) + [a_read(p, "fail", 99)])
        else:  # another process of the launch whose environment missed the profile
            q = Proc(**{**p.__dict__, "pid": 999, "start_ok": False})
            _write(d / f"proc-{stem(q)}.jsonl", record_lines(q))
        assert judged(dirs)[0] == "fail"


@RULES
@given(launches(), st.data())
def test_a_stray_reads_log_never_makes_the_verdict_better(launch, data):
    with tempfile.TemporaryDirectory() as tmp:
        dirs = lay_out(launch, Path(tmp))
        before = judged(dirs)[0]
        p = data.draw(st.sampled_from(launch.procs))
        d = data.draw(st.sampled_from(dirs))
        name = data.draw(st.sampled_from(["nccl-reads-{} (copy).jsonl", "nccl-reads-{}-0.jsonl", "nccl-reads-zz{}.jsonl"]))
        _write(d / name.format(stem(p)), reads_lines(Proc(**{**p.__dict__, "reads": ["ok"]})))
        after = judged(dirs)[0]
        assert RANK[after] >= RANK[before] and after != "ok"


@settings(max_examples=8, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(launches())
def test_the_command_says_what_the_api_says(launch):
    with tempfile.TemporaryDirectory() as tmp:
        dirs = lay_out(launch, Path(tmp))
        verdict, as_json = judged(dirs)
        result = CliRunner().invoke(main, ["audit", *map(str, reversed(dirs)), "--json"])
        assert result.exit_code == (1 if verdict == "fail" else 0), result.output
        assert json.dumps(json.loads(result.output), sort_keys=True) == as_json


# --- the shrunk examples, kept -------------------------------------------------------------------------------


def _one(tmp: Path, **changes) -> tuple[Launch, list[Path]]:
    base = dict(machine=0, pid=100, start_ok=True, comms=[True], reads=["ok"], declared=True, full_dirs=[0],
                prefixes=[], conflict=None, reads_dirs=[0], reads_prefixes=[], reads_conflict=None, stray=None,
                duplicate_line=False, cut=False)
    launch = Launch(2, [Proc(**{**base, **changes})])
    return launch, lay_out(launch, tmp)


def test_an_early_copy_of_a_reads_log_never_hides_a_later_fail_whatever_the_order(tmp_path):
    # issue 24: `audit A B` said ✓ and `audit B A` ✗ when A held an rsync copy taken before the ✗ read.
    launch, (a, b) = _one(tmp_path, reads=["ok", "fail"], reads_dirs=[1], reads_prefixes=[(0, 3)])
    assert (a / reads_name(launch.procs[0])).read_text().count("\n") == 3  # the early copy: no failing read
    assert judged([a, b])[0] == judged([b, a])[0] == "fail"


def test_a_stray_copy_never_displaces_the_declared_reads_log(tmp_path):
    # issue 24: a "... (copy).jsonl" sorting after the declared log replaced it, then was dropped: ✗ became ⚠.
    launch, (a, _) = _one(tmp_path, reads=["fail"], stray=0)
    assert judged([a])[0] == "fail"


def test_a_cut_last_line_is_listed_and_changes_no_mark(tmp_path):
    launch, (a, _) = _one(tmp_path, cut=True, reads=None, declared=False)
    report = load_report([a])
    assert report.verdict == "ok" and not report.unreadable
    cuts = {c.file: c for c in report.cut_lines}
    cut = cuts[f"proc-{stem(launch.procs[0])}.jsonl"]
    assert cut.process is not None and cut.process.endswith("/100/1100") and not cut.whole_record
    assert cut.offset == len((a / cut.file).read_bytes()) - cut.size


def test_a_cut_line_in_one_of_several_directories_names_that_directory(tmp_path):
    # Rule 5 with several directories: the listing says where the cut copy lies (one directory: no name).
    for holder in (0, 1):
        launch, dirs = _one(tmp_path / str(holder), cut=True, reads=None, declared=False, full_dirs=[holder])
        for order in (dirs, dirs[::-1]):
            (cut,) = load_report(order).cut_lines
            assert (cut.directory, cut.file) == (str(dirs[holder]), f"proc-{stem(launch.procs[0])}.jsonl")
        (alone,) = load_report([dirs[holder]]).cut_lines
        assert alone.directory == ""


def test_one_directory_merged_twice_by_two_paths_is_read_once_and_named_by_the_shorter(tmp_path):
    # Rule 2 through merge(): evidence read separately (one read per node, however gathered) that is one
    # directory seen by two paths counts once, named the same way whatever the order.
    _, (a, _) = _one(tmp_path / "x", reads=["ok", "fail"])
    longer = tmp_path / "a-longer-name-for-the-same-directory"
    longer.symlink_to(a, target_is_directory=True)
    once = merge([read_evidence(a, Budget())])
    for order in ([a, longer], [longer, a]):
        both = merge([read_evidence(p, Budget()) for p in order])
        assert both.run_dirs == [str(a)] and len(both.evidence) == 1
        assert [p.key for p in both.processes] == [p.key for p in once.processes]
        assert both.copies == once.copies == []


def test_a_reads_log_whose_process_left_no_records_never_hides_the_next_one(tmp_path):
    # Rule 4: a reads log without its process's records is listed as not judged, and every other reads log
    # is still judged -- whichever of the two comes first.
    base = dict(machine=0, start_ok=True, comms=[True], declared=True, full_dirs=[0], prefixes=[], conflict=None,
                reads_dirs=[0], reads_prefixes=[], reads_conflict=None, stray=None, duplicate_line=False, cut=False)
    for orphan_pid, failing_pid in ((100, 200), (200, 100)):
        procs = [Proc(pid=orphan_pid, reads=["ok"], **base), Proc(pid=failing_pid, reads=["fail"], **base)]
        launch = Launch(1, procs)
        (d,) = lay_out(launch, tmp_path / str(orphan_pid))
        (d / f"proc-{stem(procs[0])}.jsonl").unlink()
        report = load_report([d])
        assert report.verdict == "fail", (orphan_pid, report.problems)
        assert [u.file for u in report.unreadable if "left no audit records" in u.text()] == [reads_name(procs[0])]


def test_record_files_that_hold_no_record_cannot_be_judged(tmp_path):
    # Exit 2, never a verdict: the files are there and not one record could be read (empty: nothing to list).
    launch, (a, _) = _one(tmp_path, reads=None, declared=False)
    (a / f"proc-{stem(launch.procs[0])}.jsonl").write_text("")
    result = CliRunner().invoke(main, ["audit", str(a)])
    assert result.exit_code == 2, result.output
    assert f"no valid audit record could be read in {a}" in result.output


def test_copies_that_disagree_are_listed_with_both_places_and_judged_each(tmp_path):
    launch, (a, b) = _one(tmp_path, conflict=(True, False, 1), full_dirs=[0])
    report = load_report([a, b])
    assert report.verdict == "fail"
    (note,) = [c for c in report.copies if c.conflict]
    assert sorted(p for v in note.versions for p in v) == sorted(
        [f"{a}/proc-{stem(launch.procs[0])}.jsonl", f"{b}/proc-{stem(launch.procs[0])}.other.jsonl"])
    launch, (a, b) = _one(tmp_path / "2", conflict=(True, True, 1), full_dirs=[0])
    assert load_report([a, b]).verdict == "warn"  # neither copy fails: ⚠ at best, never ✓
