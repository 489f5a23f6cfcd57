"""The env plugin through the exported ncclEnvPlugin_v1/_v2 structs' function pointers, as NCCL calls it,
and the reads log it writes."""

from __future__ import annotations

import ctypes
import os
import stat
import threading
from pathlib import Path

import pytest

from sglang_eagle_nccl.contract.launch_dir import open_record_file
from support.jsonl import read_jsonl

ENV_ABIS = [1, 2]
NAME = "NCCL_SOCKET_IFNAME"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.setenv.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
_libc.unsetenv.argtypes = [ctypes.c_char_p]
_libc.getenv.argtypes = [ctypes.c_char_p]
_libc.getenv.restype = ctypes.c_char_p


@pytest.fixture
def cenv():
    """Set variables in the C environment (libc setenv, behind os.environ's back); restored after."""
    touched: dict[bytes, bytes | None] = {}

    def set_(name: str, value: bytes) -> None:
        key = name.encode()
        touched.setdefault(key, _libc.getenv(key))
        assert _libc.setenv(key, value, 1) == 0

    yield set_
    for key, old in touched.items():
        if old is None:
            _libc.unsetenv(key)
        else:
            _libc.setenv(key, old, 1)


def open_log(lib, directory: Path, name: str = "nccl_reads.jsonl") -> Path:
    """A reads log created the one way (contract/launch_dir.py) and handed to the library as a descriptor."""
    fd = open_record_file(str(directory), name)
    assert lib.set_reads_log_fd(fd) is None
    return directory / name


@pytest.fixture
def reads_log(lib, tmp_path) -> Path:
    return open_log(lib, tmp_path)


def lines(path: Path) -> list[dict]:
    return read_jsonl(path)


def reads(path: Path) -> list[dict]:
    return [r for r in lines(path) if r["event"] == "read"]


@pytest.mark.parametrize("abi", ENV_ABIS)
def test_profile_value_survives_os_environ_and_libc_setenv(lib, abi, monkeypatch, cenv):
    lib.configure_env({NAME: "lo"})
    monkeypatch.setenv(NAME, "eth9")
    assert lib.plugin_get_env(NAME, abi)[0] == "lo"
    cenv(NAME, b"bogus0")
    assert os.environ[NAME] == "eth9" and _libc.getenv(NAME.encode()) == b"bogus0"
    assert lib.plugin_get_env(NAME, abi)[0] == "lo"


@pytest.mark.parametrize("abi", ENV_ABIS)
def test_other_names_come_from_the_real_environment_at_lookup_time(lib, abi, monkeypatch, cenv):
    lib.configure_env({NAME: "lo"})
    monkeypatch.delenv("NCCL_SOCKET_NTHREADS", raising=False)
    assert lib.plugin_get_env("NCCL_SOCKET_NTHREADS", abi) == (None, 0)
    monkeypatch.setenv("NCCL_SOCKET_NTHREADS", "4")
    assert lib.plugin_get_env("NCCL_SOCKET_NTHREADS", abi)[0] == "4"
    cenv("NCCL_SOCKET_NTHREADS", b"2")
    assert lib.plugin_get_env("NCCL_SOCKET_NTHREADS", abi)[0] == "2"


@pytest.mark.parametrize("abi", ENV_ABIS)
def test_environment_wins_names_are_served_from_the_environment(lib, abi, monkeypatch, reads_log):
    lib.configure_env({"NCCL_ALGO": "Ring", NAME: "lo"}, environment_wins=["NCCL_ALGO"])
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    assert lib.plugin_get_env("NCCL_ALGO", abi)[0] == "Tree"
    (line,) = reads(reads_log)
    assert (line["value"], line["source"], line["environment"], line["disagrees"]) == (
        "Tree",
        "environment (sglang_wins)",
        "Tree",
        True,
    )


@pytest.mark.parametrize("abi", ENV_ABIS)
def test_group_values_only_while_the_group_is_selected(lib, abi, monkeypatch, reads_log):
    monkeypatch.setenv("NCCL_PROTO", "Simple")
    lib.configure_env({"NCCL_PROTO": "LL128"}, {"tp": {"NCCL_PROTO": "LL"}})
    assert lib.plugin_get_env("NCCL_PROTO", abi)[0] == "LL128"
    lib.select_group("tp")
    assert lib.plugin_get_env("NCCL_PROTO", abi)[0] == "LL"
    lib.select_group("pp")  # a group without overrides gets the process-wide value
    assert lib.plugin_get_env("NCCL_PROTO", abi)[0] == "LL128"
    lib.select_group(None)
    assert lib.plugin_get_env("NCCL_PROTO", abi)[0] == "LL128"
    assert [(r["value"], r["source"]) for r in reads(reads_log)] == [("LL128", "profile"), ("LL", "group:tp")]


