"""Plugin libraries NCCL dlopens, and NCCL_DEBUG_FILE's directory: checks on real files."""

from __future__ import annotations

import os
import stat

import pytest

from sglang_eagle_nccl.knowledge.nccl.local_files import (
    NATIVE_DIR,
    PathFacts,
    check_debug_file_directory,
    check_plugin_library,
    inspect_path,
)


@pytest.fixture
def private(tmp_path):
    for d in (tmp_path, *tmp_path.parents):
        mode = os.stat(d).st_mode
        if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
            pytest.skip(f"{d} is writable by everyone")
    tmp_path.chmod(0o700)
    return tmp_path


def _lib(path, mode=0o644):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF")
    path.chmod(mode)
    return path


def test_none_disables_without_findings():
    for value in ("none", "NONE", "None"):
        assert check_plugin_library("NCCL_TUNER_PLUGIN", value, "tuner") == []


def test_private_library_is_only_named(private):
    lib = _lib(private / "lib" / "libnccl-tuner-x.so")
    (f,) = check_plugin_library("NCCL_TUNER_PLUGIN", str(lib), "tuner")
    assert f.severity == "warning" and str(lib) in f.rule


def test_symlink_to_a_writable_library_is_judged_by_its_target(private):
    target = _lib(private / "shared" / "libreal.so", 0o666)
    link = private / "lib" / "libnccl-net.so"
    link.parent.mkdir()
    link.symlink_to(target)
    findings = check_plugin_library("NCCL_NET_PLUGIN", str(link), "net")
    assert any(f.severity == "error" and f"chmod go-w {target}" in f.fix for f in findings)


def test_sticky_world_writable_directory_is_accepted(private):
    sticky = private / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    lib = _lib(sticky / "libp.so")
    findings = check_plugin_library("NCCL_PROFILER_PLUGIN", str(lib), "profiler")
    assert [f.severity for f in findings] == ["warning"]


def test_net_plugin_comma_list_checks_every_entry(private):
    good = _lib(private / "a" / "liba.so")
    findings = check_plugin_library("NCCL_NET_PLUGIN", f"{good},,./rel.so,aws-ofi", "net")
    assert [f.severity for f in findings] == ["warning", "error", "warning"]
    assert "libnccl-net-aws-ofi.so" in findings[2].rule


def test_library_file_name_is_not_prefixed():
    (f,) = check_plugin_library("NCCL_TUNER_PLUGIN", "libmytuner.so", "tuner")
    assert "libmytuner.so from the dynamic linker's search path" in f.rule and "libnccl-tuner-" not in f.rule


def test_too_long_name_is_refused():
    (f,) = check_plugin_library("NCCL_TUNER_PLUGIN", "x" * 250, "tuner")
    assert f.severity == "error" and "cuts it short" in f.rule


def test_the_plugins_own_native_libraries_are_exempt():
    lib = str(NATIVE_DIR / "libsglang_eagle_nccl_plugin.so")

    def facts(path: str) -> PathFacts:
        # As installed by a careless umask: would be an error anywhere else.
        return PathFacts(True, True, 0o100666, 12345, lib, "", ((str(NATIVE_DIR), 0o40777, 12345),))

    assert check_plugin_library("NCCL_ENV_PLUGIN", lib, "env", facts_of=facts) == []
    other = "/opt/elsewhere/lib.so"
    findings = check_plugin_library(
        "NCCL_ENV_PLUGIN",
        other,
        "env",
        facts_of=lambda p: PathFacts(
            True, True, 0o100666, 12345, other, "", (("/opt/elsewhere", 0o40777, 12345),)
        ),
    )
    assert sum(f.severity == "error" for f in findings) == 2


def test_inspect_path_never_raises():
    assert inspect_path("/nonexistent/x.so").exists is False
    assert inspect_path("/").regular is False


def test_debug_file_directory(private):
    open_dir = private / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    assert check_debug_file_directory("NCCL_DEBUG_FILE", f"{open_dir}/nccl.log")
    assert (
        check_debug_file_directory("NCCL_DEBUG_FILE", f"{open_dir}/nccl.%h.%p.log") == []
    )  # %p: per-process name
    assert check_debug_file_directory("NCCL_DEBUG_FILE", f"{private}/nccl.log") == []  # private directory
