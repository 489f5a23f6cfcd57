"""The one ctypes binding (native/binding.py) at its edges (issue 19): loading (one instance per real path,
a library that is not ours refused naming why), the values refused before the C side is touched (naming
which rule and which field), what the C side refuses, and a validated rule's numbers.

Each test that loads the library loads its own copy from tmp_path: a path the process never loaded, so
the binding is built and checked here and not taken from the per-path cache (a second copy is a second
library with its own state, so nothing leaks into the session's library).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

import pytest

from sglang_eagle_nccl.native import abi, binding, build
from sglang_eagle_nccl.native.abi import CONTROL_FUNCTIONS, INT_MAX, UINT64_MAX

RULE = (0, 0, 1024, 1, UINT64_MAX, 1, UINT64_MAX, None, 0, 0, 0)  # AllReduce below 1 KiB, any size of job


@pytest.fixture
def copy(native_lib, tmp_path):
    path = tmp_path / "copy" / os.path.basename(str(native_lib.path))
    path.parent.mkdir()
    shutil.copyfile(native_lib.path, path)
    return str(path)


@pytest.fixture
def fresh(copy):
    return binding.Binding(copy)


def _stub(tmp_path, abi_version: int, missing: str | None = None) -> str:
    """A shared library exporting the sen_* names, that is not ours (another control ABI, or one missing)."""
    src = tmp_path / "stub.c"
    lines = [
        f"int {name}(void) {{ return {abi_version if name == 'sen_abi_version' else 0}; }}"
        for name in CONTROL_FUNCTIONS
        if name != missing
    ]
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / f"stub-{abi_version}-{missing}.so"
    cmd = [*build.compiler_command(), "-shared", "-fPIC", "-o", str(out), str(src)]
    # The native tier needs a C compiler anyway (it builds the library): a failure here is a failure.
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"the stub library does not compile: {done.stderr[-400:]}"
    return str(out)


# --- load -------------------------------------------------------------------------------------------------------


def test_load_is_one_binding_per_real_path(copy, tmp_path):
    first = binding.load(copy)
    assert isinstance(first, binding.Binding) and first.path == copy
    assert binding.load(copy) is first
    link = tmp_path / "link.so"
    link.symlink_to(copy)
    assert binding.load(str(link)) is first  # the same file through another name: the same instance
    other = tmp_path / "other.so"
    shutil.copyfile(copy, other)
    second = binding.load(str(other))
    assert second is not first and second.path == str(other)
    assert second.lib.sen_abi_version() == abi.CONTROL_ABI


def test_a_missing_library_is_refused_naming_it(tmp_path):
    path = str(tmp_path / "nowhere.so")
    with pytest.raises(binding.BindingError, match=rf"^cannot load {path}: "):
        binding.Binding(path)


def test_a_library_of_another_control_abi_is_refused_naming_both(tmp_path):
    path = _stub(tmp_path, abi.CONTROL_ABI + 97)
    with pytest.raises(binding.BindingError) as info:
        binding.Binding(path)
    assert str(info.value) == (
        f"{path} has control ABI {abi.CONTROL_ABI + 97}, this plugin needs {abi.CONTROL_ABI} (reinstall it)"
    )


def test_a_library_without_a_control_function_is_not_ours(tmp_path):
    path = _stub(tmp_path, abi.CONTROL_ABI, missing="sen_tuner_rule_count")
    with pytest.raises(binding.BindingError, match="is not the sglang-eagle-nccl native library"):
        binding.Binding(path)


def test_the_binding_of_a_fresh_copy_serves_its_calls(fresh, copy):
    assert fresh.path == copy and fresh.library_version()
    # 64-bit bounds reach C intact only through the declared argument types: passed as a C int, 2**32 + 1
    # would arrive as 1, below the minimum of 5, and the C tuner would refuse the rule as an empty range.
    fresh.configure_tuner([RULE, (0, 5, (1 << 32) + 1, 1, UINT64_MAX, 1, UINT64_MAX, "tp", 0, 1, 2)])
    assert fresh.tuner_rule_count() == 2
    fresh.select_group("tp")
    assert fresh.selected_group() == "tp"


# --- refused before the C side ------------------------------------------------------------------------------------


def test_encode_names_the_argument_and_the_wrong_type():
    with pytest.raises(TypeError) as info:
        binding.encode(5, "group label")
    assert str(info.value) == "group label must be a str, not int"


def test_errno_text_names_the_errno_symbol_or_the_number():
    assert binding.errno_text(errno.EINVAL) == f"{os.strerror(errno.EINVAL)} (EINVAL)"
    assert binding.errno_text(9999) == f"{os.strerror(9999)} (9999)"


@pytest.mark.parametrize(
    "field,index,value",
    [
        ("collective", 0, -1),
        ("algorithm", 8, -1),
        ("protocol", 9, INT_MAX + 1),
        ("channels", 10, -1),
        ("min bytes", 1, -1),
        ("max nodes", 6, UINT64_MAX + 1),
    ],
)
def test_a_rule_value_outside_its_c_type_is_refused_naming_the_rule_and_field(lib, field, index, value):
    rule = list(RULE)
    rule[index] = value
    with pytest.raises(ValueError) as info:
        lib.binding.configure_tuner([RULE, tuple(rule)])
    assert str(info.value).startswith(f"rule 2: {field} must be an integer from 0 to ")
    assert lib.tuner_rule_count() == 0


def test_a_rule_is_named_by_its_label_and_by_its_number_past_the_labels(lib):
    bad = (-1, *RULE[1:])
    with pytest.raises(ValueError, match=r"^first rule: collective must be"):
        lib.binding.configure_tuner([bad], ["first rule"])
    with pytest.raises(ValueError, match=r"^rule 2: collective must be"):
        lib.binding.configure_tuner([RULE, bad], ["first rule"])
    with pytest.raises(ValueError, match=r"^rule 1: collective must be"):
        lib.binding.configure_tuner([bad])


def test_a_rule_group_that_is_not_a_str_is_refused_naming_it(lib):
    with pytest.raises(TypeError, match=r"^group label must be a str, not int$"):
        lib.binding.configure_tuner([(*RULE[:7], 3, *RULE[8:])])


@pytest.mark.parametrize(
    "values,groups,wins,message",
    [
        ({5: "1"}, None, (), "variable name must be a str, not int"),
        ({"NCCL_PROTO": 5}, None, (), "value of NCCL_PROTO must be a str, not int"),
        ({}, {7: {"NCCL_PROTO": "LL"}}, (), "group label must be a str, not int"),
        ({}, {"tp": {5: "LL"}}, (), "variable name must be a str, not int"),
        ({}, {"tp": {"NCCL_PROTO": 5}}, (), "value of NCCL_PROTO must be a str, not int"),
        ({}, None, [5], "variable name must be a str, not int"),
    ],
)
def test_configure_env_refuses_a_non_str_naming_what_it_is(lib, values, groups, wins, message):
    with pytest.raises(TypeError) as info:
        lib.binding.configure_env(values, groups, wins)
    assert str(info.value) == message


def test_select_group_refuses_a_non_str_label(lib):
    with pytest.raises(TypeError, match=r"^group label must be a str, not int$"):
        lib.binding.select_group(3)


def test_a_reads_log_descriptor_outside_c_int_is_refused(lib):
    with pytest.raises(ValueError, match=r"^reads log descriptor must be an integer from 0 to "):
        lib.binding.set_reads_log_fd(-1)


# --- refused by the C side ----------------------------------------------------------------------------------------


def test_an_empty_group_label_is_refused_by_the_env_plugin_naming_the_variable(lib):
    with pytest.raises(binding.BindingError) as info:
        lib.binding.configure_env({}, {"": {"NCCL_PROTO": "LL"}})
    assert (
        str(info.value)
        == f"native env plugin could not store NCCL_PROTO: {os.strerror(errno.EINVAL)} (EINVAL)"
    )


def test_a_rule_the_c_tuner_refuses_leaves_no_rules_and_names_the_errno(lib):
    unknown_algorithm = (*RULE[:8], 99, *RULE[9:])
    with pytest.raises(binding.BindingError) as info:
        lib.binding.configure_tuner([RULE, unknown_algorithm], ["kept", "refused"])
    assert str(info.value) == f"native tuner refused refused: {os.strerror(errno.EINVAL)} (EINVAL)"
    assert lib.tuner_rule_count() == 0


# --- the selected group label -------------------------------------------------------------------------------------


def test_an_empty_selected_label_is_a_label_not_none(lib):
    lib.binding.select_group("")
    assert lib.binding.selected_group() == ""
    lib.binding.select_group(None)
    assert lib.binding.selected_group() is None


@pytest.mark.parametrize("length", [255, 256, 257, 1000])
def test_a_long_selected_label_is_read_whole(lib, length):
    label = "g" * length
    lib.binding.select_group(label)
    assert lib.binding.selected_group() == label


# --- a validated rule as numbers ----------------------------------------------------------------------------------


def test_a_rule_without_ranks_nodes_group_or_channels_takes_the_defaults():
    args = binding.rule_args_from_dict(
        {"collective": "AllReduce", "bytes": [0, "inf"], "algorithm": "Ring", "protocol": "LL"}
    )
    assert args[1:] == (0, UINT64_MAX, 1, UINT64_MAX, 1, UINT64_MAX, None, args[8], args[9], 0)


def test_a_rule_with_every_field_keeps_them():
    args = binding.rule_args_from_dict(
        {
            "collective": "AllReduce",
            "bytes": [16, 4096],
            "nranks": [2, 8],
            "nnodes": [1, 4],
            "group": "tp",
            "algorithm": "Ring",
            "protocol": "LL",
            "channels": 4,
        }
    )
    assert args[1:8] == (16, 4096, 2, 8, 1, 4, "tp") and args[10] == 4