def test_group_selection_is_readable_and_replaceable(lib):
    assert lib.selected_group() is None
    lib.select_group("moe_ep" * 60)  # longer than the first buffer
    assert lib.selected_group() == "moe_ep" * 60
    lib.select_group(None)
    assert lib.selected_group() is None


@pytest.mark.parametrize("abi", ENV_ABIS)
def test_returned_pointer_is_stable_and_not_into_environ(lib, abi, monkeypatch):
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")
    value, address = lib.plugin_get_env("NCCL_IB_HCA", abi)
    environ_address = ctypes.cast(_libc.getenv(b"NCCL_IB_HCA"), ctypes.c_void_p).value
    assert value == "mlx5_0" and address != environ_address
    assert lib.plugin_get_env("NCCL_IB_HCA", abi)[1] == address  # unchanged value: same storage
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_1")
    value2, address2 = lib.plugin_get_env("NCCL_IB_HCA", abi)
    assert value2 == "mlx5_1" and address2 != address
    # Another NCCL thread may still hold the earlier pointer: it stays valid, and the value coming back
    # gets the same storage again (alternating values, e.g. group labels switching, never free anything).
    assert ctypes.string_at(address) == b"mlx5_0"
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")
    assert lib.plugin_get_env("NCCL_IB_HCA", abi) == ("mlx5_0", address)


def test_reads_log_records_first_lookups_and_counts_repeats(lib, monkeypatch, cenv, reads_log):
    lib.configure_env({NAME: "lo"})
    monkeypatch.setenv(NAME, "lo")
    for _ in range(3):
        lib.plugin_get_env(NAME, 2)
    cenv(NAME, b"bogus0")  # a foreign write after NCCL's first read is still recorded
    lib.plugin_get_env(NAME, 1)
    lib.plugin_get_env(NAME, 2)
    assert lib.flush_reads_counts() is None
    first, foreign = reads(reads_log)
    assert (first["value"], first["source"], first["environment"], first["disagrees"]) == (
        "lo",
        "profile",
        "lo",
        False,
    )
    assert (foreign["value"], foreign["environment"], foreign["disagrees"]) == ("lo", "bogus0", True)
    assert first["pid"] == os.getpid() and isinstance(first["time"], float)
    (counts,) = [r for r in lines(reads_log) if r["event"] == "counts"]
    assert [(c["environment"], c["count"]) for c in counts["reads"]] == [("lo", 3), ("bogus0", 2)]
    assert stat.S_IMODE(reads_log.stat().st_mode) == 0o600


def test_reads_log_escapes_any_environment_bytes(lib, cenv, reads_log):
    raw = b'a"b\\c\nd\te\x01f\xc3\xa9g\xff\xfeh\xed\xa0\x80i'  # quotes, controls, UTF-8, invalid bytes, a surrogate
    cenv("NCCL_TOPO_FILE", raw)
    assert lib.plugin_get_env("NCCL_TOPO_FILE", 2)[0] == os.fsdecode(raw)
    (line,) = reads(reads_log)
    assert line["value"] == line["environment"] == os.fsdecode(raw)  # what os.environ would show


