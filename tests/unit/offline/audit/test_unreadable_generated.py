"""What the audit lists as not judged, over generated launch directories (offline/audit/read.py).

The rule: every line of a record file or of a reads log that is not a valid record is listed once, with
its file and line; every reads log of a process that left no audit records, and every reads log a process
did not declare creating, is listed once by file name; nothing else is listed, whatever else the
directory holds, and the list is in (file, line) order with a whole file's entry before its lines. The
reference below builds the expected list from what it wrote, never from the reader.

(The mutation run of record left the reader's accumulation of these lists unguarded: a list assigned
instead of extended lost every earlier entry and no test had two kinds in one directory.)
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.offline.audit.read import read_launch_records
from sglang_eagle_nccl.offline.audit.records import CannotJudge
from support.audit_records import reads_file, reads_header, reads_line, rec, write_lines

ENV = {"NCCL_PROTO": "LL"}
ORPHAN = "NCCL's reads log of a process that left no audit records (not judged)"


def undeclared(pid: int) -> str:
    return f"a reads log pid {pid} did not declare creating (not judged: not written by the plugin for that process)"


def a_read(pid: int) -> dict:
    return reads_line("read", pid, name="NCCL_PROTO", value="LL", source="profile", environment="LL",
                      disagrees=False)


# One process: bad lines in its record file (positions after its first record), and what its reads log is:
# none, declared (with bad lines), undeclared, or orphaned (the process left no record file at all).
PROCESS = st.tuples(
    st.lists(st.integers(0, 3), max_size=3),            # after which valid record each junk line goes
    st.sampled_from(["none", "declared", "undeclared", "orphan"]),
    st.lists(st.integers(0, 2), max_size=3),            # junk lines in the reads log, after which read
)


def with_junk(valid: list, after: list[int], junk: str) -> tuple[list, list[int]]:
    """``valid`` with a junk line after the records named in ``after``; the junk lines' 1-based numbers."""
    lines: list = []
    numbers = []
    for i, record in enumerate(valid):
        lines.append(record)
        for _ in range(after.count(i)):
            lines.append(junk)
            numbers.append(len(lines))
    for _ in range(sum(1 for a in after if a >= len(valid))):
        lines.append(junk)
        numbers.append(len(lines))
    return lines, numbers


@settings(max_examples=40, deadline=None)
@given(st.lists(PROCESS, min_size=1, max_size=4))
def test_every_unjudged_line_and_log_is_listed_once_in_file_order(tmp_path_factory, processes):
    run = tmp_path_factory.mktemp("launch")
    (run / "launch.json").write_text('{"profile": {"name": "p", "env": {"NCCL_PROTO": "LL"}, '
                                     '"policy": {"sglang_wins": []}}}')
    expected = []
    for n, (proc_junk, log, reads_junk) in enumerate(processes):
        pid = 100 + n
        if log != "orphan":
            valid = [rec("process_start", pid, expected_env=ENV, env=ENV, profile="p")]
            if log == "declared":
                valid.append(rec("nccl_reads_log", pid, file=reads_file(pid)))
            lines, bad = with_junk(valid, proc_junk, "not json {")
            name = f"proc-h-{pid}.jsonl"
            write_lines(run / name, lines)
            expected += [(name, line, "line") for line in bad]
        if log == "none":
            continue
        lines, bad = with_junk([reads_header(pid), a_read(pid), a_read(pid)], [j + 1 for j in reads_junk],
                               "[1, 2")
        write_lines(run / reads_file(pid), lines)
        if log == "declared":
            expected += [(reads_file(pid), line, "line") for line in bad]
        else:
            expected.append((reads_file(pid), None, ORPHAN if log == "orphan" else undeclared(pid)))
            # A refused log's bad lines are still listed: it was read before it was refused.
            expected += [(reads_file(pid), line, "line") for line in bad]
    if not any(log != "orphan" for _, log, _ in processes):
        # No record at all, only NCCL's reads logs: nothing can be judged, so the audit refuses the directory
        # (exit 2) and names what it could not read, rather than showing an empty verdict.
        with pytest.raises(CannotJudge, match="no valid audit record could be read") as refused:
            read_launch_records(run)
        assert ORPHAN in str(refused.value)
        return
    launch = read_launch_records(run)
    got = [(u.file, u.line, u.reason if u.line is None else "line") for u in launch.unreadable]
    assert got == sorted(expected, key=lambda e: (e[0], -1 if e[1] is None else e[1], e[2]))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=4))
def test_a_cut_line_of_a_reads_log_names_the_process_its_identity_line_names(tmp_path_factory, logs):
    # Each process: a declared reads log that may end in a cut line (a kill mid-write), and may lack its
    # identity line (then no record names the process, and the cut says so).
    run = tmp_path_factory.mktemp("launch")
    expected = []
    for n, (cut, headed) in enumerate(logs):
        pid = 200 + n
        write_lines(run / f"proc-h-{pid}.jsonl", [rec("process_start", pid, expected_env=ENV, env=ENV, profile="p"),
                                                  rec("nccl_reads_log", pid, file=reads_file(pid))])
        path = write_lines(run / reads_file(pid), ([reads_header(pid)] if headed else []) + [a_read(pid)])
        if cut:
            with open(path, "a") as f:
                f.write('{"event": "read", "pid": ')  # no newline: the bytes a killed writer left
            ident = reads_header(pid)
            whose = "/".join(str(ident[k]) for k in ("host", "boot_id", "pidns", "pid", "start"))
            expected.append((reads_file(pid), whose if headed else None))
    launch = read_launch_records(run)
    assert [(c.file, c.process) for c in launch.cut_lines] == sorted(expected)


def test_a_whole_files_entry_comes_before_its_first_line(tmp_path):
    # A reads log its process never declared, whose line 1 is junk: the whole file's entry (not judged) and
    # line 1 are both listed, the whole file's entry first, as before any other line.
    run = tmp_path / "launch"
    run.mkdir()
    write_lines(run / "proc-h-100.jsonl", [rec("process_start", 100, expected_env=ENV, env=ENV, profile="p")])
    write_lines(run / reads_file(100), ["{{junk", reads_header(100), a_read(100)])
    launch = read_launch_records(run)
    assert [(u.file, u.line, u.reason if u.line is None else "line") for u in launch.unreadable] == [
        (reads_file(100), None, undeclared(100)), (reads_file(100), 1, "line")]
