"""Each all-reduce path decision of the describer, on the objects a GPU process of SGLang holds
(issue 19: custom all-reduce on or off and why, PCIe IPC, quick all-reduce, MSCCL++, torch
symmetric memory, PyNccl and its symmetric memory, FlashInfer, torch's process group; the order
SGLang tries them in; the summary). The objects are built here with the attributes SGLang's own
communicators store (tests/sglang/test_allreduce_paths.py reads SGLang's real groups on CPU, where
only a few of these branches are reachable)."""

from __future__ import annotations

from types import SimpleNamespace

from sglang_eagle_nccl.inproc.evidence import allreduce_readers as rd
from sglang_eagle_nccl.knowledge.sglang import allreduce_paths as ap
from support.allreduce_groups import (
    CustomAllreduce,
    CustomAllReduceV2,
    Device,
    Stored,
    full_gpu_group,
    group,
    tuned,
)

MiB = 1024 * 1024
_tuned = tuned
_full_gpu_group = full_gpu_group


def impl(g, path: str, version: str = "0.5.23") -> dict:
    return rd.describe_group(g, sglang_version=version)["implementations"][path]


# --- custom all-reduce ---------------------------------------------------------------------------------


def test_custom_allreduce_not_requested():
    e = impl(group(ca_comm=None, use_custom_allreduce=False), "custom_allreduce")
    assert (
        e["present"] is False and e["enabled"] is False and e["requested"] is False and e["carries"] is None
    )
    assert e["why_not"].startswith(
        "not requested for this group (use_custom_allreduce=False): --disable-custom-all-reduce"
    )


def test_custom_allreduce_on_one_rank():
    e = impl(group(ca_comm=None, use_custom_allreduce=True, world_size=1), "custom_allreduce")
    assert e["why_not"] == "one rank: SGLang creates no communicator" and e["requested"] is True


def test_custom_allreduce_requested_but_not_created():
    e = impl(group(ca_comm=None, use_custom_allreduce=True), "custom_allreduce")
    assert e["why_not"].startswith("not created (SGLang skipped it or its setup raised")
    assert "CPU device" not in e["why_not"]
    e = impl(group(ca_comm=None, use_custom_allreduce="yes", device=Device(type="cpu")), "custom_allreduce")
    assert e["requested"] is None and e["why_not"].endswith(
        "; on a CPU device no custom all-reduce can exist)"
    )


def test_custom_allreduce_present_but_disabled_says_why():
    cpu = impl(group(ca_comm=CustomAllreduce(disabled=True), device=Device(type="cpu")), "custom_allreduce")
    assert (
        cpu["present"]
        and cpu["enabled"] is False
        and cpu["why_not"].startswith("present but disabled: the device is a CPU")
    )
    odd = impl(
        group(ca_comm=CustomAllreduce(disabled=True, _SUPPORTED_WORLD_SIZES=[2, 4, 6, 8]), world_size=3),
        "custom_allreduce",
    )
    assert odd["why_not"] == "present but disabled: world size 3 is not one SGLang supports ([2, 4, 6, 8])"
    ok_size = impl(
        group(ca_comm=CustomAllreduce(disabled=True, _SUPPORTED_WORLD_SIZES=(2, 4))), "custom_allreduce"
    )
    assert ok_size["why_not"].startswith("present but disabled during setup")
    unknown = impl(group(ca_comm=CustomAllreduce(disabled=None)), "custom_allreduce")
    assert unknown["enabled"] is False and unknown["why_not"].startswith("present but disabled during setup")


def test_custom_allreduce_v1_carries_up_to_max_size_with_the_releases_comparison():
    ca = CustomAllreduce(disabled=False, max_size=8 * MiB, world_size=2, full_nvlink=True)
    e = impl(group(ca_comm=ca), "custom_allreduce", "0.5.7")
    assert e["enabled"] is True and e["why_not"] is None
    assert e["thresholds"] == {"max_size": 8 * MiB, "world_size": 2, "full_nvlink": True}
    assert e["carries"] == "sizes < 8388608 bytes (8 MiB), multiples of 16 bytes, eager and CUDA graph"
    assert impl(group(ca_comm=ca), "custom_allreduce", "0.5.10")["carries"].startswith(
        "sizes <= 8388608 bytes"
    )


