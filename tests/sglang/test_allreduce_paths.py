"""describe_group on the installed SGLang's real GroupCoordinators, in real spawned ranks over gloo.

What a CPU machine really has, and is asserted: SGLang creates PyNccl for its multi-rank groups
but it is unavailable (no NCCL library), no custom all-reduce is enabled, the device group is
gloo; describing never raises, at the moment ``GroupCoordinator.__init__`` returns or later.

Thresholds: SGLang's communicator constructors return early on a CPU device, before they set
their byte bounds (custom_all_reduce.py 0.5.23:72-74, pcie_ipc_ar.py 0.5.23:221-222,
torch_symm_mem.py 0.5.23:63-68), so an *enabled* communicator with live thresholds cannot be built
here; the tests build what SGLang allows on CPU over the real gloo group and check the describer
reads the values those real objects hold (disabled, PCIe IPC ``max_numel == 0``, no ``max_size``).
The thresholds of enabled objects are checked where they come from: the data file's numbers are
compared with the installed SGLang's own constants and tuned tables, and its order with the
order of the installed ``GroupCoordinator`` source.
"""

from __future__ import annotations

import ast
import inspect

import pytest
from packaging.version import Version

from sglang_eagle_nccl.inproc.evidence import allreduce_readers as rd
from sglang_eagle_nccl.knowledge.sglang import allreduce_paths as ap
from support import allreduce_ranks


@pytest.fixture(scope="module")
def ranks(sglang_version):
    from sglang_eagle_nccl.offline.launch.preflight import cpu_rank_env

    env = {"SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS": "1", **cpu_rank_env(2)}
    results = allreduce_ranks.run(2, env)
    assert sorted(results) == [0, 1], results
    for r in results.values():
        assert r["status"] == "ok", r.get("tb")
    return results


def test_every_real_group_described_at_creation_without_error(ranks, sglang_version):
    for r in ranks.values():
        described = r["at_creation"]
        names = [d["group"] for d in described]
        assert names[0] == "world" and "tp" in names, names
        assert {d["unique_name"] for d in described} == set(r["after_init"]), (
            "every registered group was described"
        )
        for d in described:
            assert d["error"] is None, (d["unique_name"], d["error"])
            assert d["sglang_version"] == str(sglang_version)
            assert d["device"] == "cpu"
            assert d["device_group_backend"] == "gloo" and d["device_group_is_nccl"] is False
            assert d["implementations"]["torch_pg"]["enabled"] is True
            assert d["implementations"]["custom_allreduce"]["enabled"] is False
            assert d["implementations"]["custom_allreduce"]["why_not"]
            assert "CPU device" in d["summary"] or d["world_size"] == 1
            assert [s["path"] for s in d["order"]] == [
                s.path for s in ap.dispatch_for(str(sglang_version)).order
            ]
        for lines in r["lines"]:
            assert lines[0].startswith("all-reduce paths of group")


def test_pynccl_created_but_unavailable_on_multi_rank_groups(ranks):
    for r in ranks.values():
        by_name = {d["group"]: d for d in r["at_creation"]}
        tp = by_name["tp"]
        assert tp["world_size"] == 2
        pynccl = tp["implementations"]["pynccl"]
        assert pynccl["present"] is True and pynccl["class"] == "PyNcclCommunicator"
        assert pynccl["enabled"] is False and pynccl["thresholds"]["available"] is False
        assert "NCCL library could not be loaded" in pynccl["why_not"]
        world = by_name["world"]
        assert world["implementations"]["pynccl"]["requested"] is False  # SGLang builds world without PyNccl
        for d in r["at_creation"]:
            if d["world_size"] == 1:
                assert d["summary"].startswith("one rank")
                assert (
                    d["implementations"]["pynccl"]["present"] is False
                    or d["implementations"]["pynccl"]["enabled"] is False
                )


