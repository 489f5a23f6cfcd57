"""Audit files: private directories, one file per process, loud-not-fatal failures."""

from __future__ import annotations

import os
import stat

import pytest

from sglang_eagle_nccl.contract.launch_dir import AuditError, new_launch_dir
from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
from support.jsonl import read_jsonl


def test_launch_dir_and_files_are_private(tmp_path):
    root = tmp_path / "audit"
    run = new_launch_dir(root)
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(run).st_mode) == 0o700
    w = AuditWriter(run)
    assert w.write("hello", env={"NCCL_PROTO": "LL"})
    assert stat.S_IMODE(os.stat(w.path).st_mode) == 0o600
    (rec,) = read_jsonl(w.path)
    assert rec["event"] == "hello" and rec["pid"] == os.getpid()


def test_two_launches_get_separate_directories(tmp_path):
    a, b = new_launch_dir(tmp_path), new_launch_dir(tmp_path)
    assert a != b and a.parent == b.parent


def test_refuses_world_writable_root(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(AuditError) as info:
        new_launch_dir(root)
    assert "chmod 700" in str(info.value)


def test_refuses_symlinked_root(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(AuditError):
        new_launch_dir(link)


def _unwritable(tmp_path):
    # A regular file where a directory should be: fails for root too (ENOTDIR).
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    return blocker / "run"


def test_unwritable_directory_is_loud_not_fatal(tmp_path, capsys):
    w = AuditWriter(_unwritable(tmp_path))
    assert w.write("x") is False
    assert w.write("y") is False
    err = capsys.readouterr().err
    assert err.count("WARNING") == 1 and "continuing without audit" in err


def test_unwritable_directory_is_fatal_when_required(tmp_path):
    w = AuditWriter(_unwritable(tmp_path), required=True)
    with pytest.raises(AuditError):
        w.write("x")


def test_full_filesystem_is_loud_not_fatal(tmp_path):
    """A write that fails for lack of space (EFBIG via RLIMIT_FSIZE) warns once and goes on."""
    import subprocess
    import sys
    import textwrap

    run = new_launch_dir(tmp_path)
    code = textwrap.dedent(
        f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
        w = AuditWriter({str(run)!r})
        results = [w.write("tick", payload="x" * 500) for _ in range(50)]
        assert results[0] is True and results[-1] is False, results
        print("still running")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "still running" in proc.stdout
    assert proc.stderr.count("WARNING") == 1 and "continuing without audit" in proc.stderr


def test_symlink_in_place_of_audit_file_is_refused(tmp_path, capsys):
    run = new_launch_dir(tmp_path)
    w = AuditWriter(run)
    os.symlink(tmp_path / "victim", w.path)
    assert w.write("x") is False  # O_NOFOLLOW: never follow a planted link
    assert not (tmp_path / "victim").exists()
    assert "WARNING" in capsys.readouterr().err


def test_records_hold_no_environment_beyond_nccl(tmp_path, monkeypatch):
    from sglang_eagle_nccl.inproc.env_writer import nccl_snapshot

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("NCCL_PROTO", "LL")
    w = AuditWriter(new_launch_dir(tmp_path))
    w.write("process_start", env=nccl_snapshot())
    text = w.path.read_text()
    assert "hunter2" not in text and "AWS_SECRET" not in text and "NCCL_PROTO" in text