def test_custom_allreduce_v1_without_full_nvlink():
    four = CustomAllreduce(disabled=False, max_size=MiB, full_nvlink=False)
    assert impl(group(ca_comm=four, world_size=4), "custom_allreduce", "0.5.7")["carries"].startswith(
        "nothing on CUDA: more than 2 ranks without full NVLink"
    )
    assert impl(group(ca_comm=four, world_size=2), "custom_allreduce", "0.5.7")["carries"].startswith(
        "sizes < 1048576"
    )
    unknown_link = CustomAllreduce(disabled=False, max_size=MiB)
    assert impl(group(ca_comm=unknown_link, world_size=4), "custom_allreduce", "0.5.7")["carries"].startswith(
        "sizes <"
    )


def test_custom_allreduce_v1_trt_workspace_bound_depends_on_world_size():
    ca = CustomAllreduce(
        disabled=False, max_size=MiB, full_nvlink=True, max_required_workspace_size=[16 * MiB, 8 * MiB]
    )
    two = impl(group(ca_comm=ca, world_size=2), "custom_allreduce", "0.4.3")
    assert two["thresholds"]["max_required_workspace_size"] == [16 * MiB, 8 * MiB]
    assert two["carries"].endswith("(and < 16777216 bytes (16 MiB), TensorRT-LLM kernel path)")
    four = impl(group(ca_comm=ca, world_size=4), "custom_allreduce", "0.4.3")
    assert four["carries"].endswith("(and < 8388608 bytes (8 MiB), TensorRT-LLM kernel path)")
    bad = CustomAllreduce(disabled=False, max_size=MiB, max_required_workspace_size=[1])
    assert "TensorRT" not in impl(group(ca_comm=bad), "custom_allreduce", "0.4.3")["carries"]


def test_custom_allreduce_v1_without_a_readable_max_size():
    ca = CustomAllreduce(disabled=False, max_size="8M")
    assert (
        impl(group(ca_comm=ca), "custom_allreduce", "0.5.7")["carries"] == "unknown (max_size not readable)"
    )


def test_custom_allreduce_v1_with_an_unknown_release_names_both_comparisons():
    ca = CustomAllreduce(disabled=False, max_size=MiB)
    e = rd.describe_group(group(ca_comm=ca), sglang_version="not a version")["implementations"][
        "custom_allreduce"
    ]
    assert e["carries"].startswith("sizes <= or < 1048576 bytes")


def test_custom_allreduce_v2_from_0_5_20_uses_the_tuned_tables():
    e = impl(group(ca_comm=_tuned()), "custom_allreduce", "0.5.23")
    assert e["carries"] == (
        "multiples of 16 bytes up to 4194304 bytes (4 MiB) in CUDA graphs and 1048576 bytes (1 MiB) eager "
        "(tuned table, clipped to the workspace); one-shot push up to 65536 bytes (64 KiB) / 16384 bytes (16 KiB), "
        "two-shot above"
    )
    multicast = impl(group(ca_comm=_tuned(num_mc_blocks=4)), "custom_allreduce", "0.5.23")
    assert multicast["carries"].startswith(
        "multiples of 16 bytes up to 33554432 bytes (32 MiB) in CUDA graphs"
    )
    assert "config" in e["thresholds"]


def test_custom_allreduce_v2_before_0_5_20_or_with_an_override_compares_max_size():
    for version, ca in (("0.5.17", _tuned()), ("0.5.23", _tuned(override_algo="oneshot"))):
        e = impl(group(ca_comm=ca), "custom_allreduce", version)
        assert e["carries"] == "sizes <= 16777216 bytes (16 MiB), multiples of 16 bytes, eager and CUDA graph"
    plain_v2 = CustomAllReduceV2(disabled=False, max_size=None)
    assert (
        impl(group(ca_comm=plain_v2), "custom_allreduce", "0.5.23")["carries"]
        == "unknown (max_size not readable)"
    )


# --- PCIe IPC ------------------------------------------------------------------------------------------


def test_pcie_ipc_absent_from_old_releases_and_not_created_in_new_ones():
    assert (
        impl(group(), "pcie_ipc")["why_not"] == "this SGLang release has no PCIe IPC all-reduce (from 0.5.21)"
    )
    e = impl(group(pcie_ipc_comm=None), "pcie_ipc")
    assert (
        e["why_not"].startswith("not created: needs SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1") and not e["enabled"]
    )


