"""Edges of contract/launch_dir.py: identity parsing, file names, the rules of the files and directories it makes.

Each test pins a decision the module makes at its edge: which identity part is "unknown", the exact
name of a file or launch directory, which directory mode is accepted and the first refused, which
open flags a descriptor carries, and what the refusal says.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import subprocess
import sys
import tempfile

import pytest

from sglang_eagle_nccl.contract import launch_dir
from sglang_eagle_nccl.contract import log as log_module
from sglang_eagle_nccl.contract.launch_dir import (
    AuditError,
    file_stem,
    identity,
    join_launch_dir,
    new_launch_dir,
    open_launch,
    open_record_file,
    process_file_name,
    reads_file_name,
    secure_dir,
    write_launch_meta,
)

BOOT_ID = "/proc/sys/kernel/random/boot_id"


@pytest.fixture
def fresh_identity(monkeypatch):
    """identity() reads the host part and the start time afresh in this test (both are cached per process)."""
    monkeypatch.setattr(launch_dir, "_machine", None)
    monkeypatch.setattr(launch_dir, "_started", None)


@pytest.fixture
def run(tmp_path):
    return str(new_launch_dir(tmp_path / "root"))


def _pid_link(monkeypatch, link):
    real = os.readlink

    def readlink(path, *args, **kwargs):
        if path == "/proc/self/ns/pid":
            if isinstance(link, Exception):
                raise link
            return link
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "readlink", readlink)


def _boot_text(monkeypatch, text):
    real = launch_dir._read_small
    monkeypatch.setattr(launch_dir, "_read_small", lambda path: text if path == BOOT_ID else real(path))


# --- the host part of the identity -------------------------------------------------------------------


@pytest.mark.parametrize(
    "link,pidns",
    [
        ("pid:[4026531836]", "4026531836"),
        ("pid:[[4026531836]", "unknown"),  # the first '[' opens the number
        ("pid:[4026531836]]", "4026531836"),  # the first ']' closes it
        ("pid:[abc]", "unknown"),
        ("pid:4026531836", "unknown"),  # no brackets: ValueError
        (PermissionError("no /proc"), "unknown"),
    ],
)
def test_the_pid_namespace_is_the_number_in_the_first_brackets_or_unknown(
    monkeypatch, fresh_identity, link, pidns
):
    _pid_link(monkeypatch, link)
    assert identity()["pidns"] == pidns


@pytest.mark.parametrize(
    "text,boot_id",
    [
        ("0a1b2c3d-4e5f-6789-abcd-ef0123456789\n", "0a1b2c3d4e5f6789abcdef0123456789"),
        (None, "unknown"),  # unreadable
        ("", "unknown"),
        ("0a1b?c3d\n", "unknown"),  # not alphanumeric once the dashes are gone
    ],
)
def test_the_boot_id_is_alphanumeric_or_unknown(monkeypatch, fresh_identity, text, boot_id):
    _boot_text(monkeypatch, text)
    assert identity()["boot_id"] == boot_id


# --- the start time ------------------------------------------------------------------------------------


def _stat_text(monkeypatch, pid, text):
    real = launch_dir._read_small
    monkeypatch.setattr(
        launch_dir, "_read_small", lambda path: text if path == f"/proc/{pid}/stat" else real(path)
    )


def _oracle_start(pid):
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rpartition(")")[2].split()[19]


def test_the_start_time_is_field_22_even_when_the_command_name_holds_parentheses(fresh_identity):
    # The child renames itself "a) b c (d) e": fields are counted after the LAST ')'.
    code = "open('/proc/self/comm','w').write('a) b c (d) e'); print('ready', flush=True); import sys; sys.stdin.read()"
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        assert open(f"/proc/{child.pid}/comm").read().strip() == "a) b c (d) e"
        start = identity(child.pid)["start"]
        assert start.isdigit() and start == _oracle_start(child.pid)
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def test_the_start_time_of_this_process_is_its_field_22(fresh_identity):
    assert identity()["start"] == _oracle_start(os.getpid())


def test_identity_is_of_the_pid_asked_for(fresh_identity):
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        them = identity(child.pid)
        assert them["pid"] == child.pid and them["start"] == _oracle_start(child.pid)
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def test_a_process_that_is_gone_has_an_unknown_start_not_the_cached_one(fresh_identity):
    me = identity()
    assert me["start"].isdigit()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)  # reaped: /proc/<pid> is gone
    assert identity(child.pid)["start"] == "unknown"


def test_the_start_time_is_read_once_per_pid(monkeypatch, fresh_identity):
    first = identity()["start"]
    _stat_text(monkeypatch, os.getpid(), None)  # a second read would say "unknown"
    assert identity()["start"] == first


@pytest.mark.parametrize(
    "fields,start",
    [
        (20, "19"),  # exactly 20 fields after the name: the 20th is the start time
        (19, "unknown"),  # one short
        (52, "19"),
    ],
)
def test_the_start_time_needs_twenty_fields_after_the_name(monkeypatch, fresh_identity, fields, start):
    text = "4242 (x) " + " ".join(str(i) for i in range(fields))
    _stat_text(monkeypatch, 4242, text)
    assert identity(4242)["start"] == start


@pytest.mark.parametrize(
    "after_name,start",
    [
        (["7"] * 19 + ["?"] + ["8"] * 30, "unknown"),
        (["7"] * 19 + ["123"] + ["?"] * 30, "123"),  # only the 20th field must be a number
    ],
)
def test_the_start_time_field_must_be_a_number(monkeypatch, fresh_identity, after_name, start):
    _stat_text(monkeypatch, 4242, "4242 (x) " + " ".join(after_name))
    assert identity(4242)["start"] == start


def test_a_stat_without_a_closing_parenthesis_has_an_unknown_start(monkeypatch, fresh_identity):
    _stat_text(monkeypatch, 4242, "4242 x " + " ".join(["5"] * 50))
    assert identity(4242)["start"] == "unknown"


# --- /proc reads -----------------------------------------------------------------------------------


def test_small_reads_replace_what_is_not_ascii_and_stop_at_4096_bytes(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"ab\xffc" + b"z" * 5000)
    text = launch_dir._read_small(str(path))
    assert text.startswith("ab\ufffdc") and len(text) == 4096


def test_small_reads_never_block_on_a_fifo(tmp_path):
    # A FIFO with no writer: a blocking open would never return (the child is killed at the timeout).
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    code = "import sys; from sglang_eagle_nccl.contract import launch_dir; print(repr(launch_dir._read_small(sys.argv[1])))"
    out = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout == "''\n", out.stderr


# --- file names ------------------------------------------------------------------------------------


IDENT = {"host": "node-1.example", "boot_id": "b00", "pidns": "4026", "start": "777", "pid": 42}


def test_file_names_carry_the_identity_they_are_given():
    assert file_stem(IDENT) == "node_1.example-b00-4026-777-42"
    assert process_file_name(IDENT) == "proc-node_1.example-b00-4026-777-42.jsonl"
    assert reads_file_name(IDENT) == "nccl-reads-node_1.example-b00-4026-777-42.jsonl"


def test_each_unsafe_character_becomes_one_underscore_and_a_part_is_at_most_64():
    assert file_stem({**IDENT, "host": "a b/c\u00e9d"}) == "a_b_c_d-b00-4026-777-42"
    assert file_stem({**IDENT, "host": "h" * 64}).split("-")[0] == "h" * 64
    assert file_stem({**IDENT, "host": "h" * 70}).split("-")[0] == "h" * 64
    assert file_stem({**IDENT, "host": ""}) == "_-b00-4026-777-42"


# --- directories -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o700, 0o701, 0o711, 0o755, 0o705])
def test_a_directory_others_may_read_or_enter_is_accepted(tmp_path, mode):
    path = tmp_path / "d"
    path.mkdir()
    os.chmod(path, mode)
    assert secure_dir(str(path), create_parents=False) == str(path)


@pytest.mark.parametrize("mode,shown", [(0o720, "0o720"), (0o702, "0o702"), (0o770, "0o770")])
def test_a_directory_others_may_write_is_refused_naming_it_and_its_mode(tmp_path, mode, shown):
    path = tmp_path / "d"
    path.mkdir()
    os.chmod(path, mode)
    with pytest.raises(AuditError) as err:
        secure_dir(str(path), create_parents=False)
    assert str(err.value) == (
        f"audit directory {path} is writable by group/others (mode {shown}); fix with chmod 700 {path}"
    )


def test_a_file_where_the_root_should_be_is_refused(tmp_path):
    root = tmp_path / "root"
    root.write_text("")
    os.chmod(root, 0o600)
    with pytest.raises(AuditError) as err:
        new_launch_dir(root)
    assert (
        str(err.value)
        == f"audit directory {root} is not a plain directory (symlink or file); refusing to use it"
    )


def test_join_creates_the_root_and_the_launch_directory_but_never_a_chain_of_parents(tmp_path):
    run = str(tmp_path / "root" / "20261201-000000-1-abcd")
    assert join_launch_dir(run) == run
    for path in (run, os.path.dirname(run)):
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o700
    deep = str(tmp_path / "a" / "b" / "root" / "20261201-000000-1-abcd")
    with pytest.raises(AuditError, match="does not exist"):
        join_launch_dir(deep)
    assert not (tmp_path / "a").exists()


def test_a_new_launch_never_creates_a_chain_of_parents(tmp_path):
    with pytest.raises(AuditError, match="its parent .* does not exist"):
        new_launch_dir(tmp_path / "a" / "b" / "root")
    assert not (tmp_path / "a").exists()
    assert new_launch_dir(tmp_path / "root").parent == tmp_path / "root"


def test_the_default_root_is_under_the_temporary_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = new_launch_dir()
    assert run.parent == tmp_path / f"sglang-eagle-nccl-{os.getuid()}"
    assert stat.S_IMODE(os.lstat(run.parent).st_mode) == 0o700


def test_a_launch_directory_is_named_by_time_pid_and_four_hex_digits(tmp_path):
    run = new_launch_dir(tmp_path)
    assert re.fullmatch(rf"\d{{8}}-\d{{6}}-{os.getpid()}-[0-9a-f]{{4}}", run.name), run.name
    assert stat.S_IMODE(os.lstat(run).st_mode) == 0o700


def _collide(monkeypatch, base, taken):
    """Every launch-directory name is stamped 20260101-000000; the first ``taken`` random suffixes exist already."""
    monkeypatch.setattr(launch_dir.time, "strftime", lambda fmt: "20260101-000000")
    base.mkdir(mode=0o700)
    for i in range(taken):
        (base / f"20260101-000000-{os.getpid()}-{i:04x}").mkdir()
    counter = iter(range(1000))
    real = os.urandom
    monkeypatch.setattr(os, "urandom", lambda n: next(counter).to_bytes(2, "big") if n == 2 else real(n))


def test_a_launch_directory_is_tried_under_a_hundred_names(tmp_path, monkeypatch):
    base = tmp_path / "root"
    _collide(monkeypatch, base, 99)
    assert new_launch_dir(base).name == f"20260101-000000-{os.getpid()}-0063"


def test_after_a_hundred_taken_names_no_launch_directory_is_made(tmp_path, monkeypatch):
    base = tmp_path / "root"
    _collide(monkeypatch, base, 100)
    with pytest.raises(AuditError) as err:
        new_launch_dir(base)
    assert str(err.value) == f"could not create a launch directory under {base}"
    assert len(os.listdir(base)) == 100


def test_one_taken_name_moves_to_the_next(tmp_path, monkeypatch):
    base = tmp_path / "root"
    _collide(monkeypatch, base, 1)
    assert new_launch_dir(base).name == f"20260101-000000-{os.getpid()}-0001"


# --- record files ----------------------------------------------------------------------------------


def test_a_record_file_is_opened_non_blocking_for_appending(run):
    fd = open_record_file(run, "proc-x.jsonl")
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        assert flags & os.O_NONBLOCK and flags & os.O_APPEND and flags & os.O_ACCMODE == os.O_WRONLY
    finally:
        os.close(fd)


def test_a_record_file_whose_name_exists_is_refused_naming_its_path(run):
    os.close(open_record_file(run, "proc-x.jsonl"))
    with pytest.raises(AuditError) as err:
        open_record_file(run, "proc-x.jsonl")
    assert str(err.value).startswith(f"{os.path.join(run, 'proc-x.jsonl')} already exists: ")


def test_a_launch_directory_that_is_a_file_is_refused_by_the_open_itself(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("")
    os.chmod(path, 0o600)
    with pytest.raises(NotADirectoryError):
        open_record_file(str(path), "proc-x.jsonl")


def test_a_writable_launch_directory_is_refused_naming_it(run):
    os.chmod(run, 0o770)
    with pytest.raises(AuditError) as err:
        open_record_file(run, "proc-x.jsonl")
    assert str(err.value).startswith(f"audit directory {run} is writable by group/others (mode 0o770)")


def test_a_record_file_linked_elsewhere_before_it_is_checked_is_refused(run, monkeypatch):
    # The race the last check is for: a second link appears between the create and the fstat.
    path = os.path.join(run, "proc-x.jsonl")
    real_fstat = os.fstat
    closed = []
    real_close = os.close

    def fstat(fd):
        st = real_fstat(fd)
        if stat.S_ISREG(st.st_mode) and not os.path.exists(path + ".2"):
            os.link(path, path + ".2")
            return real_fstat(fd)
        return st

    def close(fd):
        closed.append(fd)
        real_close(fd)

    monkeypatch.setattr(os, "fstat", fstat)
    monkeypatch.setattr(os, "close", close)
    with pytest.raises(AuditError) as err:
        open_record_file(run, "proc-x.jsonl")
    assert str(err.value) == f"{path} is not a new private file; refusing to use it"
    assert len(closed) == 2  # the directory and the refused file: nothing left open


# --- launch.json and open_launch ---------------------------------------------------------------------


def test_launch_meta_is_private_and_new(run):
    old = os.umask(0o022)
    try:
        other = os.path.join(run, "again")
        os.mkdir(other, 0o700)
        write_launch_meta(other, {"a": 1})
    finally:
        os.umask(old)
    path = os.path.join(other, "launch.json")
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    with pytest.raises(FileExistsError):
        write_launch_meta(other, {"a": 2})
    assert json.loads(open(path).read()) == {"a": 1}


def test_open_launch_with_the_default_root(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = open_launch(None, {"k": "v"}, required=True)
    assert os.path.dirname(run) == str(tmp_path / f"sglang-eagle-nccl-{os.getuid()}")
    assert os.path.exists(os.path.join(run, "launch.json"))


def test_a_required_audit_that_cannot_be_opened_stops_naming_the_root(tmp_path):
    root = tmp_path / "file"
    root.write_text("")
    with pytest.raises(AuditError) as err:
        open_launch(str(root), {}, required=True)
    message = str(err.value)
    assert message.startswith(
        f"cannot create the audit directory under {root}: audit directory {root} is not"
    )
    assert message.endswith(" (audit_required is set); pass a writable audit directory")


def test_an_optional_audit_that_cannot_be_opened_warns_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(log_module, "_said", set())
    root = tmp_path / "file"
    root.write_text("")
    assert open_launch(str(root), {}, required=False) is None
    assert open_launch(str(root), {}, required=False) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"[sglang-eagle-nccl] WARNING: cannot create the audit directory under {root}: ")
    assert err.endswith("; continuing without audit (set audit_required to make this fatal)\n")
