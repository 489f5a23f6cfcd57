"""Copies that disagree are each judged, and the worse one counts (offline/audit/judge.py, read.py rule 3).

Hypothesis generates one SGLang scheduler whose audit records exist in 1-3 versions (copies that end
differently: each version changed the profile to a value of its own) and whose NCCL reads log exists in
1-3 versions (each with reads of its own), every version written by the real writers and copied, under
the names they give, into one or two of the launch directories audited together. The real
``load_report`` judges them, against a reference written here from the description alone:

- each version of the records is judged with its own expectation against every version of the reads
  log; the reads verdict of a records version is the worst of those (– below ✓: a log where NCCL read
  nothing the profile sets never outweighs a check that held), the first of equals in the reader's order;
- the reads section (``--json`` nccl_reads) shows the worst of the records versions' reads verdicts, the
  first of equals in the order the processes are listed, with that version's notes;
- a version's verdict is the worst of its reads verdict and a ⚠ for each kind of copies that disagree;
  the ⚠ notes name every place of every version: "this one from <places>; other version(s) from
  <places> / <places>" for the records, "<places> / <places>" for the reads log.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.contract import launch_dir
from sglang_eagle_nccl.offline.audit.judge import judge, judge_launch, load_report
from sglang_eagle_nccl.offline.audit.read import read_launch_records
from support.audit_records import ident
from support.written_launch import new_launch, write_process, write_reads_log

PROFILE = {"name": "p", "env": {"NCCL_PROTO": "LL"}}
VALUES = ("LL", "LL128", "Simple")
RANK = {"absent": -1, "ok": 0, "warn": 1, "fail": 2}
RECORDS_NOTE = "copies of its records disagree: this one from "
READS_NOTE = "copies of its NCCL reads log disagree: "
WORSE = " (each judged; the worse counts)"
READS_PREFIX = "NCCL's own reads: "


@dataclass
class Scheduler:
    expected: list[str]  # per records version: the NCCL_PROTO its last profile_changed expects
    record_dirs: list[list[int]]  # per records version: the directories holding a copy
    reads: list[list[tuple[str, bool]]]  # per reads version: NCCL_PROTO reads (value, environment disagreed)
    order: list[int]  # per reads version: its place in the reader's order (the tag read it starts with)
    reads_dirs: list[list[int]]  # per reads version: the directories holding a copy (disjoint: one name)
    dirs: int


@st.composite
def schedulers(draw: st.DrawFn) -> Scheduler:
    n_records = draw(st.integers(1, 3))
    n_reads = draw(st.integers(1, 3))
    dirs = n_reads + draw(st.integers(0, 1))
    owner = list(range(n_reads)) + [draw(st.integers(-1, n_reads - 1)) for _ in range(dirs - n_reads)]
    owner = draw(st.permutations(owner))
    return Scheduler(
        expected=[draw(st.sampled_from(VALUES)) for _ in range(n_records)],
        record_dirs=[draw(st.lists(st.integers(0, dirs - 1), min_size=1, max_size=2, unique=True))
                     for _ in range(n_records)],
        reads=[draw(st.lists(st.tuples(st.sampled_from(VALUES), st.booleans()), max_size=2)) for _ in range(n_reads)],
        order=draw(st.permutations(range(n_reads))),
        reads_dirs=[[d for d in range(dirs) if owner[d] == v] for v in range(n_reads)],
        dirs=dirs,
    )


# --- the reference ----------------------------------------------------------------------------------------


def reads_verdict(reads: list[tuple[str, bool]], expected: str) -> str:
    marks = ["fail" if value != expected else "warn" if disagrees else "ok" for value, disagrees in reads]
    return max(marks, key=RANK.__getitem__) if marks else "absent"


def shown_reads_version(s: Scheduler, r: int) -> int:
    """The reads version that counts for records version ``r``: the worst, the first of equals in reader order."""
    by_order = sorted(range(len(s.reads)), key=lambda v: s.order[v])
    return max(by_order, key=lambda v: RANK[reads_verdict(s.reads[v], s.expected[r])])


def version_verdict(s: Scheduler, r: int) -> str:
    marks = ["ok", reads_verdict(s.reads[shown_reads_version(s, r)], s.expected[r])]
    marks += ["warn"] * ((len(s.expected) > 1) + (len(s.reads) > 1))
    return max(marks, key=RANK.__getitem__)


# --- the files --------------------------------------------------------------------------------------------

PID = 100


def record_name(r: int) -> str:
    return launch_dir.process_file_name(ident(PID)).removesuffix(".jsonl") + f".a{r}.jsonl"


def reads_name() -> str:
    return launch_dir.reads_file_name(ident(PID))


def lay_out(s: Scheduler, root: Path) -> list[str]:
    dirs = [new_launch(root / f"node{d}", PROFILE) for d in range(s.dirs)]
    for v, reads in enumerate(s.reads):
        scratch = new_launch(root / f"reads{v}", PROFILE)
        tag = {"event": "read", "name": "NCCL_DEBUG", "value": str(s.order[v]), "source": "environment",
               "environment": str(s.order[v]), "disagrees": False}
        lines = [{"event": "env_init", "abi": "v2", "nccl_version": "2.28.9"}, tag] + [
            {"event": "read", "name": "NCCL_PROTO", "value": value, "source": "profile",
             "environment": "Simple" if disagrees else value, "disagrees": disagrees} for value, disagrees in reads]
        written = write_reads_log(scratch, PID, lines)
        assert written == reads_name()
        for d in s.reads_dirs[v]:
            shutil.copyfile(Path(scratch) / written, Path(dirs[d]) / written)
    good = {"NCCL_PROTO": "LL"}
    for r, value in enumerate(s.expected):
        scratch = new_launch(root / f"records{r}", PROFILE)
        write_process(scratch, PID, [
            ("process_start", {"expected_env": good, "env": good, "profile": "p", "group_envs": {}, "sglang_wins": []}),
            ("process_role", {"title": "sglang::scheduler_TP0"}),
            ("group_created", {"group": "world", "env": good, "torch_comm": "none", "device_group_backend": "gloo"}),
            ("nccl_reads_log", {"file": reads_name()}),
            ("profile_changed", {"expected_env": {"NCCL_PROTO": value}, "env": {"NCCL_PROTO": value},
                                 "group_envs": {}, "sglang_wins": [], "reason": f"copy {r}"}),
        ])
        for d in s.record_dirs[r]:
            shutil.copyfile(Path(scratch) / launch_dir.process_file_name(ident(PID)), Path(dirs[d]) / record_name(r))
    return dirs


def places(dirs: list[str], where: list[int], name: str) -> list[str]:
    return sorted(f"{dirs[d]}/{name}" if len(dirs) > 1 else name for d in where)


def groups(text: str) -> list[list[str]]:
    return sorted(sorted(g.split(", ")) for g in text.split(" / "))


# --- the property -------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(schedulers())
# A ✓ version listed before a ⚠ one: the ⚠ counts (the first of equals only among equals).
@example(Scheduler(expected=["LL"], record_dirs=[[0]], reads=[[("LL", False)], [("LL", True)]], order=[0, 1],
                   reads_dirs=[[0], [1]], dirs=2))
def test_every_version_is_judged_the_worse_counts_and_the_notes_name_every_place(s):
    with tempfile.TemporaryDirectory() as tmp:
        dirs = lay_out(s, Path(tmp))
        report = load_report(dirs)
    record_places = [places(dirs, where, record_name(r)) for r, where in enumerate(s.record_dirs)]
    reads_places = [places(dirs, where, reads_name()) for where in s.reads_dirs]
    assert sorted(p.file for p in report.processes) == sorted(record_name(r) for r in range(len(s.expected)))
    for p in report.processes:
        r = int(p.file.rsplit(".a", 1)[1].removesuffix(".jsonl"))
        assert p.verdict == version_verdict(s, r), p.notes
        records_notes = [n for n in p.notes if n.startswith(RECORDS_NOTE)]
        if len(s.expected) > 1:
            (note,) = records_notes
            assert note.endswith(WORSE)
            this, others = note[len(RECORDS_NOTE):-len(WORSE)].split("; other version(s) from ")
            assert sorted(this.split(", ")) == record_places[r]
            assert groups(others) == sorted(pl for q, pl in enumerate(record_places) if q != r)
        else:
            assert records_notes == []
        reads_notes = [n for n in p.notes if n.startswith(READS_NOTE)]
        if len(s.reads) > 1:
            (note,) = reads_notes
            assert note.endswith(WORSE)
            assert groups(note[len(READS_NOTE):-len(WORSE)]) == sorted(reads_places)
        else:
            assert reads_notes == []
    assert report.verdict == max((version_verdict(s, r) for r in range(len(s.expected))), key=RANK.__getitem__)
    # The reads section: the worst records version, the first of equals as the processes are listed.
    listed = [int(p.file.rsplit(".a", 1)[1].removesuffix(".jsonl")) for p in report.processes]
    worst_first = max(listed, key=lambda r: RANK[reads_verdict(s.reads[shown_reads_version(s, r)], s.expected[r])])
    (entry,) = report.nccl_reads.values()
    v = shown_reads_version(s, worst_first)
    assert entry["verdict"] == reads_verdict(s.reads[v], s.expected[worst_first])
    assert sorted(entry["places"]) == reads_places[v]
    if entry["verdict"] != "absent":
        shown = report.processes[listed.index(worst_first)]
        assert entry["notes"] == [n[len(READS_PREFIX):] for n in shown.notes if n.startswith(READS_PREFIX)]


def test_judge_takes_one_reads_log_or_its_versions_alike(tmp_path):
    """judge() is public: a process's reads given as one log judge as that log given as its only version."""
    s = Scheduler(expected=["LL"], record_dirs=[[0]], reads=[[("LL", True)]], order=[0], reads_dirs=[[0]], dirs=1)
    (run,) = lay_out(s, tmp_path)
    launch = read_launch_records(run)
    one = judge(launch.meta, launch.processes, run, launch.reads)
    versions = judge(launch.meta, launch.processes, run, launch.reads_versions)
    assert one.to_dict() == versions.to_dict() == judge_launch(launch).to_dict()
    assert one.verdict == "warn" and one.nccl_reads[launch.processes[0].name]["verdict"] == "warn"