def test_pcie_ipc_enabled_with_and_without_a_size():
    sized = impl(group(pcie_ipc_comm=Stored(disabled=False, max_numel=4096, _world_size=2)), "pcie_ipc")
    assert sized["enabled"] and sized["thresholds"] == {
        "max_numel": 4096,
        "world_size": 2,
        "dtype": "bfloat16",
    }
    assert (
        sized["carries"]
        == "bfloat16 tensors of at most 4096 elements (8192 bytes (8 KiB)), 2+ dims, contiguous"
    )
    for numel in (0, None):
        unsized = impl(group(pcie_ipc_comm=Stored(disabled=False, max_numel=numel)), "pcie_ipc")
        assert (
            unsized["carries"].startswith("bound not sized yet") and unsized["thresholds"]["world_size"] == 2
        )


def test_pcie_ipc_disabled():
    cpu = impl(group(pcie_ipc_comm=Stored(disabled=True), device=Device(type="cpu")), "pcie_ipc")
    assert cpu["why_not"] == "present but disabled: the device is a CPU"
    gpu = impl(group(pcie_ipc_comm=Stored(disabled=True)), "pcie_ipc")
    assert gpu["enabled"] is False and gpu["why_not"].startswith("present but disabled: world size not 2/4/8")


# --- quick all-reduce (ROCm) ---------------------------------------------------------------------------


def test_quick_allreduce():
    assert impl(group(), "quick_allreduce")["why_not"].startswith("not created (ROCm only")
    level = SimpleNamespace(value=1, name="INT8")
    table = {("torch.bfloat16", 2): [1024, 2048], ("torch.float16", 2): [4096], ("torch.bfloat16", 4): [8, 9]}
    qr = Stored(disabled=False, qr_max_size=64 * MiB, qr_quant_level=level, _QR_MIN_SIZE=table)
    e = impl(group(qr_comm=qr), "quick_allreduce")
    assert e["enabled"] and e["thresholds"] == {
        "qr_max_size": 64 * MiB,
        "quant_level": "INT8",
        "min_bytes": {"bfloat16": 2048},
    }
    assert e["carries"] == "sizes from the per-dtype minimum in min_bytes up to 67108864 bytes (64 MiB)"
    off = impl(group(qr_comm=Stored(disabled=True, qr_max_size="x")), "quick_allreduce")
    assert off["enabled"] is False and off["why_not"].startswith("present but disabled during setup")
    assert off["thresholds"]["qr_max_size"] is None and "min_bytes" not in off["thresholds"]


# --- MSCCL++ -------------------------------------------------------------------------------------------


def test_mscclpp():
    assert impl(group(), "mscclpp")["why_not"] == "this SGLang release has no MSCCL++ path (from 0.4.7)"
    e = impl(group(pymscclpp_comm=None, use_pymscclpp=False), "mscclpp")
    assert e["requested"] is False and e["why_not"].endswith(": --enable-mscclpp not given")
    e = impl(group(pymscclpp_comm=None, use_mscclpp=True), "mscclpp")
    assert e["requested"] is True and e["why_not"] == "not created (SGLang skipped it)"
    on = impl(group(pymscclpp_comm=Stored(available=True, max_bytes=MiB), use_mscclpp=True), "mscclpp")
    assert on["enabled"] and on["carries"] == "inside CUDA graphs only: sizes <= 1048576 bytes (1 MiB)"
    assert on["thresholds"] == {"max_bytes": MiB}
    tuned = impl(group(pymscclpp_comm=Stored(available=True)), "mscclpp")
    assert tuned["carries"].startswith("inside CUDA graphs only: sizes its startup tuning chose")
    off = impl(group(pymscclpp_comm=Stored(available=1)), "mscclpp")
    assert off["enabled"] is False and off["why_not"].startswith("present but unavailable")


# --- torch symmetric memory ----------------------------------------------------------------------------


def test_torch_symm_mem_absent_or_not_created():
    assert (
        impl(group(), "torch_symm_mem")["why_not"]
        == "this SGLang release has no torch symmetric-memory path (from 0.5.3)"
    )
    e = impl(group(torch_symm_mem_comm=None, use_torch_symm_mem_all_reduce=False), "torch_symm_mem")
    assert e["requested"] is False and e["why_not"].endswith(
        ": --enable-torch-symm-mem not given, or a group built without it"
    )
    old = impl(group(symm_mem_comm=None, use_torch_symm_mem=True), "torch_symm_mem")
    assert old["requested"] is True and old["why_not"] == "not created (SGLang skipped it)"


