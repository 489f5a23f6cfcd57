"""The launch directory's one rule set (contract/launch_dir.py), and a process's identity.

Every file a process writes into its launch directory -- its audit records and NCCL's reads log -- is
created new by open_record_file: whatever someone put at the name first is refused, never written
through, and nothing blocks. The directory itself must be a private directory of this user, reached
without following a symlink.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from sglang_eagle_nccl.contract.launch_dir import (
    AuditError,
    file_stem,
    identity,
    identity_key,
    join_launch_dir,
    new_launch_dir,
    open_record_file,
    process_file_name,
    reads_file_name,
)
from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter


@pytest.fixture
def run(tmp_path):
    return str(new_launch_dir(tmp_path / "root"))


def _plant(run: str, name: str, kind: str, tmp_path) -> str:
    """Put something at ``name`` before the writer comes; return what must stay unchanged."""
    path = os.path.join(run, name)
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "symlink":
        target = tmp_path / "elsewhere.txt"
        target.write_text("precious\n")
        os.symlink(target, path)
    elif kind == "hardlink":
        target = tmp_path / "elsewhere.txt"
        target.write_text("precious\n")
        os.link(target, path)
    elif kind == "lines":
        with open(path, "w") as fh:
            fh.write('{"event": "read", "name": "NCCL_PROTO", "value": "LL"}\n')
        os.chmod(path, 0o644)
    elif kind == "directory":
        os.mkdir(path)
    return kind


def _snapshot(path: str) -> tuple:
    st = os.lstat(path)
    body = (
        open(path, "rb").read()
        if stat.S_ISREG(st.st_mode)
        else (os.readlink(path) if stat.S_ISLNK(st.st_mode) else b"")
    )
    return stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_nlink, body


@pytest.mark.parametrize("kind", ["fifo", "symlink", "hardlink", "lines", "directory"])
def test_a_name_someone_planted_is_refused_and_left_as_it_was(run, tmp_path, kind):
    name = reads_file_name()
    _plant(run, name, kind, tmp_path)
    before = _snapshot(os.path.join(run, name))
    with pytest.raises((AuditError, OSError)):
        open_record_file(run, name)  # returns at once: O_EXCL fails before anything is opened
    assert _snapshot(os.path.join(run, name)) == before
    if kind in ("symlink", "hardlink"):
        assert (tmp_path / "elsewhere.txt").read_text() == "precious\n"


def test_a_new_file_is_private_with_one_link(run):
    fd = open_record_file(run, "proc-x.jsonl")
    try:
        st = os.fstat(fd)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_nlink == 1 and st.st_uid == os.getuid()
    finally:
        os.close(fd)
    with pytest.raises(AuditError, match="already exists"):
        open_record_file(run, "proc-x.jsonl")  # created once per process: never reopened by name


def test_a_launch_directory_replaced_by_a_symlink_is_refused(run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.rename(run, run + ".old")
    os.symlink(elsewhere, run)
    with pytest.raises(OSError):  # O_NOFOLLOW on the directory: ELOOP / ENOTDIR
        open_record_file(run, "proc-x.jsonl")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_a_launch_directory_others_can_write_is_refused(run, mode):
    os.chmod(run, mode)
    with pytest.raises(AuditError, match="writable by group/others"):
        open_record_file(run, "proc-x.jsonl")
    assert os.listdir(run) == ["launch.json"] or os.listdir(run) == []


def test_a_launch_directory_of_another_user_is_refused(run):
    if os.getuid() != 0:
        pytest.skip("needs root to give the directory to another user")
    os.chown(run, 65534, 65534)
    with pytest.raises(AuditError, match="belongs to uid 65534"):
        open_record_file(run, "proc-x.jsonl")


def test_the_audit_writer_refuses_a_planted_file_and_says_so(run, tmp_path, capsys):
    _plant(run, process_file_name(), "fifo", tmp_path)
    writer = AuditWriter(run, role="child")
    assert writer.write("process_role", title="sglang::x") is False  # returned at once: the FIFO never blocks
    assert "already exists" in capsys.readouterr().err
    required = AuditWriter(run, required=True, role="child")
    with pytest.raises(AuditError, match="audit_required"):
        required.write("process_role", title="sglang::x")


def test_a_node_without_the_launchers_filesystem_makes_its_launch_directory(tmp_path):
    run = str(tmp_path / "root" / "20261201-000000-1-abcd")
    writer = AuditWriter(run, role="scheduler")
    assert writer.write("process_role", title="sglang::scheduler_TP1")
    assert (
        stat.S_IMODE(os.stat(run).st_mode) == 0o700
        and stat.S_IMODE(os.stat(os.path.dirname(run)).st_mode) == 0o700
    )
    for bad in ("relative/launch", "/a/../b/launch", "/a/b/launch/"):
        with pytest.raises(AuditError, match="is not a normalised absolute path"):
            join_launch_dir(bad)


def test_identity_names_this_process_on_this_host():
    me = identity()
    assert me["host"] == os.uname().nodename and me["pid"] == os.getpid()
    assert me["boot_id"] == open("/proc/sys/kernel/random/boot_id").read().strip().replace("-", "")
    assert me["pidns"] == os.readlink("/proc/self/ns/pid").split("[")[1].rstrip("]")
    assert me["start"].isdigit() and identity() == me
    assert file_stem(me).endswith(f"-{me['start']}-{me['pid']}")


def test_another_process_has_another_identity():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from sglang_eagle_nccl.contract.launch_dir import identity; "
            "import json; print(json.dumps(identity()))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    import json

    child = json.loads(out.stdout)
    me = identity()
    assert {k: child[k] for k in ("host", "boot_id", "pidns")} == {
        k: me[k] for k in ("host", "boot_id", "pidns")
    }
    assert identity_key(child) != identity_key(me)


def test_names_are_made_of_safe_characters_whatever_the_host_name_holds():
    stem = file_stem({"host": "a/b c\n..\x1b[2J", "boot_id": "x", "pidns": "1", "start": "2", "pid": 3})
    assert "/" not in stem and "\n" not in stem and "\x1b" not in stem and " " not in stem
