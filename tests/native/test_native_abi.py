"""The native library's ABI is declared once in Python (native/abi.py) and matches the C sources; the bounds
on both sides of the ctypes boundary are the same (nothing wraps around)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sglang_eagle_nccl.native import abi
from sglang_eagle_nccl.native.binding import BindingError, rule_args_from_dict

SRC = Path(__file__).resolve().parents[2] / "sglang_eagle_nccl" / "native" / "src"


def c_exports() -> dict[str, int]:
    """``sen_*`` functions the C sources export -> number of parameters."""
    found = {}
    for path in SRC.glob("*.c"):
        text = path.read_text("utf-8")
        for name, params in re.findall(r"SEN_EXPORT\s+[\w\s\*]+?\b(sen_\w+)\s*\(([^)]*)\)", text):
            params = params.strip()
            found[name] = 0 if params in ("", "void") else params.count(",") + 1
    return found


def test_the_python_table_is_the_c_export_list():
    exported = c_exports()
    assert exported, "no SEN_EXPORT function found: the scan is broken"
    assert set(exported) == set(abi.CONTROL_FUNCTIONS), (
        sorted(set(exported) - set(abi.CONTROL_FUNCTIONS)),
        sorted(set(abi.CONTROL_FUNCTIONS) - set(exported)),
    )
    for name, count in exported.items():
        assert len(abi.CONTROL_FUNCTIONS[name][1]) == count, name


def test_the_control_abi_version_is_the_c_one():
    text = (SRC / "env_plugin.c").read_text("utf-8")
    assert int(re.search(r"#define SEN_CONTROL_ABI (\d+)", text).group(1)) == abi.CONTROL_ABI


def _rule(**over):
    rule = {"collective": "AllReduce", "bytes": [0, 65536], "algorithm": "Ring", "protocol": "LL"}
    rule.update(over)
    return rule


@pytest.mark.parametrize(
    "bad",
    [
        {"bytes": [0, abi.UINT64_MAX + 1]},  # ctypes would give C 0: a rule that can never match
        {"bytes": [0, (1 << 64) + 10]},  # ... or one that fires for messages below 10 bytes
        {"bytes": [-1, 10]},
        {"nranks": [1, abi.UINT64_MAX + 1]},
        {"nnodes": [0 - 1, 2]},
        {"channels": abi.INT_MAX + 1},
    ],
)
def test_a_bound_c_cannot_hold_is_refused_before_the_call(native_lib, bad):
    lib = native_lib
    lib.configure_tuner([])
    good = rule_args_from_dict(_rule())
    with pytest.raises(ValueError, match="C's"):
        lib.binding.configure_tuner([good, rule_args_from_dict(_rule(**bad))])
    assert lib.tuner_rule_count() == 0  # all or nothing: not even the good first rule was kept


def test_the_largest_bounds_c_holds_are_kept_exactly(native_lib):
    lib = native_lib
    lib.binding.configure_tuner([rule_args_from_dict(_rule(bytes=[abi.UINT64_MAX - 1, abi.UINT64_MAX]))])
    try:
        assert lib.tuner_rule_count() == 1
        small = lib.query_tuner(6, "allreduce", 1024, 8)
        assert small.rule is None  # a 2**64-ish lower bound never matches a small message
        big = lib.query_tuner(6, "allreduce", abi.UINT64_MAX - 1, 8)
        assert big.rule == 0
    finally:
        lib.configure_tuner([])


@pytest.mark.parametrize(
    "nbytes,nranks", [(abi.SIZE_T_MAX + 1, 8), (-1, 8), (1024, 0), (1024, abi.SIZE_T_MAX + 1)]
)
def test_the_query_side_refuses_what_nccl_cannot_ask(native_lib, nbytes, nranks):
    with pytest.raises(ValueError, match="size_t"):
        native_lib.query_tuner(6, "allreduce", nbytes, nranks)


def test_a_library_of_another_control_abi_is_refused(tmp_path):
    from sglang_eagle_nccl.native import binding, build

    src = tmp_path / "old.c"
    src.write_text('__attribute__((visibility("default"))) int sen_abi_version(void) { return 1; }\n')
    out = tmp_path / "libold.so"
    import subprocess

    done = subprocess.run(
        [*build.compiler_command(), "-shared", "-fPIC", "-o", str(out), str(src)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"no C compiler here: {done.stderr.decode()[:200]}")
    with pytest.raises(BindingError, match="sen_\\* function is missing|control ABI"):
        binding.Binding(str(out))


def test_the_tuner_command_refuses_a_call_nccl_cannot_make_and_answers_at_the_edge(native_lib):
    from click.testing import CliRunner

    from sglang_eagle_nccl.cli.main import main

    if native_lib.path != __import__("sglang_eagle_nccl.native.library", fromlist=["x"]).library_path():
        pytest.skip("the CLI queries the installed library, which this checkout does not have")
    over = CliRunner().invoke(
        main, ["tuner", "--profile", "pcie-8gpu-eagle", "--bytes", str(abi.SIZE_T_MAX + 1), "--nranks", "8"]
    )
    assert over.exit_code == 2 and "larger than NCCL's size_t" in over.output, over.output
    edge = CliRunner().invoke(
        main,
        ["tuner", "--profile", "pcie-8gpu-eagle", "--bytes", str(abi.SIZE_T_MAX), "--nranks", "8", "--json"],
    )
    assert edge.exit_code == 0, edge.output
    ranks = CliRunner().invoke(
        main, ["tuner", "--profile", "pcie-8gpu-eagle", "--bytes", "10", "--nranks", str(abi.SIZE_T_MAX + 1)]
    )
    assert ranks.exit_code == 2 and "18446744073709551615" in ranks.output