def test_torch_symm_mem_enabled_and_disabled():
    comm = Stored(disabled=False, max_size=8 * MiB, dtype="torch.float16", device_capability=(9, 0))
    e = impl(group(torch_symm_mem_comm=comm), "torch_symm_mem")
    assert e["enabled"] and e["thresholds"] == {
        "max_size": 8 * MiB,
        "dtype": "float16",
        "device_capability": [9, 0],
    }
    assert e["carries"] == "float16 tensors of sizes < 8388608 bytes (8 MiB), multiples of 4 bytes"
    default_dtype = impl(group(symm_mem_comm=Stored(disabled=False, max_size="x")), "torch_symm_mem")
    assert default_dtype["thresholds"] == {"max_size": None, "dtype": "bfloat16"}
    cpu = impl(group(torch_symm_mem_comm=Stored(disabled=True), device=Device(type="cpu")), "torch_symm_mem")
    assert cpu["why_not"] == "present but disabled: the device is a CPU"
    gpu = impl(group(torch_symm_mem_comm=Stored(disabled=None)), "torch_symm_mem")
    assert gpu["enabled"] is False and gpu["why_not"].startswith(
        "present but disabled: torch symmetric memory unavailable"
    )


# --- PyNccl and its symmetric memory ---------------------------------------------------------------------


def test_pynccl_not_created_unavailable_and_available():
    e = impl(group(pynccl_comm=None, use_pynccl=False), "pynccl")
    assert e["requested"] is False and e["why_not"] == "not requested for this group (use_pynccl=False)"
    one = impl(group(pynccl_comm=Stored(available=False, disabled=True, world_size=1)), "pynccl")
    assert one["why_not"] == "created but unavailable: one rank"
    assert one["thresholds"] == {"available": False, "disabled_now": True, "symmetric_memory": None}
    nolib = impl(group(pynccl_comm=Stored(available=False, world_size=2)), "pynccl")
    assert nolib["why_not"].startswith("created but unavailable: the NCCL library could not be loaded")
    on = impl(group(pynccl_comm=Stored(available=True, disabled=True, nccl_version=22807)), "pynccl")
    assert on["enabled"] is True and on["thresholds"]["nccl_version"] == 22807
    assert on["carries"] == "every size it is handed: inside CUDA graphs (graph_capture() enables it)"
    weird = impl(group(pynccl_comm=Stored(available="yes", disabled="no")), "pynccl")
    assert (
        weird["enabled"] is False
        and weird["thresholds"]["available"] is None
        and weird["thresholds"]["disabled_now"] is None
    )


def test_pynccl_symmetric_memory_comes_from_sglangs_reader():
    def on():
        return True

    def broken():
        raise RuntimeError("server args not set")

    e = impl(group(pynccl_comm=Stored(available=True), is_symmetric_memory_enabled=on), "pynccl")
    assert e["thresholds"]["symmetric_memory"] is True
    assert e["carries"].endswith(", and eagerly every all-reduce (symmetric memory on)")
    for reader in (broken, lambda: "yes", "not callable"):
        e = impl(group(pynccl_comm=Stored(available=True), is_symmetric_memory_enabled=reader), "pynccl")
        assert e["thresholds"]["symmetric_memory"] is None and "symmetric memory on" not in e["carries"]
    off = impl(group(pynccl_comm=Stored(available=True), is_symmetric_memory_enabled=lambda: False), "pynccl")
    assert off["thresholds"]["symmetric_memory"] is False


# --- FlashInfer, torch's process group, other accelerators ---------------------------------------------


def test_flashinfer():
    assert impl(group(), "flashinfer_allreduce")["why_not"].startswith(
        "this SGLang release has no FlashInfer"
    )
    untagged = impl(group(_fi_workspace_hint=None), "flashinfer_allreduce")
    assert untagged["present"] is False and untagged["why_not"].startswith("group not tagged")
    tagged = impl(group(_fi_workspace_hint="moe"), "flashinfer_allreduce")
    assert tagged["present"] and tagged["enabled"] and tagged["thresholds"] == {"workspace": "moe"}


