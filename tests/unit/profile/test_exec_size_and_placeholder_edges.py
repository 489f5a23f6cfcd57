"""Exec-size limits and the {audit_dir} placeholder, at their edges: each bound at the bound and one
past it, each refusal naming the variable and the value (issue 19)."""

from __future__ import annotations

import os

import pytest

from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.contract.names import MAX_ARG_STRLEN
from sglang_eagle_nccl.profile import limits
from sglang_eagle_nccl.profile.placeholders import expand_placeholders, has_placeholder

# --- one environment entry / one argument: MAX_ARG_STRLEN with the NUL ---------------------------------


def test_an_environment_entry_of_exactly_max_arg_strlen_fits_and_one_more_byte_does_not():
    name = "NCCL_X"
    fits = "v" * (MAX_ARG_STRLEN - len(name) - 2)  # NAME=value plus its NUL: exactly MAX_ARG_STRLEN
    assert limits.check_exec_size({name: fits}, ["prog"], arg_max=10 * MAX_ARG_STRLEN) == []
    (finding,) = limits.check_exec_size({name: fits + "v"}, ["prog"], arg_max=10 * MAX_ARG_STRLEN)
    assert finding.severity == "error" and finding.variable == name and finding.value == fits + "v"
    assert f"takes {MAX_ARG_STRLEN + 1} bytes with its NUL" in finding.rule
    assert finding.fix == f"shorten {name} to under {MAX_ARG_STRLEN - len(name) - 2} bytes"


def test_non_ascii_values_count_their_utf8_bytes():
    name = "NCCL_X"
    value = "é" * ((MAX_ARG_STRLEN - len(name) - 2) // 2)  # two bytes each
    assert limits.check_exec_size({name: value}, [], arg_max=10 * MAX_ARG_STRLEN) == []
    assert limits.check_exec_size({name: value + "éé"}, [], arg_max=10 * MAX_ARG_STRLEN)


def test_an_argument_of_exactly_max_arg_strlen_fits_and_one_more_byte_does_not():
    fits = "a" * (MAX_ARG_STRLEN - 1)  # plus its NUL
    assert limits.check_exec_size({}, ["prog", fits], arg_max=10 * MAX_ARG_STRLEN) == []
    (finding,) = limits.check_exec_size({}, ["prog", fits + "a"], arg_max=10 * MAX_ARG_STRLEN)
    assert finding.variable == "argument 1" and finding.value == fits + "a"
    assert f"argument of {MAX_ARG_STRLEN + 1} bytes" in finding.rule


# --- the total: strings, NULs and one pointer each, plus argv/envp terminators -------------------------


def _total(env: dict[str, str], argv: list[str]) -> int:
    strings = sum(len(k) + 1 + len(v) + 1 for k, v in env.items()) + sum(len(a) + 1 for a in argv)
    return strings + 8 * (max(len(argv), 1) + len(env) + 2)


@pytest.mark.parametrize(
    "env,argv",
    [
        ({"NCCL_PROTO": "LL", "HOME": "/root"}, ["python", "-m", "sglang.launch_server"]),
        ({}, []),  # no argument at all still takes argv[0]'s pointer
        ({"A": "1"}, ["x"]),
    ],
    ids=["typical", "empty", "small"],
)
def test_the_total_is_exact_at_the_limit_and_one_byte_past_it(env, argv):
    total = _total(env, argv)
    assert limits.check_exec_size(env, argv, arg_max=total) == []
    (finding,) = limits.check_exec_size(env, argv, arg_max=total - 1)
    assert finding.variable == "environment + arguments" and finding.value == f"{total} bytes"
    arg_total = sum(len(a) + 1 for a in argv)
    env_total = sum(len(k) + len(v) + 2 for k, v in env.items())
    assert (
        f"arguments ({arg_total} bytes) and environment ({env_total} bytes) exceed the {total - 1} bytes"
        in finding.rule
    )


def test_the_total_names_the_three_largest_entries_or_none():
    env = {"NCCL_A": "a" * 10, "NCCL_B": "b" * 300, "NCCL_C": "c" * 200, "NCCL_D": "d" * 100}
    (finding,) = limits.check_exec_size(env, ["p"], arg_max=100)
    assert finding.fix.endswith("the largest are: NCCL_B (308 bytes), NCCL_C (208 bytes), NCCL_D (108 bytes)")
    (finding,) = limits.check_exec_size({}, ["p" * 500], arg_max=100)
    assert finding.fix.endswith("the largest are: none")


# --- the machine's argument space ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "sysconf,expected",
    [
        (2 * 1024 * 1024, 2 * 1024 * 1024),  # the usual: a quarter of an 8 MiB stack
        (10**9, limits.KERNEL_ARG_SPACE_CAP),  # a huge stack limit: the kernel's cap applies
        (limits.KERNEL_ARG_SPACE_CAP + 1, limits.KERNEL_ARG_SPACE_CAP),
        (limits.KERNEL_ARG_SPACE_CAP, limits.KERNEL_ARG_SPACE_CAP),
        (MAX_ARG_STRLEN + 1, MAX_ARG_STRLEN + 1),
        (4096, MAX_ARG_STRLEN),  # never below one entry's limit
        (0, MAX_ARG_STRLEN),
        (-1, MAX_ARG_STRLEN),
    ],
)
def test_arg_space_is_sysconf_between_one_entry_and_the_kernel_cap(monkeypatch, sysconf, expected):
    monkeypatch.setattr(os, "sysconf", lambda name: sysconf)
    assert limits.arg_space() == expected