def test_lines_before_the_log_is_opened_are_written_when_it_opens(lib, tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_COMM_ID", "10.0.0.1:2900")
    lib.plugin_get_env("NCCL_COMM_ID", 2)
    assert lib.reads_log_error() == "no NCCL reads log was opened in this process"
    path = open_log(lib, tmp_path, "late.jsonl")
    assert [(r["name"], r["value"]) for r in reads(path)] == [("NCCL_COMM_ID", "10.0.0.1:2900")]


@pytest.mark.parametrize("abi", ENV_ABIS)
def test_init_and_finalize_record_the_nccl_version(lib, abi, reads_log):
    plugin = lib.env_struct(abi)
    if abi == 1:
        assert plugin.init(2, 28, 9, b"") == 0
    else:
        assert plugin.init(2, 32, 3, b"", None) == 0
    assert plugin.finalize() == 0
    events = lines(reads_log)
    assert events[0]["event"] == "env_init" and events[-1]["event"] == "counts"
    expected = ("v1", "2.28.9") if abi == 1 else ("v2", "2.32.3")
    assert (events[0]["abi"], events[0]["nccl_version"]) == expected
    assert events[0]["library_version"] == lib.library_version()
    assert lib.env_plugin_info() == expected


def test_a_descriptor_that_cannot_append_is_refused_and_getenv_still_works(lib, tmp_path, monkeypatch):
    """The library never opens a path; it takes a descriptor, and only one it can append whole lines to."""
    lib.configure_env({NAME: "lo"})
    path = tmp_path / "r.jsonl"
    path.write_text("")
    for flags in (os.O_RDONLY, os.O_WRONLY):  # read-only, and writable without O_APPEND
        fd = os.open(path, flags)
        try:
            error = lib.set_reads_log_fd(fd)
        finally:
            os.close(fd)
        assert error and "EINVAL" in error
    with pytest.raises(ValueError, match="C's int"):
        lib.set_reads_log_fd(-1)
    monkeypatch.setenv(NAME, "eth0")
    assert lib.plugin_get_env(NAME, 2)[0] == "lo"
    assert path.read_text() == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full to make every write fail")
def test_failing_writes_are_reported_and_getenv_still_works(lib, monkeypatch):
    assert lib.set_reads_log_fd(os.open("/dev/full", os.O_WRONLY | os.O_APPEND)) is None
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    assert lib.plugin_get_env("NCCL_DEBUG", 2)[0] == "WARN"
    assert "No space left on device" in lib.reads_log_error()
    assert "No space left on device" in lib.flush_reads_counts()


def test_forked_child_starts_without_the_parents_log(lib, reads_log):
    pid = os.fork()
    if pid == 0:  # child: report through the exit status only
        os._exit(0 if lib.reads_log_error() == "no NCCL reads log was opened in this process" else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert lib.reads_log_error() is None  # the parent's log is untouched


def test_getenv_from_many_threads_while_groups_change(lib, reads_log, monkeypatch):
    monkeypatch.setenv("NCCL_BUFFSIZE", "1048576")
    lib.configure_env({"NCCL_PROTO": "Simple", NAME: "lo"}, {"tp": {"NCCL_PROTO": "LL"}})
    allowed = {
        "NCCL_PROTO": {"Simple", "LL"},
        NAME: {"lo"},
        "NCCL_BUFFSIZE": {"1048576"},
        "NCCL_ALGO": {None},
    }
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    errors: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        for i in range(3000):
            name = list(allowed)[i % len(allowed)]
            value, _ = lib.plugin_get_env(name, 1 + i % 2)
            if value not in allowed[name]:
                errors.append(f"{name}={value!r}")

    def selector() -> None:
        while not stop.is_set():
            lib.select_group("tp")
            lib.select_group(None)

    threads = [threading.Thread(target=reader) for _ in range(6)]
    flipper = threading.Thread(target=selector)
    flipper.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    flipper.join()
    assert errors == []
    assert lib.flush_reads_counts() is None
    counts = [r for r in lines(reads_log) if r["event"] == "counts"][-1]
    assert sum(c["count"] for c in counts["reads"]) == 6 * 3000
    assert {(r["name"], r["value"]) for r in reads(reads_log)} <= {
        ("NCCL_PROTO", "Simple"),
        ("NCCL_PROTO", "LL"),
        (NAME, "lo"),
        ("NCCL_BUFFSIZE", "1048576"),
        ("NCCL_ALGO", None),
    }


def test_configure_env_refuses_values_no_c_string_can_hold(lib):
    with pytest.raises(ValueError, match="NUL"):
        lib.configure_env({NAME: "lo\0eth0"})


def test_a_name_taking_ever_new_values_keeps_serving_them_right(lib, monkeypatch):
    # Past 64 distinct values of one name the oldest copies are recycled; what is served stays correct.
    for i in range(200):
        monkeypatch.setenv("NCCL_SOCKET_NTHREADS", str(i))
        assert lib.plugin_get_env("NCCL_SOCKET_NTHREADS", 2)[0] == str(i)