def test_torch_process_group_without_torch_loaded():
    e = impl(group(device_group=object()), "torch_pg")
    assert (
        e["enabled"] is True
        and e["nccl"] is None
        and e["carries"] == "every size that reaches it (eager fallback)"
    )
    assert impl(group(), "torch_pg")["why_not"] == "no device group"


def test_torch_process_group_backend_decides_nccl(monkeypatch):
    # torch's answer for the group's backend, as torch.distributed.get_backend gives it in a GPU process
    monkeypatch.setattr(rd, "_backend_of", lambda device_group: getattr(device_group, "backend", None))
    d = rd.describe_group(group(device_group=Stored(backend="nccl")), sglang_version="0.5.23")
    e = d["implementations"]["torch_pg"]
    assert e["nccl"] is True and e["thresholds"] == {"backend": "nccl"}
    assert e["carries"].endswith("; NCCL communicator created lazily by torch at the first collective")
    assert d["device_group_backend"] == "nccl" and d["device_group_is_nccl"] is True
    d = rd.describe_group(group(device_group=Stored(backend="gloo")), sglang_version="0.5.23")
    assert d["implementations"]["torch_pg"]["nccl"] is False and d["device_group_is_nccl"] is False


def test_other_accelerators_take_everything_only_when_enabled():
    d = rd.describe_group(
        group(
            hpu_communicator=Stored(disabled=False),
            xpu_communicator=Stored(disabled=True),
            npu_communicator=Stored(disabled=False),
        ),
        sglang_version="0.5.23",
    )
    assert d["takes_everything"] == ["hpu_communicator", "npu_communicator"]
    assert d["summary"] == "hpu_communicator, npu_communicator takes every all-reduce of this group"


# --- the group, the order, the summary ---------------------------------------------------------------------


def test_group_fields():
    d = rd.describe_group(
        group(unique_name="attention_tp:12", world_size=4, rank=7, rank_in_group="x"),
        sglang_version="0.5.24rc1",
    )
    assert (d["group"], d["unique_name"], d["world_size"], d["rank"], d["rank_in_group"]) == (
        "attention_tp",
        "attention_tp:12",
        4,
        7,
        None,
    )
    assert d["device"] == "cuda:0" and d["sglang_version"] == "0.5.24rc1" and d["error"] is None
    d = rd.describe_group(group(unique_name=5, world_size="2"), sglang_version="0.5.23")
    assert d["group"] is None and d["unique_name"] is None and d["world_size"] is None


def test_order_marks_each_step_active_or_not():
    d = rd.describe_group(_full_gpu_group(), sglang_version="0.5.23")
    steps = {s["path"]: s for s in d["order"]}
    assert d["order_source"] and d["order"][-1]["path"] == "torch_pg"
    assert steps["custom_allreduce"]["active"] is True and steps["pcie_ipc"]["active"] is False
    assert steps["pynccl"]["active"] is True and steps["torch_pg"]["active"] is True
    assert steps["pynccl_symm_mem"]["active"] is False  # PyNccl is on, --enable-symm-mem is not
    assert steps["pynccl_symm_mem"]["implementation"] == "pynccl"
    assert steps["pynccl_symm_mem"]["unless"] == ["mscclpp", "custom_allreduce"]
    symm = rd.describe_group(
        _full_gpu_group(is_symmetric_memory_enabled=lambda: True), sglang_version="0.5.23"
    )
    assert next(s for s in symm["order"] if s["path"] == "pynccl_symm_mem")["active"] is True
    unreadable = rd.describe_group(_full_gpu_group(is_symmetric_memory_enabled=None), sglang_version="0.5.23")
    assert next(s for s in unreadable["order"] if s["path"] == "pynccl_symm_mem")["active"] is None
    off = rd.describe_group(_full_gpu_group(pynccl_comm=None), sglang_version="0.5.23")
    assert next(s for s in off["order"] if s["path"] == "pynccl_symm_mem")["active"] is False


