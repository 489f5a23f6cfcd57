"""All-reduce message sizes from real model configs, and the path SGLang would pick per release."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.offline.sizes.paths import predict_path
from sglang_eagle_nccl.offline.sizes.render import format_size_report
from sglang_eagle_nccl.offline.sizes.report import size_report
from sglang_eagle_nccl.offline.sizes.shape import SizesError, model_shape

KiB, MiB = 1024, 1024 * 1024

# Written for these tests from the shapes of public checkpoints (no weights involved).
DEEPSEEK_V3 = {  # the 7168-wide model of the issue
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "num_attention_heads": 128,
    "num_hidden_layers": 61,
    "torch_dtype": "bfloat16",
    "vocab_size": 129280,
}
LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "torch_dtype": "bfloat16",
}
QWEN2_VL_7B = {  # multimodal: the language model's shape lives in text_config, the dtype only at the top
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1280, "depth": 32},
    "text_config": {
        "model_type": "qwen2_5_vl_text",
        "hidden_size": 3584,
        "num_hidden_layers": 28,
        "vocab_size": 152064,
    },
}
LLAVA_STYLE = {  # sub-config with its own dtype
    "architectures": ["LlavaForConditionalGeneration"],
    "model_type": "llava",
    "torch_dtype": "float32",
    "text_config": {
        "model_type": "llama",
        "hidden_size": 5120,
        "num_hidden_layers": 40,
        "torch_dtype": "float16",
    },
}
GEMMA_FP32 = {
    "architectures": ["Gemma2ForCausalLM"],
    "model_type": "gemma2",
    "hidden_size": 3584,
    "torch_dtype": "float32",
}
MISTRAL_FP16_NEW_KEY = {
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "hidden_size": 4096,
    "dtype": "float16",
}


# --- sizes ----------------------------------------------------------------------------------------


def test_7168_wide_bf16_model_sizes_per_phase():
    r = size_report(
        DEEPSEEK_V3, batch_size=8, tp_size=8, num_draft_tokens=4, eagle_topk=2, chunked_prefill_size=8192
    )
    assert r["bytes_per_token"] == 7168 * 2 == 14 * KiB
    by = {p["phase"]: p for p in r["phases"]}
    assert by["decode"]["tokens"] == 8 and by["decode"]["bytes"] == 8 * 14 * KiB
    assert by["eagle_draft"]["tokens"] == 16 and by["eagle_draft"]["bytes"] == 16 * 14 * KiB
    assert by["eagle_verify"]["tokens"] == 32 and by["eagle_verify"]["bytes"] == 32 * 14 * KiB
    assert by["prefill_chunk"]["bytes"] == 8192 * 14 * KiB == 112 * MiB
    assert (
        by["eagle_verify"]["formula"]
        == "32 tokens (batch 8 x num_draft_tokens 4) x 7168 hidden x 2 bytes (bfloat16) = 458752"
    )
    assert r["all_reduces_per_forward"] == 2 * 61 + 1
    assert "does not depend on the TP size" in r["formula"]


def test_size_is_independent_of_tp_size():
    a = size_report(LLAMA_8B, batch_size=4, tp_size=2, num_draft_tokens=8)
    b = size_report(LLAMA_8B, batch_size=4, tp_size=8, num_draft_tokens=8)
    assert (
        [p["bytes"] for p in a["phases"]]
        == [p["bytes"] for p in b["phases"]]
        == [4 * 4096 * 2, 32 * 4096 * 2]
    )


def test_multimodal_text_config_gives_hidden_size_and_inherits_the_top_level_dtype():
    shape = model_shape(QWEN2_VL_7B)
    assert shape.hidden_size == 3584  # not the vision tower's 1280
    assert shape.dtype == "bfloat16" and shape.element_size == 2
    assert shape.hidden_from == "config.json text_config hidden_size"
    assert "sub-config has none" in shape.dtype_from
    assert shape.num_hidden_layers == 28


def test_sub_config_dtype_wins_over_top_level():
    shape = model_shape(LLAVA_STYLE)
    assert (shape.hidden_size, shape.dtype) == (5120, "float16")


@pytest.mark.parametrize(
    ("config", "dtype", "expected", "elem"),
    [
        (LLAMA_8B, "auto", "bfloat16", 2),
        (MISTRAL_FP16_NEW_KEY, "auto", "float16", 2),  # transformers v5 "dtype" key
        (
            {**LLAMA_8B, "torch_dtype": "float32"},
            "auto",
            "float16",
            2,
        ),  # SGLang runs fp32 checkpoints as fp16
        (GEMMA_FP32, "auto", "bfloat16", 2),  # ... except Gemma, as bf16
        (
            {**LLAMA_8B, "torch_dtype": "float32"},
            "float32",
            "float32",
            4,
        ),  # explicit --dtype float32 keeps 4 bytes
        (LLAMA_8B, "half", "float16", 2),
        (LLAMA_8B, "float", "float32", 4),
    ],
)
def test_dtype_follows_sglang(config, dtype, expected, elem):
    shape = model_shape(config, dtype)
    assert (shape.dtype, shape.element_size) == (expected, elem)
    r = size_report(config, batch_size=1, tp_size=2, dtype=dtype)
    assert r["phases"][0]["bytes"] == config.get("hidden_size") * elem


def test_missing_dtype_is_sglangs_float32_then_float16_with_a_note():
    cfg = {k: v for k, v in LLAMA_8B.items() if k != "torch_dtype"}
    shape = model_shape(cfg)
    assert shape.dtype == "float16"
    assert any("names no dtype" in n for n in shape.notes)


def test_config_from_file_and_directory(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK_V3))
    assert model_shape(tmp_path).hidden_size == 7168
    assert model_shape(tmp_path / "config.json").hidden_size == 7168
    assert model_shape(str(tmp_path)).hidden_size == 7168


# --- bad configs and inputs -----------------------------------------------------------------------


def _problems(exc: SizesError) -> dict[str, str]:
    return {f.variable: f.message() for f in exc.findings}


def test_missing_hidden_size_names_the_field_and_the_fix():
    cfg = {"architectures": ["X"], "torch_dtype": "bfloat16", "text_config": {"num_hidden_layers": 2}}
    with pytest.raises(SizesError) as info:
        model_shape(cfg)
    msg = _problems(info.value)["hidden_size"]
    assert "text sub-config" in msg and "Fix:" in msg and "config.json" in msg


@pytest.mark.parametrize("bad", ["7168", 0, -4, 7168.0, True])
def test_non_integer_hidden_size(bad):
    with pytest.raises(SizesError) as info:
        model_shape({**LLAMA_8B, "hidden_size": bad})
    assert "positive integer" in _problems(info.value)["hidden_size"]


def test_text_config_that_is_not_an_object():
    with pytest.raises(SizesError) as info:
        model_shape({"hidden_size": 4096, "text_config": "llama"})
    assert "must be a JSON object" in _problems(info.value)["text_config"]


def test_unreadable_configs(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{hidden_size: 4096}")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    for path, words in (
        (bad_json, "not valid JSON (line 1"),
        (listed, "JSON list, not an object"),
        (tmp_path / "none.json", "no such file"),
    ):
        with pytest.raises(SizesError) as info:
            model_shape(path)
        assert words in _problems(info.value)["--model-config"]


def test_every_bad_argument_reported_at_once():
    with pytest.raises(SizesError) as info:
        size_report(
            {"torch_dtype": "bfloat16"},
            batch_size=0,
            tp_size=8,
            num_draft_tokens=0,
            eagle_topk=-1,
            chunked_prefill_size=0,
            dtype="int8",
            sglang_version="not-a-version",
            flags={"enable_symm_mem": "maybe"},
        )
    problems = _problems(info.value)
    assert set(problems) >= {
        "--batch-size",
        "--speculative-num-draft-tokens",
        "--speculative-eagle-topk",
        "--chunked-prefill-size",
        "--dtype",
        "--sglang-version",
        "enable_symm_mem",
    }
    assert "nothing was computed" in str(info.value)


def test_unknown_flag_is_an_error_not_ignored():
    with pytest.raises(SizesError) as info:
        predict_path("0.5.23", 1 * MiB, 8, {"--disable-custom-allreduce": True})
    msg = _problems(info.value)["--disable-custom-allreduce"]
    assert "disable_custom_all_reduce" in msg


def test_chunking_off_and_unset_are_explained():
    off = size_report(LLAMA_8B, batch_size=1, tp_size=2, chunked_prefill_size=-1)
    assert [p["phase"] for p in off["phases"]] == ["decode"]
    assert any("chunking is off" in n for n in off["notes"])
    unset = size_report(LLAMA_8B, batch_size=1, tp_size=2)
    assert any("no --chunked-prefill-size" in n for n in unset["notes"])


def test_batch_above_cuda_graph_max_bs_runs_eagerly():
    r = size_report(
        LLAMA_8B,
        batch_size=200,
        tp_size=8,
        num_draft_tokens=4,
        cuda_graph_max_bs=160,
        sglang_version="0.5.23",
        flags={"interconnect": "pcie"},
    )
    verify = next(p for p in r["phases"] if p["phase"] == "eagle_verify")
    assert verify["mode"] == "eager" and verify["path"]["path"] == "torch_pg"


# --- predicted paths, table-driven ----------------------------------------------------------------

NV = {"interconnect": "nvlink"}
PCIE = {"interconnect": "pcie"}
EAGER = {"cuda_graph": False}

# (SGLang release, bytes, ranks, flags, expected path, expected implementation or None)
CASES = [
    # original custom all-reduce: strictly below 8 MiB up to 0.5.7, at most 8 MiB from 0.5.10
    ("0.4.3", 1 * MiB, 8, NV, "custom_allreduce", "CustomAllreduce"),
    ("0.4.3", 8 * MiB, 8, NV, "pynccl", None),
    ("0.4.3", 8 * MiB, 8, {**NV, **EAGER}, "torch_pg", None),
    ("0.5.7", 8 * MiB, 8, NV, "pynccl", None),
    ("0.5.10", 8 * MiB, 8, NV, "custom_allreduce", "CustomAllreduce"),
    ("0.5.10", 8 * MiB + 16, 8, NV, "pynccl", None),
    ("0.4.3", 1 * MiB + 8, 8, NV, "pynccl", None),  # not a multiple of 16 bytes
    # PCIe: more than 2 GPUs never get custom all-reduce; 2 GPUs do (with P2P)
    ("0.5.4", 1 * MiB, 8, PCIE, "pynccl", None),
    ("0.5.4", 1 * MiB, 8, {**PCIE, **EAGER}, "torch_pg", None),
    ("0.5.4", 1 * MiB, 2, PCIE, "custom_allreduce", "CustomAllreduce"),
    ("0.5.4", 1 * MiB, 6, NV, "custom_allreduce", "CustomAllreduce"),
    ("0.5.4", 1 * MiB, 3, NV, "pynccl", None),  # 3 ranks: not a CustomAllreduce world size
    # CustomAllReduceV2 (JIT) default from 0.5.12: NVLink only, up to 16 MiB; 0.5.12 has no fallback
    ("0.5.11", 12 * MiB, 8, NV, "pynccl", None),
    ("0.5.12.post1", 12 * MiB, 8, NV, "custom_allreduce", "CustomAllReduceV2"),
    ("0.5.12.post1", 1 * MiB, 2, PCIE, "pynccl", None),
    ("0.5.13", 1 * MiB, 2, PCIE, "custom_allreduce", "CustomAllreduce"),
    ("0.5.13", 1 * MiB, 3, NV, "custom_allreduce", "CustomAllReduceV2"),
    ("0.5.23", 16 * MiB, 8, NV, "custom_allreduce", "CustomAllReduceV2"),
    ("0.5.23", 16 * MiB + 16, 8, NV, "pynccl", None),
    ("0.5.23", 16 * MiB + 16, 8, {**NV, **EAGER}, "torch_pg", None),
    ("0.5.23", 12 * MiB, 8, {**NV, "custom_all_reduce_v2_max_size_kb": 8192}, "pynccl", None),
    (
        "0.5.13",
        12 * MiB,
        8,
        {**NV, "custom_all_reduce_v2_max_size_kb": 8192},
        "custom_allreduce",
        "CustomAllReduceV2",
    ),
    ("0.5.23", 12 * MiB, 8, {**NV, "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}, "pynccl", None),
    (
        "0.5.23",
        4 * MiB,
        8,
        {**NV, "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"},
        "custom_allreduce",
        "CustomAllreduce",
    ),
    # switches that turn custom all-reduce off
    ("0.5.23", 1 * MiB, 8, {**NV, "disable_custom_all_reduce": True}, "pynccl", None),
    ("0.5.23", 1 * MiB, 8, {**NV, "enable_deterministic_inference": True}, "pynccl", None),
    ("0.5.17", 1 * MiB, 8, {**NV, "nnodes": 2}, "pynccl", None),
    # NCCL symmetric memory through PyNccl: before custom all-reduce 0.5.4.post3-0.5.17, after it from 0.5.20
    ("0.5.7", 1 * MiB, 8, {**NV, "enable_symm_mem": True}, "pynccl_symm_mem", None),
    ("0.5.4.post3", 1 * MiB, 8, {**NV, "enable_symm_mem": True}, "pynccl_symm_mem", None),
    ("0.5.23", 1 * MiB, 8, {**NV, "enable_symm_mem": True}, "custom_allreduce", "CustomAllReduceV2"),
    ("0.5.23", 32 * MiB, 8, {**NV, **EAGER, "enable_symm_mem": True}, "pynccl_symm_mem", None),
    # PCIe IPC (0.5.21+, opt-in, tp group, bf16, up to its workspace)
    (
        "0.5.23",
        1 * MiB,
        8,
        {**PCIE, "enable_pcie_ipc_allreduce": True, "pcie_ipc_max_bytes": 4 * MiB},
        "pcie_ipc",
        None,
    ),
    (
        "0.5.21",
        4 * MiB,
        8,
        {**PCIE, "enable_pcie_ipc_allreduce": True, "pcie_ipc_max_bytes": 4 * MiB},
        "pcie_ipc",
        None,
    ),
    (
        "0.5.23",
        8 * MiB,
        8,
        {**PCIE, "enable_pcie_ipc_allreduce": True, "pcie_ipc_max_bytes": 4 * MiB},
        "pynccl",
        None,
    ),
    (
        "0.5.20",
        1 * MiB,
        8,
        {**PCIE, "enable_pcie_ipc_allreduce": True, "pcie_ipc_max_bytes": 4 * MiB},
        "pynccl",
        None,
    ),
    (
        "0.5.23",
        1 * MiB,
        8,
        {
            **PCIE,
            "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1",
            "SGLANG_PCIE_IPC_MAX_NUMEL": 2 * MiB,
            "dtype": "float16",
        },
        "pynccl",
        None,
    ),
    (
        "0.5.23",
        1 * MiB,
        6,
        {**PCIE, "enable_pcie_ipc_allreduce": True, "pcie_ipc_max_bytes": 4 * MiB},
        "pynccl",
        None,
    ),
    # torch symmetric memory: bf16 below 64/128 MiB, NVSwitch multicast, capability 9/10
    (
        "0.5.7",
        32 * MiB,
        8,
        {**NV, "enable_torch_symm_mem": True, "gpu_capability": 9},
        "torch_symm_mem",
        None,
    ),
    ("0.5.7", 32 * MiB, 8, {**PCIE, "enable_torch_symm_mem": True, "gpu_capability": 9}, "pynccl", None),
    ("0.5.7", 32 * MiB, 8, {**NV, "enable_torch_symm_mem": True, "gpu_capability": 8}, "pynccl", None),
    (
        "0.5.7",
        200 * MiB,
        8,
        {**NV, **EAGER, "enable_torch_symm_mem": True, "gpu_capability": 9},
        "torch_symm_mem_inplace",
        None,
    ),
    (
        "0.5.23",
        200 * MiB,
        8,
        {**NV, **EAGER, "enable_torch_symm_mem": True, "gpu_capability": 9},
        "torch_pg",
        None,
    ),
    (
        "0.5.3.post1",
        32 * MiB,
        4,
        {**NV, "enable_torch_symm_mem": True, "gpu_capability": 10},
        "torch_symm_mem",
        None,
    ),
    ("0.5.1", 32 * MiB, 4, {**NV, "enable_torch_symm_mem": True, "gpu_capability": 10}, "pynccl", None),
    # MSCCL++: CUDA graphs only, 8/16 ranks, up to 1 MiB until 0.5.13
    (
        "0.5.4",
        512 * KiB,
        8,
        {**NV, "disable_custom_all_reduce": True, "enable_mscclpp": True},
        "mscclpp",
        None,
    ),
    ("0.5.4", 2 * MiB, 8, {**NV, "disable_custom_all_reduce": True, "enable_mscclpp": True}, "pynccl", None),
    (
        "0.5.4",
        512 * KiB,
        8,
        {**NV, **EAGER, "disable_custom_all_reduce": True, "enable_mscclpp": True},
        "torch_pg",
        None,
    ),
    (
        "0.4.6",
        512 * KiB,
        8,
        {**NV, "disable_custom_all_reduce": True, "enable_mscclpp": True},
        "pynccl",
        None,
    ),
    # piecewise CUDA graphs (0.5.10+) route the rest through PyNccl out of place
    (
        "0.5.16",
        64 * MiB,
        8,
        {**NV, "cuda_graph": False, "piecewise_cuda_graph": True},
        "pynccl_piecewise",
        None,
    ),
    ("0.5.7", 64 * MiB, 8, {**NV, "cuda_graph": False, "piecewise_cuda_graph": True}, "torch_pg", None),
    # 0.5.4 only: --enable-piecewise-cuda-graph builds custom all-reduce with a 256 MiB buffer
    (
        "0.5.4",
        64 * MiB,
        8,
        {**NV, "enable_piecewise_cuda_graph": True},
        "custom_allreduce",
        "CustomAllreduce",
    ),
    ("0.5.4.post3", 64 * MiB, 8, {**NV, "enable_piecewise_cuda_graph": True}, "pynccl", None),
    ("0.5.4", 64 * MiB, 8, NV, "pynccl", None),
    # other groups
    ("0.5.23", 1 * MiB, 8, {**NV, **EAGER, "group": "moe_tp"}, "torch_pg", None),
]


@pytest.mark.parametrize(("version", "nbytes", "ranks", "flags", "path", "impl"), CASES)
def test_predicted_path(version, nbytes, ranks, flags, path, impl):
    p = predict_path(version, nbytes, ranks, flags)
    assert p["prediction"] is True and "not a measurement" in p["label"]
    assert (p["path"], p["impl"]) == (path, impl), p["steps"]
    assert p["reaches_nccl"] is (path in ("pynccl", "pynccl_symm_mem", "pynccl_piecewise", "torch_pg"))
    taken = [s for s in p["steps"] if s["applies"] is True]
    assert [s["path"] for s in taken] == [path]


def test_interconnect_unknown_gives_both_answers():
    p = predict_path("0.5.23", 448 * KiB, 8, {})
    assert p["path"] == "depends" and p["reaches_nccl"] is None
    assert p["by_interconnect"]["nvlink"]["path"] == "custom_allreduce"
    assert p["by_interconnect"]["pcie"]["path"] == "pynccl"
    assert any("NVLink" in d for d in p["depends_on"])
    big = predict_path("0.5.23", 112 * MiB, 8, {"cuda_graph": False})
    assert big["path"] == "torch_pg"  # the same on both: a single answer


def test_unknown_hardware_is_called_out():
    p = predict_path("0.5.23", 32 * MiB, 8, {**NV, "enable_torch_symm_mem": True})
    assert p["path"] == "pynccl" and p["may_instead"] == ["torch_symm_mem"]
    assert any("torch_symm_mem" in d for d in p["depends_on"])
    p = predict_path("0.5.23", 1 * MiB, 8, {**PCIE, "enable_pcie_ipc_allreduce": True})
    assert p["may_instead"] == ["pcie_ipc"]
    p = predict_path("0.5.23", 1 * MiB, 8, {**NV, "nnodes": 2})
    assert p["may_instead"] == ["custom_allreduce"]  # a multi-node NVLink clique may still use V2
    p = predict_path("0.5.1", 1 * MiB, 8, {**NV, "enable_symm_mem": True})
    assert p["path"] == "custom_allreduce" and p["may_instead"] == ["pynccl_symm_mem"]


def test_one_rank_and_versions():
    assert predict_path("0.5.23", 1 * MiB, 1, {})["path"] == "none"
    newer = predict_path("0.5.30", 1 * MiB, 8, NV)
    assert newer["rules"]["versions"] == ">=0.5.21" and any(
        "newer than the newest release checked" in n for n in newer["notes"]
    )
    assert predict_path("0.5.10rc1", 8 * MiB, 8, NV)["rules"]["versions"] == ">=0.5.10,<0.5.16"
    assert predict_path("0.5.23+cu130", 1 * MiB, 8, NV)["path"] == "custom_allreduce"
    for bad, words in (("0.4.2", "older than every release"), ("latest", "not a PEP 440 version")):
        with pytest.raises(SizesError) as info:
            predict_path(bad, 1 * MiB, 8, {})
        assert words in _problems(info.value)["--sglang-version"]


def test_size_report_with_paths_and_text():
    r = size_report(
        DEEPSEEK_V3,
        batch_size=8,
        tp_size=8,
        num_draft_tokens=4,
        eagle_topk=1,
        chunked_prefill_size=8192,
        sglang_version="0.5.23",
        flags=PCIE,
    )
    paths = {p["phase"]: p["path"]["path"] for p in r["phases"]}
    assert paths == {
        "decode": "pynccl",
        "eagle_draft": "pynccl",
        "eagle_verify": "pynccl",
        "prefill_chunk": "torch_pg",
    }
    text = format_size_report(r)
    assert "EAGLE verify step" in text and "458752 bytes (448 KiB)" in text
    assert "PyNccl -> NCCL" in text and "torch.distributed -> NCCL" in text
    assert "not measurements" in text


def test_pcie_ipc_bound_derived_from_cuda_graph_max_bs():
    r = size_report(
        DEEPSEEK_V3,
        batch_size=8,
        tp_size=8,
        num_draft_tokens=4,
        chunked_prefill_size=8192,
        cuda_graph_max_bs=64,
        sglang_version="0.5.23",
        flags={**PCIE, "enable_pcie_ipc_allreduce": True},
    )
    paths = {p["phase"]: p["path"]["path"] for p in r["phases"]}
    assert paths["eagle_verify"] == "pcie_ipc" and paths["prefill_chunk"] == "torch_pg"
    assert any(f"{64 * 4 * 7168 * 2} bytes" in n for n in r["notes"])


# --- the standalone command -----------------------------------------------------------------------


def test_cli_sizes_text_and_json(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(DEEPSEEK_V3))
    args = [
        "sizes",
        "--model-config",
        str(cfg),
        "--batch-size",
        "8",
        "--tp",
        "8",
        "--speculative-num-draft-tokens",
        "4",
        "--chunked-prefill-size",
        "8192",
        "--sglang-version",
        "0.5.23",
        "--interconnect",
        "nvlink",
    ]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "custom all-reduce [CustomAllReduceV2] (no NCCL)" in res.output
    res = CliRunner().invoke(main, [*args, "--json"])
    data = json.loads(res.output)
    assert data["ok"] is True and data["phases"][1]["bytes"] == 458752


def test_cli_sizes_bad_input_exits_2_without_traceback(tmp_path):
    res = CliRunner().invoke(
        main, ["sizes", "--model-config", str(tmp_path / "missing.json"), "--batch-size", "0"]
    )
    assert res.exit_code == 2
    assert "Traceback" not in res.output and "--batch-size" in res.output and "no such file" in res.output
    res = CliRunner().invoke(main, ["sizes", "--model-config", str(tmp_path / "missing.json"), "--json"])
    assert res.exit_code == 2 and json.loads(res.output)["ok"] is False
