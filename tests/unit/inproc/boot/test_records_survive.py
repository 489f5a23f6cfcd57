"""Records survive the process (issue 24 item 5): a line is whole or absent, a full disk is reported.

Rules (inproc/boot/audit_writer.py, native/src/reads_log.c, contract/launch_dir.py: mark_disk_full):

* one write per line, and a line of up to a page never crosses a page boundary (Linux stops a write of
  a process being killed between two pages): a real process killed by SIGTERM or SIGKILL in the middle
  of writing leaves only whole lines;
* a write refused for want of space (ENOSPC, here from a real 64 KiB tmpfs) leaves no part of its line,
  and an empty marker beside the file that the audit reports as "disk full on <host>": ⚠, and ✗ with the
  problem named when the process ran under ``audit_required`` (it stopped there).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle_nccl.contract.launch_dir import DISK_FULL_REQUIRED_SUFFIX, DISK_FULL_SUFFIX
from sglang_eagle_nccl.inproc.boot.audit_writer import PAGE, page_aligned
from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.records import RECORDS, parse_file
from support.audit_records import proc_file, rec, write_lines

REPO = Path(__file__).resolve().parents[4]


# --- the rule, against a reference -------------------------------------------------------------------

@given(st.integers(0, 5 * PAGE), st.integers(1, 3 * PAGE))
def test_a_line_of_up_to_a_page_never_crosses_a_page_boundary(size, length):
    line = b"{" + b"x" * (length - 2) + b"\n" if length > 1 else b"\n"
    out = page_aligned(line, size)
    assert out.endswith(line)
    pad = out[: len(out) - len(line)]
    start = size + len(pad)
    crosses = size // PAGE != (size + len(line) - 1) // PAGE
    if length <= PAGE and crosses:
        # the line starts on the next page, after one blank line (spaces and its newline)
        assert start % PAGE == 0 and pad == b" " * (len(pad) - 1) + b"\n" and 0 < len(pad) < PAGE
    else:
        assert pad == b""  # nothing to gain: it fits where it is, or no page can hold it
    assert not parse_file(pad, "f").records and not parse_file(pad, "f").bad  # the reader skips the padding


# --- a real process killed mid-write ---------------------------------------------------------------

WRITER = textwrap.dedent("""
    import os, sys
    from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
    w = AuditWriter(sys.argv[1], role="child")
    i = 0
    while True:
        i += 1
        # records of 0.9 to 3.9 KiB: most would cross a page boundary somewhere
        w.write("process_role", title="sglang::" + "x" * (600 + (i * 977) % 3000))
        if i == 50:
            os.write(1, b"go\\n")
""")


def _whole_lines_only(run: Path) -> int:
    (name,) = os.listdir(run)
    data = (run / name).read_bytes()
    cut_at = data.rfind(b"\n") + 1
    assert data.endswith(b"\n"), f"a cut line after a kill at byte {cut_at} of {len(data)}"
    parsed = parse_file(data, name, RECORDS)
    assert parsed.cut is None and parsed.bad_lines == 0
    return len(parsed.records)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_process_killed_while_writing_leaves_whole_records_only(tmp_path, sig):
    total = 0
    for round_ in range(6):
        run = tmp_path / f"run{round_}"
        run.mkdir(mode=0o700)
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(run)], stdout=subprocess.PIPE,
                                 env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert child.stdout is not None and child.stdout.readline() == b"go\n"
        time.sleep(0.02 + 0.013 * round_)  # tens of thousands of writes in: the kill lands inside one
        child.send_signal(sig)
        assert child.wait(10) == -sig
        total += _whole_lines_only(run)
    assert total > 6 * 50


# --- a real full disk ----------------------------------------------------------------------------

FILLER = textwrap.dedent("""
    import os, shutil, subprocess, sys
    mnt, out, required, how = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
    if how == "tmpfs":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", mnt], check=True)
    run = os.path.join(mnt, "launch")
    os.mkdir(run, 0o700)
    from sglang_eagle_nccl.contract.launch_dir import AuditError
    from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
    w = AuditWriter(run, required=required, role="child")
    env = {"NCCL_PROTO": "LL"}
    w.write("process_start", expected_env=env, env=env, profile="p")
    if how == "devfull":  # no mount here: the kernel's /dev/full refuses every write with ENOSPC
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, w._fd)
    outcome = "wrote everything"
    try:
        for i in range(1000):  # 1000 records of 300 bytes: far more than 64 KiB
            if not w.write("hook_installed", target="sglang.x:" + "y" * 300, mechanism="wrapt", handler="h"):
                outcome = "refused"
                break
    except AuditError:
        outcome = "raised"
    if how == "devfull":  # what the writer wrote before: the real file, with the line that went first
        os.dup2(os.open(os.path.join(run, os.listdir(run)[0]), os.O_RDONLY), w._fd)
    for name in os.listdir(run):
        shutil.copy(os.path.join(run, name), os.path.join(out, name))
    print(outcome)