def test_summary_of_a_gpu_group():
    d = rd.describe_group(_full_gpu_group(), sglang_version="0.5.7")
    assert d["summary"] == (
        "outside NCCL: custom all-reduce (sizes < 8388608 bytes (8 MiB), multiples of 16 bytes, eager and CUDA graph); "
        "the rest reaches NCCL: PyNccl inside CUDA graphs"
    )
    symm = rd.describe_group(
        _full_gpu_group(ca_comm=None, is_symmetric_memory_enabled=lambda: True), sglang_version="0.5.7"
    )
    assert symm["summary"] == (
        "no all-reduce bypasses NCCL; every all-reduce reaches NCCL: PyNccl inside CUDA graphs "
        "and eagerly (symmetric memory)"
    )
    nothing = rd.describe_group(
        _full_gpu_group(ca_comm=None, pynccl_comm=Stored(available=False)), sglang_version="0.5.7"
    )
    assert nothing["summary"] == (
        "no all-reduce bypasses NCCL; nothing reaches NCCL here (device group backend unknown, "
        "PyNccl unavailable)"
    )
    absent = rd.describe_group(_full_gpu_group(ca_comm=None, pynccl_comm=None), sglang_version="0.5.7")
    assert absent["summary"].endswith("PyNccl absent)")


def test_summary_with_torch_nccl(monkeypatch):
    monkeypatch.setattr(rd, "_backend_of", lambda device_group: "nccl")  # what torch says for an NCCL group
    d = rd.describe_group(_full_gpu_group(ca_comm=None), sglang_version="0.5.7")
    assert d["summary"] == (
        "no all-reduce bypasses NCCL; every all-reduce reaches NCCL: PyNccl inside CUDA graphs, "
        "torch ProcessGroupNCCL eagerly"
    )


def test_summary_of_one_rank_and_of_a_cpu_group():
    assert rd.describe_group(_full_gpu_group(world_size=1), sglang_version="0.5.23")["summary"] == (
        "one rank: SGLang performs no all-reduce on this group"
    )
    cpu = rd.describe_group(_full_gpu_group(device="cpu"), sglang_version="0.5.23")
    assert cpu["summary"].startswith("CPU device: SGLang reduces CPU tensors with its shared-memory kernel")
    assert "(unknown)" in cpu["summary"]


def test_order_note_for_a_release_newer_than_every_checked_one():
    newest = ap._dispatch_ranges()[-1]
    d = rd.describe_group(_full_gpu_group(), sglang_version="9.0.0")
    assert d["order_note"] == (
        f"SGLang 9.0.0 is newer than the newest release checked ({newest.newest_checked}); "
        "its order is assumed unchanged"
    )
    assert (
        rd.describe_group(_full_gpu_group(), sglang_version=newest.newest_checked)["order_note"]
        == newest.note
    )


# --- the audit lines -----------------------------------------------------------------------------------


def test_format_paths_lists_the_order_with_on_off_and_details():
    d = rd.describe_group(_full_gpu_group(), sglang_version="0.5.23")
    lines = ap.format_paths(d)
    assert lines[0] == (
        "all-reduce paths of group 'tp' (tp:3): 2 rank(s), device cuda:0, device group unknown "
        "(backend unknown), SGLang 0.5.23"
    )
    assert lines[1].startswith("  order SGLang tries (")
    body = "\n".join(lines)
    assert "  on   multiples of 16 bytes" in body or "  on   sizes" in body
    assert "symmetric memory off (--enable-symm-mem not given)" in body
    assert lines[-1] == f"  => {d['summary']}"
    width = max(len(s["title"]) for s in d["order"])
    assert lines[2 + bool(d["order_note"])].startswith(f"     1. {d['order'][0]['title']:<{width}}  ")


def test_format_paths_for_one_rank_unknown_order_and_errors():
    one = ap.format_paths(rd.describe_group(_full_gpu_group(world_size=1), sglang_version="0.5.23"))
    assert not any("order SGLang tries" in ln for ln in one) and one[-1].startswith("  => one rank")
    unknown = ap.format_paths(rd.describe_group(_full_gpu_group(), sglang_version="bad version"))
    assert "  order SGLang tries: unknown for SGLang bad version" in unknown
    assert any(ln.startswith("    - custom all-reduce: on  sizes <= or < 8388608") for ln in unknown)
    assert unknown[-1].startswith(
        "  (could not read everything: SGLang version 'bad version' is not a PEP 440"
    )
    symm_unknown = ap.format_paths(
        rd.describe_group(_full_gpu_group(is_symmetric_memory_enabled=None), sglang_version="0.5.23")
    )
    assert any("symmetric memory state unknown" in ln for ln in symm_unknown)
