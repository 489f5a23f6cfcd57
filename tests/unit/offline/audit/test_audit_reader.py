"""`audit` on hostile launch directories: real FIFOs, symlinks, devices, oversized and malformed
files. Nothing but regular files is opened, every file or line left out is reported with its
line, invalid records never reach judging, and the exit code says pass (0), fail (1) or cannot
judge (2) without a traceback. A hypothesis fuzz test throws random files at the reader.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.read import find_launch_dir, read_launch_records
from sglang_eagle_nccl.offline.audit.records import (
    EVENT_SCHEMAS,
    MAX_RECORD_FILE_BYTES,
    CannotJudge,
    record_problem,
)
from sglang_eagle_nccl.offline.audit.render import format_text

ENV = {"NCCL_PROTO": "LL"}


from support.audit_records import reads_header, reads_line, rec  # noqa: E402


def good_process(pid: int = 100) -> list[dict]:
    """A scheduler whose profile was in force, with one communicator."""
    return [
        rec("process_start", pid, expected_env=ENV, env=ENV, profile="p"),
        rec("process_role", pid, title="sglang::scheduler_TP0"),
        rec("scheduler_start", pid, ranks={}, overwrites=[], env=ENV),
        rec(
            "group_created",
            pid,
            group="tp",
            unique_name="tp:0",
            ranks=[0],
            env=ENV,
            process_env=ENV,
            torch_comm="lazy-nccl",
            group_overrides={},
        ),
    ]


def write_launch(run: Path, processes: dict[str, list], meta: object = None) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    if meta is not None:
        (run / "launch.json").write_text(json.dumps(meta))
    for name, records in processes.items():
        lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
        (run / name).write_text("\n".join(lines) + "\n")
    return run


META = {"profile": {"name": "p", "env": ENV, "policy": {"sglang_wins": []}}}


def audit_cli(path: Path | str, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["audit", str(path), *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_a_good_launch_passes(tmp_path):
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process()}, META)
    code, out = audit_cli(run)
    assert code == 0, out
    assert "Not judged" not in out


def test_audit_does_not_block_on_a_fifo(tmp_path):
    """FIFOs in place of a record file, launch.json and an NCCL debug file: `audit` returns at once.

    Run as a real process with a timeout: opening a FIFO for reading blocks until a writer
    appears, so a reader that opened one would hang here and fail the test.
    """
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process()})
    os.mkfifo(run / "proc-h-200.jsonl")
    os.mkfifo(run / "launch.json")
    debug = tmp_path / "nccl"
    debug.mkdir()
    os.mkfifo(debug / "nccl.h.100.log")
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "sglang_eagle_nccl", "audit", str(run), "--nccl-debug-dir", str(debug)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - start < 60
    assert "Traceback" not in proc.stderr
    assert "proc-h-200.jsonl: a FIFO (named pipe), not a regular file" in proc.stdout
    assert "launch.json: a FIFO (named pipe), not a regular file" in proc.stdout
    # The good process is still judged; the NCCL cross-check found no debug file (the FIFO is skipped).
    assert "scheduler" in proc.stdout and proc.returncode == 1, proc.stdout + proc.stderr


def test_symlinked_record_file_is_not_followed(tmp_path):
    elsewhere = write_launch(tmp_path / "elsewhere", {"proc-h-300.jsonl": good_process(300)})
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process()}, META)
    os.symlink(elsewhere / "proc-h-300.jsonl", run / "proc-h-300.jsonl")
    launch = read_launch_records(run)
    assert [p.pid for p in launch.processes] == [100]  # the linked file's records were not read
    assert [u.text() for u in launch.unreadable] == ["proc-h-300.jsonl: a symbolic link, not a regular file"]
    report = load_report(run)
    assert report.verdict == "warn"  # something in the launch was not judged: never a plain pass
    assert "proc-h-300.jsonl: a symbolic link" in format_text(report)


def test_dev_null_and_dev_zero_symlinked_as_records(tmp_path):
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process()}, META)
    os.symlink("/dev/null", run / "proc-h-1.jsonl")
    os.symlink("/dev/zero", run / "proc-h-2.jsonl")
    launch = read_launch_records(run)
    reasons = {u.file: u.reason for u in launch.unreadable}
    assert reasons == {
        "proc-h-1.jsonl": "a symbolic link, not a regular file",
        "proc-h-2.jsonl": "a symbolic link, not a regular file",
    }


def test_device_node_as_record_file(tmp_path):
    dev = tmp_path / "run" / "proc-h-9.jsonl"
    write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process()}, META)
    try:
        os.mknod(dev, 0o600 | 0o020000, os.makedev(1, 5))  # a character device like /dev/zero
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD, which this user lacks")
    launch = read_launch_records(tmp_path / "run")
    assert [u.text() for u in launch.unreadable] == ["proc-h-9.jsonl: a character device, not a regular file"]


def test_oversized_record_file_is_not_read(tmp_path):
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process()}, META)
    with open(run / "proc-h-5.jsonl", "wb") as fh:
        fh.truncate(MAX_RECORD_FILE_BYTES + 1)  # sparse: costs no disk
    launch = read_launch_records(run)
    (u,) = launch.unreadable
    assert u.file == "proc-h-5.jsonl" and "larger than the 16777216-byte limit" in u.reason


def test_bad_lines_are_listed_with_file_and_line_and_not_judged(tmp_path):
    lines = [
        *good_process(),
        "[1, 2, 3]",  # 5: not an object
        '"text"',  # 6
        json.dumps({"event": "group_created", "pid": 100}),  # 7: common fields missing
        json.dumps(rec("group_created", group="tp", env={"NCCL_PROTO": 5})),  # 8: ill-typed env value
        json.dumps(rec("group_created", group="tp", env=ENV, ranks="0,1")),  # 9: ranks not a list
        json.dumps(rec("pynccl_created", env=ENV)),  # 10: group missing
        json.dumps(rec("process_start", pid=True, env=ENV)),  # 11: a boolean pid
        "{not json",  # 12
        "[" * 100000 + "]" * 100000,  # 13: nested beyond the JSON parser
        "9" * 5000,  # 14: beyond int()'s digit limit
    ]
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": lines}, META)
    launch = read_launch_records(run)
    by_line = {u.line: u.reason for u in launch.unreadable}
    assert sorted(by_line) == list(range(5, 15))
    assert by_line[5] == "not a JSON object but a list"
    assert by_line[7] == "missing field 'ts'"
    assert by_line[8] == "group_created record: field 'env': ['NCCL_PROTO']: expected a string, got a number"
    assert by_line[9] == "group_created record: field 'ranks': expected a list, got a string"
    assert by_line[10] == "pynccl_created record: missing field 'group'"
    assert by_line[11] == "field 'pid': expected an integer, got a boolean"
    assert by_line[12].startswith("not valid JSON")
    assert by_line[13] == "JSON nested too deeply"
    assert by_line[14].startswith("not valid JSON")
    (proc,) = launch.processes
    assert len(proc.records) == 4 and proc.bad_lines == 10
    code, out = audit_cli(run)
    assert code == 0 and "proc-h-100.jsonl:9: group_created record" in out  # judged on valid records, ⚠


def test_an_invalid_record_cannot_hide_a_failure(tmp_path):
    """A failing communicator stays failing whatever garbage follows it."""
    bad = rec(
        "group_created",
        group="tp",
        unique_name="tp:0",
        ranks=[0],
        env={"NCCL_PROTO": "Simple"},
        process_env=ENV,
        torch_comm="lazy-nccl",
    )
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": [*good_process()[:3], bad, "[]", "{}"]}, META)
    code, out = audit_cli(run)
    assert code == 1 and "NCCL_PROTO=Simple (profile: LL)" in out


def test_list_valued_launch_json_is_reported(tmp_path):
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process()}, [META])
    launch = read_launch_records(run)
    assert launch.meta == {}
    assert [u.text() for u in launch.unreadable] == ["launch.json:1: not a JSON object but a list"]


def test_ill_typed_launch_json_profile_is_reported(tmp_path):
    meta = {"profile": {"name": "p", "groups": {"tp": {"NCCL_ALGO": ["Tree"]}}}}
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process()}, meta)
    (u,) = read_launch_records(run).unreadable
    assert u.file == "launch.json" and "field 'groups': ['tp']: ['NCCL_ALGO']: expected a string" in u.reason


@pytest.mark.parametrize(
    "setup,fragment",
    [
        (lambda root: None, "no audit records under"),
        (lambda root: os.mkfifo(root / "proc-h-1.jsonl"), "no valid audit record could be read"),
        (
            lambda root: (root / "proc-h-1.jsonl").write_text('[]\n"x"\n'),
            "proc-h-1.jsonl:1: not a JSON object",
        ),
        (lambda root: (root / "launch.json").write_text("[]"), "launch.json:1: not a JSON object but a list"),
    ],
    ids=["empty", "only a fifo", "only garbage", "list-valued launch.json only"],
)
def test_nothing_readable_is_exit_2(tmp_path, setup, fragment):
    root = tmp_path / "root"
    root.mkdir()
    setup(root)
    code, out = audit_cli(root)
    assert code == 2 and "cannot judge" in out and fragment in out, out


def test_root_that_is_a_file_or_missing_is_exit_2(tmp_path):
    (tmp_path / "f").write_text("")
    assert audit_cli(tmp_path / "f")[0] == 2
    code, out = audit_cli(tmp_path / "missing")
    assert code == 2 and "No such file or directory" in out


def test_unlistable_directory_is_exit_2(tmp_path):
    if os.getuid() == 0:
        pytest.skip("root can list a directory regardless of its mode")
    root = tmp_path / "root"
    root.mkdir(mode=0)
    try:
        assert audit_cli(root)[0] == 2
    finally:
        root.chmod(0o700)


def test_symlinked_launch_subdirectory_is_not_chosen(tmp_path):
    root = tmp_path / "root"
    real = write_launch(root / "20240101-000000-1-aaaa", {"proc-h-100.jsonl": good_process()}, META)
    outside = write_launch(tmp_path / "outside", {"proc-h-7.jsonl": good_process(7)}, META)
    time.sleep(0.01)
    os.symlink(outside, root / "20990101-000000-1-zzzz")  # newer name, newer mtime: a decoy
    assert find_launch_dir(root) == real


def test_json_output_lists_unreadable(tmp_path):
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": [*good_process(), "[]"]}, META)
    result = CliRunner().invoke(main, ["audit", str(run), "--json"])
    data = json.loads(result.output)
    assert data["unreadable"] == [
        {"file": "proc-h-100.jsonl", "line": 5, "reason": "not a JSON object but a list", "directory": ""}
    ]


def test_valid_records_of_the_real_writer_pass_the_schema(tmp_path):
    from sglang_eagle_nccl.contract.launch_dir import new_launch_dir
    from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter

    run = new_launch_dir(tmp_path)
    w = AuditWriter(run, role="child")
    for r in good_process(os.getpid()):
        fields = {k: v for k, v in r.items() if k not in ("ts", "pid", "role", "event")}
        assert w.write(r["event"], **fields)
    launch = read_launch_records(run)
    assert launch.unreadable == [] and len(launch.processes[0].records) == 4
    assert all(record_problem(r) is None for r in launch.processes[0].records)


# --- fuzz ------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
ENV_VALUES = st.dictionaries(
    st.sampled_from(["NCCL_PROTO", "NCCL_ALGO", "NCCL_BUFFSIZE"]), st.text(max_size=8), max_size=3
)
# Values shaped like the fields the judge reads, so that most generated records pass the schema
# and reach the judge; a mutation then breaks some of them (random JSON alone rarely would pass).
TEXT = st.text(max_size=8)
GROUP = st.fixed_dictionaries({}, optional={"unique_name": st.none() | TEXT, "group": st.none() | TEXT})
FIELD = {
    "env": ENV_VALUES,
    "expected_env": ENV_VALUES,
    "process_env": ENV_VALUES,
    "group_overrides": st.none() | ENV_VALUES,
    "ranks": st.lists(st.integers(-2, 2**40), max_size=4),
    "writes": st.lists(
        st.fixed_dictionaries(
            {"name": TEXT}, optional={"before": st.none() | TEXT, "after": st.none() | TEXT}
        ),
        max_size=3,
    ),
    "overwrites": st.lists(
        st.fixed_dictionaries(
            {"name": TEXT, "profile_value": st.none() | TEXT},
            optional={"restored": st.booleans(), "foreign_value": st.none() | TEXT},
        ),
        max_size=3,
    ),
    "mismatches": st.lists(
        st.fixed_dictionaries(
            {"variable": TEXT, "values_by_rank": st.dictionaries(TEXT, st.none() | TEXT, max_size=3)}
        ),
        max_size=3,
    ),
    "uncovered": st.lists(st.fixed_dictionaries({"target": TEXT}), max_size=2),
    "server_flags": st.dictionaries(
        st.sampled_from(["tp_size", "dp_size", "pp_size", "nnodes"]),
        st.integers(-2, 10**6) | TEXT | st.none(),
        max_size=4,
    ),
    "draft": st.none() | st.dictionaries(TEXT, GROUP, max_size=3),
    "verify": st.none() | st.dictionaries(TEXT, GROUP, max_size=3),
    "current_tp": st.none() | GROUP,
}
for _name in ("rank", "global_rank", "rank_in_group", "world_size", "node_rank"):
    FIELD[_name] = st.none() | st.integers(-3, 2**40)
for _name in ("available", "disabled", "use_pynccl", "has_pynccl", "required", "new_groups"):
    FIELD[_name] = st.booleans()


@st.composite
def records(draw) -> str:
    """One line: a record of a known event, mutated or not; or any JSON value; or raw bytes."""
    kind = draw(st.sampled_from(["template"] * 6 + ["json", "bytes"]))
    if kind == "json":
        return json.dumps(draw(json_values))
    if kind == "bytes":
        return draw(st.binary(max_size=60)).decode("latin-1")
    event = draw(st.sampled_from(sorted(EVENT_SCHEMAS)))
    schema = EVENT_SCHEMAS[event]
    record: dict = {
        "ts": 1.0,
        "pid": draw(st.integers(-5, 2**40)),
        "role": draw(st.sampled_from(["child", "launcher", "scheduler_TP0", "x"])),
        "event": event,
    }
    for name in schema.required:
        record[name] = draw(FIELD.get(name, TEXT))
    for name in schema.optional:
        if draw(st.booleans()):
            record[name] = draw(FIELD.get(name, st.none() | TEXT))
    mutation = draw(st.sampled_from(["none"] * 3 + ["replace", "delete"]))
    if mutation == "replace":
        record[draw(st.sampled_from(sorted(record)))] = draw(json_values)
    elif mutation == "delete":
        del record[draw(st.sampled_from(sorted(record)))]
    return json.dumps(record)


files = st.dictionaries(
    st.sampled_from(["proc-h-1.jsonl", "proc-h-2.jsonl", "proc-x-abc.jsonl", "launch.json", "other.txt"]),
    st.one_of(
        st.lists(records(), max_size=8).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")),
        st.binary(max_size=200),
        json_values.map(lambda v: json.dumps(v).encode()),
    ),
    max_size=4,
)

FUZZ_BUDGET_S = 30.0
_fuzz_started: list[float] = []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files)
def test_fuzz_the_reader_raises_only_the_plugins_own_errors(contents):
    # Bounded in time as well as in examples: the whole run stays under FUZZ_BUDGET_S.
    if not _fuzz_started:
        _fuzz_started.append(time.monotonic())
    if time.monotonic() - _fuzz_started[0] > FUZZ_BUDGET_S:
        return
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        for name, data in contents.items():
            (run / name).write_bytes(data)
        try:
            report = load_report(run)
        except PluginStop as exc:
            assert isinstance(exc, CannotJudge)
            assert "Fix:" in str(exc)
            return
        text = format_text(report)
        json.dumps(report.to_dict(), default=str)
        assert report.verdict in ("ok", "warn", "fail")
        assert text.startswith("Audit of")
        # Whatever was left out is listed, and nothing left out was judged.
        judged = {p.file for p in report.processes}
        for u in report.unreadable:
            if u.line is None:
                assert u.file not in judged
        assert report.verdict == deserved(report), (report.verdict, report.problems)
        assert report.exit_code == (1 if report.verdict == "fail" else 0)


def deserved(report) -> str:
    """The verdict the README promises for what the judge found, from the marks up.

    A launch fails when any process or communicator failed, when nothing real was audited (no
    SGLang rank, no communicator, no NCCL read), or when a rank recorded no communicator (hooks not
    installed) without being stopped by the cross-rank check; anything left out of the judgement
    or any caveat makes a pass at best a warning.
    """
    marks = [p.verdict for p in report.processes] + [c.verdict for c in report.communicators]
    real = (
        any(p.sglang_rank for p in report.processes)
        or report.communicators
        or any(r.get("reads") for r in report.nccl_reads.values())
    )
    silent_rank = any(
        p.sglang_rank
        and not any(c.pid == p.pid for c in report.communicators)
        and not any("ranks disagree" in n for n in p.notes)
        for p in report.processes
    )
    if "fail" in marks or not real or silent_rank:
        return "fail"
    if "warn" in marks or report.unreadable:
        return "warn" if not report.problems else "fail"
    return "ok" if not report.problems else "fail"


def _reads_file(run: Path, pid: int, records: list[dict]) -> None:
    lines = [reads_header(pid)] + [reads_line(r.pop("event"), pid, **r) for r in (dict(r) for r in records)]
    (run / f"nccl-reads-h-{pid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


@pytest.mark.parametrize(
    "records,mark,text",
    [
        # What a CPU rank leaves: the library was configured, NCCL never loaded it.
        ([{"event": "counts", "reads": [], "unrecorded": 0}], "–", "NCCL never initialised the env plugin"),
        ([{"event": "env_init", "nccl_version": "2.28.7", "abi": "v1"}], "–", "read no variable through it"),
        # Reads only of variables the profile does not set: listed, nothing judged.
        (
            [
                {"event": "env_init", "nccl_version": "2.28.7", "abi": "v1"},
                {
                    "event": "read",
                    "name": "NCCL_DEBUG",
                    "value": None,
                    "source": "environment",
                    "environment": None,
                    "disagrees": False,
                },
            ],
            "–",
            "none that the profile sets",
        ),
        (
            [
                {"event": "env_init", "nccl_version": "2.28.7", "abi": "v1"},
                {
                    "event": "read",
                    "name": "NCCL_PROTO",
                    "value": "LL",
                    "source": "profile",
                    "environment": "LL",
                    "disagrees": False,
                },
            ],
            "✓",
            "NCCL_PROTO=LL  [profile]",
        ),
        (
            [
                {"event": "env_init", "nccl_version": "2.28.7", "abi": "v1"},
                {
                    "event": "read",
                    "name": "NCCL_PROTO",
                    "value": "Simple",
                    "source": "environment",
                    "environment": "Simple",
                    "disagrees": False,
                },
            ],
            "✗",
            "NCCL read NCCL_PROTO=Simple (environment); the profile says LL",
        ),
    ],
    ids=["never-loaded", "no-reads", "only-other-variables", "read-as-profiled", "read-otherwise"],
)
def test_nccl_reads_are_a_check_only_when_nccl_read_something(tmp_path, records, mark, text):
    """A ✓ under "NCCL's own reads" vouches for reads that happened; a log without any is "–"."""
    declared = [rec("nccl_reads_log", 100, file="nccl-reads-h-100.jsonl")]
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process() + declared}, META)
    _reads_file(run, 100, records)
    report = load_report(run)
    assert report.unreadable == []  # the lines are those the library writes: all judged
    out = format_text(report, verbose=True)
    section = out.split("NCCL's own reads (native env plugin)", 1)[1]
    assert f"  {mark} pid 100 (" in section, section
    assert text in section, section
    process = next(p for p in report.processes if p.pid == 100)
    assert process.verdict == ("fail" if mark == "✗" else "ok"), process
    if mark == "–":  # said once, in the reads section, not as a note on the process
        assert not any("NCCL's own reads" in n for n in process.notes), process.notes


def test_the_verdict_line_says_when_no_communicator_was_checked(tmp_path):
    """Only gloo groups (a CPU launch): the ✓ covers the processes, and the verdict line says so."""
    gloo = good_process()
    gloo[-1] = {**gloo[-1], "torch_comm": "gloo", "backend": "gloo"}
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": gloo}, META)
    report = load_report(run)
    assert report.verdict == "ok" and all(c.verdict == "absent" for c in report.communicators), (
        report.communicators
    )
    assert format_text(report).endswith("(no NCCL communicator existed to check)")
    run = write_launch(tmp_path / "run2", {"proc-h-100.jsonl": good_process()}, META)
    assert format_text(load_report(run)).endswith("in every audited process and communicator")


# --- NCCL's reads logs: read by the same reader, judged only where they belong ----------------------

READ_LL = {
    "event": "read",
    "name": "NCCL_PROTO",
    "value": "LL",
    "source": "profile",
    "environment": "LL",
    "disagrees": False,
}
ENV_INIT = {"event": "env_init", "nccl_version": "2.32.3", "abi": "v2", "library_version": "x"}


def _launch_with_reads(tmp_path, lines: list, declared: bool = True, name: str = "nccl-reads-h-100.jsonl"):
    records = good_process() + ([rec("nccl_reads_log", 100, file=name)] if declared else [])
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": records}, META)
    (run / name).write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return load_report(run)


def test_read_counts_reach_the_report_and_json(tmp_path):
    counts = {
        "event": "counts",
        "reads": [{**{k: READ_LL[k] for k in ("name", "value", "source", "environment")}, "count": 7}],
        "unrecorded": 3,
    }
    report = _launch_with_reads(
        tmp_path, [reads_header(), reads_line(**ENV_INIT), reads_line(**READ_LL), reads_line(**counts)]
    )
    assert report.verdict == "ok" and report.unreadable == []
    (entry,) = report.nccl_reads.values()
    assert entry["unrecorded"] == 3 and entry["reads"][0]["count"] == 7
    assert "NCCL_PROTO=LL  [profile] x7" in format_text(report, verbose=True)
    assert "3 read(s) the library had no room to record" in format_text(report, verbose=True)
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert next(iter(data["nccl_reads"].values()))["reads"][0]["count"] == 7


@pytest.mark.parametrize(
    "lines,declared,why",
    [
        ([reads_line(**ENV_INIT), reads_line(**READ_LL)], True, "no identity line first"),
        ([reads_header(), reads_line(**READ_LL)], False, "did not declare creating"),
        ([reads_header(pid=101), reads_line(**READ_LL, pid=101)], True, "left no audit records"),
        ([reads_header(), reads_line(**{**READ_LL, "pid": 555})], True, "is not from pid 100"),
        (
            [
                reads_header(),
                "not json",
                reads_line(**{**READ_LL, "disagrees": "no"}),
                reads_line(**{**READ_LL, "value": float("nan")}),
            ],
            True,
            "not valid JSON",
        ),
        ([reads_header(), reads_line("read", name="NCCL_PROTO")], True, "missing field"),
        ([reads_header(), reads_line("gossip", note="x")], True, "unknown event 'gossip'"),
    ],
    ids=["no-header", "undeclared", "orphan", "other-pid", "junk", "ill-typed", "unknown-event"],
)
def test_a_reads_log_or_line_that_cannot_be_judged_is_listed_and_demotes(tmp_path, lines, declared, why):
    report = _launch_with_reads(
        tmp_path,
        lines,
        declared,
        name="nccl-reads-h-101.jsonl" if "audit records" in why else "nccl-reads-h-100.jsonl",
    )
    assert any(why in u.reason for u in report.unreadable), report.unreadable
    assert report.verdict == "warn", report.verdict  # nothing else is wrong: the pass is qualified, never ✓
    assert "Not judged" in format_text(report)


def test_a_reads_file_that_is_a_fifo_symlink_or_too_big_is_listed(tmp_path):
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": good_process()}, META)
    os.mkfifo(run / "nccl-reads-h-1.jsonl")
    (run / "nccl-reads-h-2.jsonl").symlink_to("/etc/hostname")
    (run / "nccl-reads-h-3.jsonl").mkdir()
    report = load_report(run)
    reasons = {u.file: u.reason for u in report.unreadable}
    assert "FIFO" in reasons["nccl-reads-h-1.jsonl"] and "symbolic link" in reasons["nccl-reads-h-2.jsonl"]
    assert "directory" in reasons["nccl-reads-h-3.jsonl"] and report.verdict == "warn"


def test_a_correctness_conflict_without_a_message_is_a_failure_not_a_crash(tmp_path):
    records = good_process() + [rec("correctness_conflict", 100, variables=["NCCL_ALGO"], message="")]
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": records}, META)
    report = load_report(run)
    assert report.verdict == "fail"
    (proc,) = report.processes
    assert "refused: the profile would override NCCL_ALGO, which SGLang sets for correctness" in proc.notes


def test_untrusted_text_cannot_drive_the_terminal(tmp_path):
    evil = "tp\x1b[2J\rVerdict: ✓ forged\x07"
    records = good_process() + [
        rec("group_created", 100, group=evil, ranks=[0, 1], env={"NCCL_PROTO": "x"}, torch_comm="lazy-nccl")
    ]
    run = write_launch(tmp_path / "run", {"proc-h-100.jsonl": records}, META)
    text = format_text(load_report(run), verbose=True)
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert "tp\\x1b[2J\\x0dVerdict" in text
    assert sum(line.startswith("Verdict:") for line in text.splitlines()) == 1
