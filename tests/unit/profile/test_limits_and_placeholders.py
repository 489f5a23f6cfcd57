"""Exec-size limits (checked against a real execve) and the {audit_dir} placeholder."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.contract.names import MAX_ARG_STRLEN
from sglang_eagle_nccl.profile.limits import arg_space, check_exec_size
from sglang_eagle_nccl.profile.placeholders import expand_placeholders, has_placeholder
from sglang_eagle_nccl.profile.resolve import resolve


def _value_of_entry_size(name: str, size: int) -> str:
    """A value such that NAME=value plus its NUL takes exactly ``size`` bytes."""
    return "x" * (size - len(name) - 2)


def _start(env: dict[str, str]) -> int | None:
    """Start /bin/true with ``env``: None when it started, else the errno of the failure."""
    try:
        subprocess.run(["/bin/true"], env=env, check=True)
    except OSError as exc:
        return exc.errno
    return None


def test_entry_at_max_arg_strlen_starts_and_one_byte_more_does_not():
    """The rule check_exec_size applies is the kernel's: proven with real execve calls."""
    ok = {"NCCL_TOPO_FILE": _value_of_entry_size("NCCL_TOPO_FILE", MAX_ARG_STRLEN)}
    too_big = {"NCCL_TOPO_FILE": _value_of_entry_size("NCCL_TOPO_FILE", MAX_ARG_STRLEN + 1)}
    assert check_exec_size(ok, ["/bin/true"]) == []
    assert _start(ok) is None
    (finding,) = check_exec_size(too_big, ["/bin/true"])
    assert finding.variable == "NCCL_TOPO_FILE" and "MAX_ARG_STRLEN (131072 bytes)" in finding.rule
    assert "shorten NCCL_TOPO_FILE" in finding.fix
    assert _start(too_big) == errno.E2BIG


def test_total_over_arg_space_names_the_largest_variables():
    env = {f"NCCL_X{i}": "y" * 100_000 for i in range(3)}
    env["SMALL"] = "1"
    findings = check_exec_size(env, ["python", "-m", "sglang.launch_server"], arg_max=200_000)
    (total,) = findings
    assert total.variable == "environment + arguments"
    assert "exceed the 200000 bytes" in total.rule
    assert "NCCL_X0 (100009 bytes)" in total.fix and "SMALL" not in total.fix


def test_total_over_the_real_arg_space_fails_a_real_exec():
    limit = arg_space()
    if limit > 8 * 1024 * 1024:
        pytest.skip("argument space larger than 8 MiB on this machine: too much memory for this test")
    env = {f"NCCL_X{i}": "y" * 100_000 for i in range(limit // 100_000 + 2)}
    assert any(f.variable == "environment + arguments" for f in check_exec_size(env, ["/bin/true"]))
    assert _start(env) == errno.E2BIG


def test_long_argument_is_named_by_position():
    (finding,) = check_exec_size({}, ["python", "x" * MAX_ARG_STRLEN])
    assert finding.variable == "argument 1" and "through a file" in finding.fix


def test_an_ordinary_launch_fits():
    assert (
        check_exec_size(dict(os.environ), [sys.executable, "-m", "sglang.launch_server", "--tp", "8"]) == []
    )


# --- {audit_dir} ---------------------------------------------------------------------------


def test_debug_profile_uses_the_placeholder_and_validates():
    env = resolve(["debug"], use_environ=False).profile.env_dict()
    assert env["NCCL_DEBUG_FILE"] == "{audit_dir}/nccl.%h.%p.log"
    assert has_placeholder(env["NCCL_DEBUG_FILE"])


def test_expand_puts_the_file_in_the_launch_directory(tmp_path):
    run = str(tmp_path / "20250101-000000-1-ab")
    assert (
        expand_placeholders("NCCL_DEBUG_FILE", "{audit_dir}/nccl.%h.%p.log", run) == f"{run}/nccl.%h.%p.log"
    )


def test_expand_escapes_percent_in_the_directory():
    # NCCL expands %h/%p/%% in the whole string: a literal % in the directory must be doubled.
    assert (
        expand_placeholders("NCCL_DEBUG_FILE", "{audit_dir}/n.%p.log", "/data/100%p")
        == "/data/100%%p/n.%p.log"
    )


def test_values_without_placeholder_are_unchanged():
    assert expand_placeholders("NCCL_PROTO", "LL", None) == "LL"
    assert expand_placeholders("NCCL_DEBUG_FILE", "/var/log/n.%p", None) == "/var/log/n.%p"


def test_no_launch_directory_is_an_error_naming_the_variable():
    with pytest.raises(ProfileError) as info:
        expand_placeholders("NCCL_DEBUG_FILE", "{audit_dir}/nccl.%h.%p.log", None)
    (f,) = info.value.errors
    assert f.variable == "NCCL_DEBUG_FILE" and "has none" in f.rule and "absolute path" in f.fix


PLACEHOLDER_FIX = "write NCCL_DEBUG_FILE={audit_dir}/nccl.%h.%p.log"


@pytest.mark.parametrize(
    "name,value,run_dir,fix",
    [
        (
            "NCCL_TOPO_FILE",
            "{audit_dir}/topo.xml",
            "/r",
            f"{PLACEHOLDER_FIX}, or use a literal path in NCCL_TOPO_FILE",
        ),
        (
            "NCCL_DEBUG_FILE",
            "/x/{audit_dir}/n.%p",
            "/r",
            f"{PLACEHOLDER_FIX}, or use a literal path in NCCL_DEBUG_FILE",
        ),
        ("NCCL_DEBUG_FILE", "{audit_dir}/../n.%p", "/r", PLACEHOLDER_FIX),
        (
            "NCCL_DEBUG_FILE",
            "{audit_dir}/n.%p",
            "relative/run",
            "let the plugin create the launch directory: it travels in SGLANG_EAGLE_NCCL_PROFILE, which only a launcher "
            "writes (unset SGLANG_EAGLE_NCCL_PROFILE SGLANG_EAGLE_NCCL_ROOT_PID and start the process through a launch)",
        ),
    ],
)
def test_misplaced_placeholder_or_bad_run_dir_is_refused(name, value, run_dir, fix):
    assert fix not in value
    with pytest.raises(ProfileError) as info:
        expand_placeholders(name, value, run_dir)
    (finding,) = info.value.errors
    assert finding.variable == name and finding.fix == fix, finding