""")


ENV = {"NCCL_PROTO": "LL"}


def _fill_disk(tmp_path: Path, required: bool) -> tuple[str, Path]:
    mnt, out = tmp_path / "mnt", tmp_path / "out"
    mnt.mkdir(mode=0o700)
    out.mkdir(mode=0o700)
    (out / "launch.json").write_text(json.dumps({"profile": {"name": "p", "env": ENV}}))
    # a rank of the launch whose records are all there: without the full disk the launch is a ✓
    write_lines(out / proc_file(100), [
        rec("process_start", 100, expected_env=ENV, env=ENV, profile="p"),
        rec("process_role", 100, title="sglang::scheduler_TP0"),
        rec("group_created", 100, group="tp", ranks=[0, 1], env=ENV, torch_comm="lazy-nccl", group_overrides={})])
    assert load_report(out).verdict == "ok"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = [sys.executable, "-c", FILLER, str(mnt), str(out), "1" if required else "0"]
    # A private mount namespace (as root, or as a user with user namespaces): a real 64 KiB tmpfs.
    got = subprocess.run(["unshare", "-rm", *args, "tmpfs"], capture_output=True, text=True, env=env)
    if got.returncode != 0 and "mount" in got.stderr + got.stdout:
        got = subprocess.run([*args, "devfull"], capture_output=True, text=True, env=env)
    assert got.returncode == 0, got.stderr
    return got.stdout.strip(), out


def test_a_full_disk_leaves_whole_lines_and_a_marker_the_audit_reports(tmp_path):
    outcome, out = _fill_disk(tmp_path, required=False)
    assert outcome == "refused"
    (records,) = [n for n in os.listdir(out) if n.endswith(".jsonl") and n != proc_file(100)]
    assert sorted(os.listdir(out)) == sorted(["launch.json", proc_file(100), records, records + DISK_FULL_SUFFIX])
    data = (out / records).read_bytes()
    assert data.endswith(b"\n") and parse_file(data, records).bad_lines == 0  # the refused line left nothing
    report = load_report(out)
    host = os.uname().nodename
    assert report.verdict == "warn"
    assert any(u.file == records and f"disk full on {host}" in u.reason for u in report.unreadable)
    assert not any("disk full" in p for p in report.problems)


def test_a_full_disk_under_audit_required_stops_the_process_and_fails_the_audit(tmp_path):
    outcome, out = _fill_disk(tmp_path, required=True)
    assert outcome == "raised"
    (records,) = [n for n in os.listdir(out) if n.endswith(".jsonl") and n != proc_file(100)]
    assert sorted(os.listdir(out)) == sorted(["launch.json", proc_file(100), records,
                                              records + DISK_FULL_REQUIRED_SUFFIX])
    report = load_report(out)
    assert report.verdict == "fail", report.problems
    assert any(p.startswith(f"disk full on {os.uname().nodename}:") and "audit_required" in p for p in report.problems)