def test_reads_the_values_the_real_cpu_communicators_hold(ranks, sglang_version):
    for r in ranks.values():
        constructed = r["constructed"]["constructed"]
        d = r["constructed"]["description"]
        assert d["error"] is None
        ca = constructed["ca_comm"]
        impl = d["implementations"]["custom_allreduce"]
        if isinstance(ca, str):
            # 0.5.4: the CPU stand-in's sgl_kernel.allreduce namespace passes SGLang's import check, so the
            # constructor goes on and fails at device.index; SGLang's own GroupCoordinator catches that
            # (parallel_state.py 0.5.4:339-355), leaving ca_comm None, which is what is described.
            assert sglang_version < Version("0.5.10") and ca.startswith("constructor raised on CPU"), ca
            assert impl["present"] is False and impl["enabled"] is False and impl["why_not"]
        else:
            # It returns before setting max_size when its kernels are absent (0.5.23:72-74).
            assert ca["disabled"] is True and ca["has_max_size"] is False, ca
            assert impl["present"] is True and impl["class"] == "CustomAllreduce" and impl["enabled"] is False
            assert "max_size" not in impl["thresholds"] and "CPU" in impl["why_not"]
        if sglang_version >= Version("0.5.21"):
            pcie = constructed["pcie_ipc_comm"]
            assert isinstance(pcie, dict) and pcie["disabled"] is True, pcie
            impl = d["implementations"]["pcie_ipc"]
            assert impl["present"] is True and impl["enabled"] is False
            assert impl["thresholds"]["max_numel"] == 0  # the real object's value, read, not assumed
        tsm = constructed.get("torch_symm_mem_comm") or constructed.get("symm_mem_comm")
        if isinstance(tsm, str):
            # SGLang does not allow it on CPU in this release (0.5.4, symm_mem.py 0.5.4:65-72: it needs CUDA --
            # torch.cuda.set_device, or with the CPU stand-in for that, the first CUDA call after it);
            # GroupCoordinator only builds it with --enable-torch-symm-mem.
            assert tsm.startswith("constructor raised on CPU") and "cuda" in tsm.lower(), tsm
            assert d["implementations"]["torch_symm_mem"]["present"] is False
        elif sglang_version >= Version("0.5.3"):
            assert (
                tsm["class"] in ("TorchSymmMemCommunicator", "SymmMemCommunicator")
                and tsm["disabled"] is True
            )
            impl = d["implementations"]["torch_symm_mem"]
            assert impl["present"] is True and impl["enabled"] is False
            # 0.5.16+ set max_size = 0 before returning; older releases set nothing: read as it is.
            assert impl["thresholds"]["max_size"] == (0 if tsm["has_max_size"] else None)


# --- the data file against the installed SGLang ---------------------------------------------------


def test_custom_allreduce_limits_match_installed_sglang(sglang_version):
    from sglang.srt.distributed.device_communicators.custom_all_reduce import CustomAllreduce

    v1 = ap.limits_for("custom_allreduce_v1", str(sglang_version))
    assert CustomAllreduce._SUPPORTED_WORLD_SIZES == v1["world_sizes"]
    default = inspect.signature(CustomAllreduce.__init__).parameters["max_size"].default
    assert default == v1["max_bytes"]  # the CUDA value (ROCm / MUSA builds differ, as the data says)
    from sglang.srt.distributed.parallel_state import GroupCoordinator

    # 0.5.4 alone overrides the default from GroupCoordinator (256 MiB for piecewise CUDA graphs).
    init_src = inspect.getsource(GroupCoordinator.__init__)
    assert ("ca_max_size = 256 * 1024 * 1024" in init_src) == ("max_bytes_piecewise" in v1)

    v2 = ap.limits_for("custom_allreduce_v2", str(sglang_version))
    if sglang_version < Version("0.5.10"):
        assert v2 is None
        return
    from sglang.srt.environ import envs

    if v2["default_on"]:
        assert getattr(envs, v2["switch"]).default is True
    if sglang_version >= Version("0.5.16"):
        assert envs.SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB.default * 1024 == v2["max_bytes"]
    if sglang_version >= Version("0.5.20"):
        # The cap is the crossover to the next path only if every tuned table reaches it.
        from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2 as tables

        for make in (tables._sm90_configs, tables._sm100_configs, tables._sm107_configs):
            configs = make(132)
            for ws in v2["world_sizes"]:
                for heuristic in (configs[ws].graph, configs[ws].eager):
                    assert heuristic.two_shot_pull_threshold >= v2["max_bytes"], (make.__name__, ws)


def test_torch_symm_mem_limits_match_installed_sglang(sglang_version):
    from sglang.srt.distributed.device_communicators import all_reduce_utils

    table = (
        getattr(all_reduce_utils, "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", None)
        or all_reduce_utils.SYMM_MEM_ALL_REDUCE_MAX_SIZES
    )
    lim = ap.limits_for("torch_symm_mem", str(sglang_version))
    assert sorted(table) == lim["capabilities"]
    for cap in lim["capabilities"]:
        assert {str(k): v for k, v in table[cap].items()} == lim["max_bytes_by_world_size"]