@pytest.mark.parametrize("error", [ValueError("unknown name"), OSError(22, "EINVAL")])
def test_arg_space_without_sysconf_falls_back_to_one_entry(monkeypatch, error):
    def broken(name):
        raise error

    monkeypatch.setattr(os, "sysconf", broken)
    assert limits.arg_space() == MAX_ARG_STRLEN


def test_kernel_cap_is_three_quarters_of_stk_lim():
    assert limits.KERNEL_ARG_SPACE_CAP == 6 * 1024 * 1024 and limits.POINTER_BYTES == 8


def test_without_arg_max_the_machines_arg_space_is_the_limit(monkeypatch):
    monkeypatch.setattr(limits, "arg_space", lambda: 200)
    env = {"NCCL_X": "x"}
    total = _total(env, ["p"])
    assert total < 200 and limits.check_exec_size(env, ["p"]) == []
    monkeypatch.setattr(limits, "arg_space", lambda: total - 1)
    assert limits.check_exec_size(env, ["p"])


# --- {audit_dir} ---------------------------------------------------------------------------------------


def test_the_placeholder_is_expanded_only_at_the_start_of_nccl_debug_file():
    assert has_placeholder("{audit_dir}/x") and not has_placeholder("/x/{audit}")
    assert (
        expand_placeholders("NCCL_DEBUG_FILE", "{audit_dir}/nccl.%h.%p.log", "/srv/a")
        == "/srv/a/nccl.%h.%p.log"
    )
    assert (
        expand_placeholders("NCCL_DEBUG_FILE", "/plain/path.%p", None) == "/plain/path.%p"
    )  # nothing to expand
    assert expand_placeholders("NCCL_DEBUG_FILE", "{audit_dir}/d/f.%p", "/run/50%") == "/run/50%%/d/f.%p"


@pytest.mark.parametrize(
    "name,value",
    [
        ("NCCL_TOPO_FILE", "{audit_dir}/topo.xml"),
        ("NCCL_DEBUG_FILE", "/x/{audit_dir}/f"),
        ("NCCL_DEBUG_FILE", "{audit_dir}/../f"),
        ("NCCL_DEBUG_FILE", "{audit_dir}/"),
    ],
)
def test_a_misplaced_placeholder_is_refused_naming_variable_and_value(name, value):
    with pytest.raises(ProfileError) as info:
        expand_placeholders(name, value, "/srv/a")
    (finding,) = info.value.findings
    assert finding.variable == name and finding.value == value


@pytest.mark.parametrize("run_dir", [None, ""])
def test_without_a_launch_directory_there_is_nothing_to_expand_to(run_dir):
    with pytest.raises(ProfileError) as info:
        expand_placeholders("NCCL_DEBUG_FILE", "{audit_dir}/f.%p", run_dir)
    (finding,) = info.value.findings
    assert finding.variable == "NCCL_DEBUG_FILE" and finding.value == "{audit_dir}/f.%p"
    assert "has none" in finding.rule


@pytest.mark.parametrize(
    "run_dir", ["relative/dir", "/srv/a\x00b", "/srv/a\nb"], ids=["relative", "nul", "newline"]
)
def test_a_launch_directory_that_is_not_an_absolute_one_line_path_is_refused(run_dir):
    with pytest.raises(ProfileError) as info:
        expand_placeholders("NCCL_DEBUG_FILE", "{audit_dir}/f.%p", run_dir)
    (finding,) = info.value.findings
    assert finding.variable == "NCCL_DEBUG_FILE" and finding.value == "{audit_dir}/f.%p"
    assert repr(run_dir) in finding.rule and "not an absolute path" in finding.rule