def test_pcie_ipc_limits_match_installed_sglang(sglang_version):
    lim = ap.limits_for("pcie_ipc", str(sglang_version))
    if sglang_version < Version("0.5.21"):
        assert lim is None
        with pytest.raises(ImportError):
            import sglang.srt.distributed.device_communicators.pcie_ipc_ar  # noqa: F401
        return
    from sglang.srt.distributed.device_communicators import pcie_ipc_ar
    from sglang.srt.environ import envs

    assert list(pcie_ipc_ar._SUPPORTED_WORLD_SIZES) == lim["world_sizes"]
    assert sorted(pcie_ipc_ar._ELIGIBLE_GROUP_NAMES) == lim["groups"]
    assert pcie_ipc_ar._FALLBACK_DECODE_WIDTH == lim["fallback_decode_rows"]
    assert getattr(envs, lim["switch"]).default is False


# Names SGLang gives its out-of-place methods -> the data file's path names.
_METHODS = {
    "ca": "custom_allreduce",
    "qr": "quick_allreduce",
    "pymscclpp": "mscclpp",
    "symm_mem": "torch_symm_mem",
    "torch_symm_mem": "torch_symm_mem",
    "pcie_ipc": "pcie_ipc",
    "pynccl": "pynccl_piecewise",
}


def _methods_in_source_order(func) -> list[str]:
    """The out-of-place method names the installed GroupCoordinator picks, in source order."""
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    found = []
    for node in ast.walk(tree):
        value = None
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant):
            value = node.value
        elif isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "outplace_all_reduce_method" for t in node.targets
        ):
            value = node.value if isinstance(node.value, ast.Constant) else None
        if value is not None and isinstance(value.value, str) and value.value in _METHODS:
            found.append((value.lineno, _METHODS[value.value]))
    return [name for _, name in sorted(found)]


def test_order_matches_installed_group_coordinator_source(sglang_version):
    from sglang.srt.distributed.parallel_state import GroupCoordinator

    func = (
        getattr(GroupCoordinator, "_resolve_outplace_all_reduce_method", None) or GroupCoordinator.all_reduce
    )
    in_source = _methods_in_source_order(func)
    ours = [s.path for s in ap.dispatch_for(str(sglang_version)).order if s.path in set(_METHODS.values())]
    assert in_source == ours
    # The symmetric-memory PyNccl step precedes them all, as the data says.
    src = inspect.getsource(GroupCoordinator.all_reduce)
    symm = (
        "is_symmetric_memory_enabled()"
        if sglang_version >= Version("0.5.4.post3")
        else "input_.symmetric_memory"
    )
    first_method = (
        "_resolve_outplace_all_reduce_method("
        if "_resolve_outplace_all_reduce_method(" in src
        else "outplace_all_reduce_method = None"
    )
    assert src.index(symm) < src.index(first_method)


def test_v2_thresholds_read_from_sglangs_own_config_objects(sglang_version):
    """CustomAllReduceV2 needs a GPU to construct; its thresholds live in SGLang's AllReduceConfig,
    which SGLang builds with pure functions. Read one the way describe_group reads ``ca_comm.config``."""
    try:
        from sglang.srt.distributed.device_communicators import custom_all_reduce_v2 as v2
    except ImportError:
        assert sglang_version < Version("0.5.10")  # no V2 before 0.5.10
        assert ap.limits_for("custom_allreduce_v2", str(sglang_version)) is None
        return
    # describe_group reads the tuned table only where should_custom_ar() consults it (0.5.20+).
    uses_table = "_pick_config" in inspect.getsource(v2.CustomAllReduceV2.should_custom_ar)
    assert uses_table == (sglang_version >= Version("0.5.20"))
    if not uses_table:
        return
    from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2 as tables

    cap = ap.limits_for("custom_allreduce_v2", str(sglang_version))["max_bytes"]
    config = tables._sm90_configs(132)[8]  # H200, 8 ranks
    kwargs = {"max_push_bytes": cap, "max_pull_bytes": cap}
    if "world_size" in inspect.signature(type(config.graph).clip).parameters:
        kwargs["world_size"] = 8
    clipped = config.clip(**kwargs)  # what CustomAllReduceV2.__init__ stores as self.config
    text = rd._v2_carries(None, clipped, sglang_version)
    assert f"up to {ap.fmt_bytes(cap)} in CUDA graphs and {ap.fmt_bytes(cap)} eager" in text
    assert f"one-shot push up to {ap.fmt_bytes(config.graph.one_shot_push_threshold)}" in text
