"""The all-reduce sizes that matter for EAGLE, and the path SGLang would give each.

Tensor parallelism splits weights, not activations: after the attention block and after the MLP
of every decoder layer each TP rank all-reduces the full hidden vector of every token in the
forward pass. One all-reduce therefore carries::

    bytes = tokens x hidden_size x bytes per element

whatever the TP size. The token count is what differs between the phases of a speculative
server: a decode step has one token per request, an EAGLE draft step ``topk`` per request, an
EAGLE verify step ``num_draft_tokens`` per request, a prefill chunk up to ``chunked_prefill_size``.
For a 7168-wide bf16 model that is 14 KiB per token: decode and verify are KiB to a few MiB,
prefill chunks tens of MiB, which is why one global NCCL protocol choice fits neither well.

:func:`predict_path` walks SGLang's dispatch order (``knowledge/sglang/data/allreduce_paths.toml``) for one
message size and says which implementation would carry it: a prediction from SGLang's own
thresholds and defaults, not a measurement; where the answer depends on hardware (NVLink or PCIe,
GPU generation, world size) it says so. The audit's per-group record (``describe_group``) shows
what a running server really enabled.

Pure functions (the config file is read once); errors are :class:`SizesError` with one finding
per problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.findings import Finding, error
from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import (
    DispatchRange,
    DispatchStep,
    dispatch_for,
    fmt_bytes,
    limits_for,
    normalize_version,
    path_info,
)

__all__ = [
    "FLAGS",
    "ModelShape",
    "SizesError",
    "format_size_report",
    "model_shape",
    "predict_path",
    "size_report",
]

FORMULA = (
    "bytes per all-reduce = tokens x hidden_size x bytes per element. Tensor parallelism splits the "
    "weights, not the activations, so every TP rank all-reduces the full hidden vector of each token "
    "and the size does not depend on the TP size. A dense decoder layer all-reduces twice per forward "
    "(after attention, after the MLP); the vocab-parallel embedding adds one."
)

# SGLang's dtype names (configs/model_config.py 0.5.23:2273-2280, same table since 0.4.3).
_DTYPE_NAMES = {"half": "float16", "float16": "float16", "float": "float32", "float32": "float32", "bfloat16": "bfloat16"}
ELEMENT_SIZE = {"bfloat16": 2, "float16": 2, "float32": 4}
# Sub-configs SGLang reads the language model's shape from (utils/hf_transformers/common.py
# 0.5.23:547-580 get_hf_text_config): the first one present wins.
_TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")


class SizesError(PluginStop, ValueError):
    """Input that cannot become a size report. Carries every problem found, not just the first."""

    def __init__(self, findings: Iterable[Finding]):
        self.findings: tuple[Finding, ...] = tuple(findings)
        lines = [f"{len(self.findings)} problem(s) in the size inputs; nothing was computed:"]
        lines += [f"  - {f.message()}" for f in self.findings]
        super().__init__("\n".join(lines))


# --------------------------------------------------------------------------------------------------
# The model's hidden size and activation dtype
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    hidden_size: int
    dtype: str  # the activation dtype SGLang runs: bfloat16 / float16 / float32
    element_size: int
    hidden_from: str  # "config.json" or "config.json text_config" ...
    dtype_from: str
    num_hidden_layers: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hidden_size": self.hidden_size, "dtype": self.dtype, "element_size": self.element_size,
            "hidden_from": self.hidden_from, "dtype_from": self.dtype_from,
            "num_hidden_layers": self.num_hidden_layers, "notes": list(self.notes),
        }


# Counts SGLang keeps in C ints (batch sizes, token counts, hidden sizes): larger ones are no model's
# and would make byte counts whose decimal text Python refuses to print (over 4300 digits).
MAX_COUNT = 2**31 - 1
# A Hugging Face config.json is a few KiB (the largest multimodal ones tens of KiB); the cap only
# bounds what a wrong path (a weights file, a log) can make this command read.
MAX_CONFIG_BYTES = 16 * 1024 * 1024
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?')


def _long_integer_line(text: str, max_digits: int) -> int | None:
    """Line of the first JSON integer with more than ``max_digits`` digits (strings skipped)."""
    for m in _JSON_TOKEN.finditer(text):
        token = m.group()
        if token[0] != '"' and token.lstrip("-").isdigit() and len(token.lstrip("-")) > max_digits:
            return text.count("\n", 0, m.start()) + 1
    return None


def _load_config(config: Mapping[str, Any] | str | Path) -> tuple[dict[str, Any], str]:
    from sglang_eagle_nccl.contract.files import UnreadableFile, read_regular_file

    if isinstance(config, Mapping):
        return dict(config), "config"
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    shown = str(config)
    if not path.exists() and not path.is_symlink():
        raise SizesError([error("--model-config", shown, "no such file (expected a model's config.json or its directory)", "pass the path of the target model's config.json")])
    try:
        # A regular file only, bounded: a FIFO is refused at once instead of waited on, /dev/zero
        # instead of read without end.
        raw = read_regular_file(str(path), MAX_CONFIG_BYTES, follow_symlinks=True)
        text = raw.decode("utf-8")
    except UnreadableFile as exc:
        raise SizesError([error("--model-config", shown, f"cannot be read ({exc.reason})", "pass the model's config.json (a regular file)")]) from None
    except UnicodeDecodeError as exc:
        raise SizesError([error("--model-config", shown, f"is not UTF-8 text (byte {exc.start})", "pass the model's Hugging Face config.json unchanged")]) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SizesError([error("--model-config", shown, f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", "pass the model's Hugging Face config.json unchanged")]) from None
    except (ValueError, RecursionError) as exc:
        # json converts integers with int(), which refuses more digits than Python's limit with a
        # bare ValueError (no line); nesting thousands deep ends in a RecursionError.
        from sglang_eagle_nccl.knowledge._toml import int_digit_limit

        limit = int_digit_limit()
        line = _long_integer_line(text, limit) if limit and not isinstance(exc, RecursionError) else None
        why = (f"has an integer of more than {limit} digits on line {line}" if line
               else "nests too deeply or holds a number Python cannot read")
        raise SizesError([error("--model-config", shown, f"is not a usable JSON file: it {why}", "pass the model's Hugging Face config.json unchanged")]) from None
    if not isinstance(data, dict):
        raise SizesError([error("--model-config", shown, f"holds a JSON {type(data).__name__}, not an object", "pass the model's Hugging Face config.json")])
    return data, shown


def _dtype_field(cfg: Mapping[str, Any]) -> Any:
    # Newer transformers write "dtype", older "torch_dtype"; SGLang reads either (model_config.py
    # 0.5.23:2289-2291).
    value = cfg.get("dtype")
    return value if value is not None else cfg.get("torch_dtype")


def model_shape(config: Mapping[str, Any] | str | Path, dtype: str = "auto") -> ModelShape:
    """Hidden size and activation dtype SGLang would run for this ``config.json`` (a path, its
    directory, or the parsed mapping). ``dtype`` is SGLang's ``--dtype`` (default ``auto``).

    Multimodal configs: the language model's ``text_config`` / ``llm_config`` / ``language_config``
    gives the hidden size and, when it has one, the dtype (else the top-level dtype), as SGLang's
    ``get_hf_text_config`` does. ``auto`` follows SGLang's ``_get_and_verify_dtype``: the config's
    dtype, except float32 (or none at all) which SGLang runs as float16 (bfloat16 for Gemma)."""
    data, shown = _load_config(config)
    problems: list[Finding] = []
    notes: list[str] = []
    text_cfg: Mapping[str, Any] = data
    where = "config.json"
    for key in _TEXT_CONFIG_KEYS:
        sub = data.get(key)
        if sub is None:
            continue
        if not isinstance(sub, dict):
            problems.append(error(f"{key}", str(sub)[:60], f"{shown}: {key} must be a JSON object", "pass an unmodified Hugging Face config.json"))
            break
        text_cfg, where = sub, f"config.json {key}"
        break

    hidden: Any = None
    hidden_key = None
    for key in ("hidden_size", "n_embd", "d_model"):
        if text_cfg.get(key) is not None:
            hidden, hidden_key = text_cfg[key], key
            break
    if hidden is None and text_cfg is not data and data.get("hidden_size") is not None:
        hidden, hidden_key, where = data["hidden_size"], "hidden_size", "config.json"
        notes.append("the text sub-config has no hidden_size; the top-level one is used")
    if hidden is None:
        problems.append(error(
            "hidden_size", None,
            f"{shown}: neither the config nor its text sub-config ({', '.join(_TEXT_CONFIG_KEYS)}) has hidden_size",
            "pass the config.json of the language model that SGLang serves (for an EAGLE server, the target model's)",
        ))
    elif isinstance(hidden, bool) or not isinstance(hidden, int) or not 0 < hidden <= MAX_COUNT:
        problems.append(error(hidden_key or "hidden_size", _shown(hidden), f"{shown}: must be a positive integer up to {MAX_COUNT}",
                              "pass an unmodified Hugging Face config.json"))

    if dtype is None:
        dtype = "auto"
    wanted = str(dtype).lower()
    if wanted != "auto" and wanted not in _DTYPE_NAMES:
        problems.append(error("--dtype", str(dtype), "SGLang accepts auto, half, float16, bfloat16, float, float32", "pass one of those (as given to SGLang's --dtype)"))
    if problems:
        raise SizesError(problems)

    raw_dtype = _dtype_field(text_cfg)
    dtype_from = f"{where} dtype"
    if raw_dtype is None and text_cfg is not data:
        raw_dtype = _dtype_field(data)
        dtype_from = "config.json dtype (the sub-config has none)"
    config_dtype = _DTYPE_NAMES.get(raw_dtype) if isinstance(raw_dtype, str) else None
    if raw_dtype is None:
        notes.append("the config names no dtype: SGLang takes it as float32")
        config_dtype = "float32"
        dtype_from = "none in config.json (SGLang assumes float32)"
    elif config_dtype is None:
        notes.append(f"config dtype {raw_dtype!r} is not one SGLang maps; SGLang takes it as float32")
        config_dtype = "float32"

    if wanted == "auto":
        if config_dtype == "float32":
            model_type = str(text_cfg.get("model_type") or data.get("model_type") or "")
            chosen = "bfloat16" if model_type.startswith("gemma") else "float16"
            notes.append(
                f"--dtype auto runs float32 checkpoints as {chosen} in SGLang"
                + (" (0.4.x: only gemma2 is bfloat16)" if chosen == "bfloat16" else "")
            )
        else:
            chosen = config_dtype
        dtype_from = f"--dtype auto from {dtype_from}"
    else:
        chosen = _DTYPE_NAMES[wanted]
        dtype_from = f"--dtype {dtype}"

    layers = text_cfg.get("num_hidden_layers")
    layers = layers if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0 else None
    return ModelShape(int(hidden), chosen, ELEMENT_SIZE[chosen], f"{where} {hidden_key}", dtype_from, layers, tuple(notes))


# --------------------------------------------------------------------------------------------------
# Flags that change the path
# --------------------------------------------------------------------------------------------------

# name -> (kind, default, help). Kinds: bool, int, choice:<a>|<b>. Names are SGLang's server
# arguments / environment variables in snake case; aliases below.
FLAGS: dict[str, tuple[str, Any, str]] = {
    "disable_custom_all_reduce": ("bool", False, "--disable-custom-all-reduce"),
    "enable_symm_mem": ("bool", False, "--enable-symm-mem (NCCL symmetric memory through PyNccl)"),
    "enable_torch_symm_mem": ("bool", False, "--enable-torch-symm-mem"),
    "enable_mscclpp": ("bool", False, "--enable-mscclpp"),
    "enable_deterministic_inference": ("bool", False, "--enable-deterministic-inference (turns custom all-reduce off)"),
    "flashinfer_allreduce_fusion": ("bool", False, "--flashinfer-allreduce-fusion-backend given (0.5.20+)"),
    "enable_pcie_ipc_allreduce": ("bool", False, "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1 (0.5.21+)"),
    "pcie_ipc_max_bytes": ("int", None, "PCIe IPC workspace bound in bytes (bf16: 2 x max_numel)"),
    "custom_all_reduce_v2": ("bool", None, "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2 (0.5.12+; default on) / SGLANG_USE_JIT_ALL_REDUCE (0.5.10-0.5.11)"),
    "custom_all_reduce_v2_max_size_kb": ("int", None, "SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB (0.5.16+; default 16384)"),
    "cuda_graph": ("bool", True, "the all-reduce runs inside a CUDA graph (decode / verify / draft by default)"),
    "piecewise_cuda_graph": ("bool", False, "the all-reduce runs inside a piecewise CUDA graph (0.5.10+)"),
    "enable_piecewise_cuda_graph": ("bool", False, "--enable-piecewise-cuda-graph (0.5.4+; prefill in piecewise graphs)"),
    "interconnect": ("choice:nvlink|pcie", None, "GPU interconnect of the group: nvlink (every pair) or pcie"),
    "gpu_capability": ("int", None, "CUDA compute capability major (9: H100/H200, 10: B200)"),
    "dtype": ("choice:bfloat16|float16|float32", "bfloat16", "dtype of the all-reduced tensor"),
    "nnodes": ("int", 1, "number of nodes the group spans"),
    "group": ("choice:tp|attention_tp|moe_tp|moe_ep|pp|world", "tp", "SGLang group name"),
    "platform": ("choice:cuda|rocm", "cuda", "GPU platform"),
}
_ALIASES = {
    "disable_cuda_graph": ("cuda_graph", lambda v: not v),
    "sglang_enable_pcie_ipc_allreduce": ("enable_pcie_ipc_allreduce", None),
    "sglang_pcie_ipc_max_numel": ("pcie_ipc_max_bytes", lambda v: 2 * v),
    "pcie_ipc_max_numel": ("pcie_ipc_max_bytes", lambda v: 2 * v),
    "sglang_opt_use_custom_all_reduce_v2": ("custom_all_reduce_v2", None),
    "sglang_use_jit_all_reduce": ("custom_all_reduce_v2", None),
    "sglang_custom_all_reduce_v2_max_size_kb": ("custom_all_reduce_v2_max_size_kb", None),
    "enable_flashinfer_allreduce_fusion": ("flashinfer_allreduce_fusion", None),
}
_BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _coerce(name: str, kind: str, value: Any) -> tuple[Any, Finding | None]:
    shown = str(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
            return _BOOL_WORDS[value.strip().lower()], None
        if isinstance(value, int) and value in (0, 1):
            return bool(value), None
        return None, error(name, shown, "must be true or false", "pass true/false (or 1/0)")
    if kind == "int":
        if value is None:
            return None, None
        if isinstance(value, bool):
            return None, error(name, shown, "must be an integer", "pass a whole number")
        try:
            number = int(value) if isinstance(value, (int, str)) else None
        except ValueError:
            number = None
        if number is None or number < 0:
            return None, error(name, shown, "must be a non-negative integer", "pass a whole number >= 0")
        return number, None
    choices = kind.split(":", 1)[1].split("|")
    if value is None:
        return None, None
    text = str(value).strip().lower()
    if text not in choices:
        return None, error(name, shown, f"must be one of {', '.join(choices)}", f"pass one of {', '.join(choices)}")
    return text, None


def _normalize_flags(flags: Mapping[str, Any] | None) -> dict[str, Any]:
    out = {name: spec[1] for name, spec in FLAGS.items()}
    problems: list[Finding] = []
    for raw_key, value in (flags or {}).items():
        key = str(raw_key).lstrip("-").replace("-", "_").lower()
        convert = None
        if key in _ALIASES:
            key, convert = _ALIASES[key]
        if key not in FLAGS:
            problems.append(error(
                str(raw_key), str(value), "is not a flag that changes SGLang's all-reduce path",
                f"use one of: {', '.join(sorted(FLAGS))}",
            ))
            continue
        if value is None:  # not given: SGLang's default
            continue
        coerced, problem = _coerce(str(raw_key), FLAGS[key][0], value)
        if problem is None and key == "nnodes" and coerced < 1:
            problem = error(str(raw_key), str(value), "must be at least 1", "pass the number of nodes the group spans")
        if problem:
            problems.append(problem)
            continue
        out[key] = convert(coerced) if convert and coerced is not None else coerced
    if problems:
        raise SizesError(problems)
    return out


# --------------------------------------------------------------------------------------------------
# The walk through SGLang's order
# --------------------------------------------------------------------------------------------------


@dataclass
class _Decision:
    applies: bool | None  # None: depends on something this prediction cannot know
    why: str
    impl: str | None = None  # e.g. CustomAllReduceV2


def _v(version: Version, other: str) -> bool:
    return version >= Version(other)


def _custom_ar(version: Version, nbytes: int, ws: int, f: Mapping[str, Any], ic: str) -> _Decision:
    if f["disable_custom_all_reduce"]:
        return _Decision(False, "--disable-custom-all-reduce")
    if f["enable_deterministic_inference"] and _v(version, "0.5.3"):
        return _Decision(False, "deterministic inference turns it off (and SGLang sets NCCL_ALGO=allreduce:tree)")
    if f["platform"] == "rocm":
        return _Decision(None, "ROCm custom all-reduce (aiter) is not predicted here")
    if f["group"] not in ("tp", "attention_tp", "world"):
        return _Decision(False, f"SGLang builds group {f['group']!r} without custom all-reduce")
    if f["group"] == "world":
        return _Decision(False, "SGLang builds the world group without custom all-reduce")
    if f["nnodes"] > 1:
        if _v(version, "0.5.23"):
            return _Decision(None, "the group spans nodes: only a multi-node NVLink clique (MNNVL) gets CustomAllReduceV2 in 0.5.23; hardware-dependent")
        return _Decision(False, "the group spans nodes (custom all-reduce is one node only)")
    if nbytes % 16:
        return _Decision(False, f"{nbytes} bytes is not a multiple of 16")
    v2 = limits_for("custom_allreduce_v2", version)
    v1 = limits_for("custom_allreduce_v1", version)
    use_v2 = bool(v2) and (f["custom_all_reduce_v2"] if f["custom_all_reduce_v2"] is not None else bool(v2["default_on"]))
    if use_v2:
        if "max_bytes" not in v2:
            return _Decision(None, f"CustomAllReduceV2 opted in through {v2['switch']}: its thresholds are not predicted for this release", "CustomAllReduceV2")
        if ic == "nvlink" and ws in v2["world_sizes"]:
            cap = v2["max_bytes"]
            if f["custom_all_reduce_v2_max_size_kb"] is not None and _v(version, "0.5.16"):
                cap = f["custom_all_reduce_v2_max_size_kb"] * 1024
            ok = nbytes <= cap
            return _Decision(ok, f"CustomAllReduceV2 takes sizes <= {fmt_bytes(cap)}" + ("" if ok else f"; {nbytes} is larger"), "CustomAllReduceV2")
        if not v2["fallback_v1"]:
            return _Decision(False, "CustomAllReduceV2 needs full NVLink and 2-8 ranks, and this release does not fall back to the older kernels", "CustomAllReduceV2")
    if v1 is None:
        return _Decision(False, "no custom all-reduce in this release")
    if ws not in v1["world_sizes"]:
        return _Decision(False, f"world size {ws} is not one CustomAllreduce supports ({v1['world_sizes']})", "CustomAllreduce")
    if ic == "pcie" and ws > 2:
        return _Decision(False, "more than 2 GPUs without full NVLink: SGLang disables custom all-reduce", "CustomAllreduce")
    cap, cmp = v1["max_bytes"], v1["compare"]
    if f["enable_piecewise_cuda_graph"] and "max_bytes_piecewise" in v1:
        cap = v1["max_bytes_piecewise"]  # 0.5.4 builds it with a 256 MiB buffer for piecewise graphs
    ok = nbytes < cap if cmp == "<" else nbytes <= cap
    why = f"CustomAllreduce takes sizes {cmp} {fmt_bytes(cap)}" + ("" if ok else f"; {nbytes} is not")
    if ic == "pcie":
        why += " (2 PCIe GPUs: only if their P2P check passes)"
    return _Decision(ok, why, "CustomAllreduce")


def _mscclpp(version: Version, nbytes: int, ws: int, f: Mapping[str, Any]) -> _Decision:
    lim = limits_for("mscclpp", version)
    if lim is None:
        return _Decision(False, "no MSCCL++ path in this release")
    if not f["enable_mscclpp"]:
        return _Decision(False, "--enable-mscclpp not given")
    if not f["cuda_graph"]:
        return _Decision(False, "MSCCL++ is used only inside CUDA graphs")
    if ws not in lim["world_sizes"] and not _v(version, "0.5.23"):
        return _Decision(False, f"world size {ws} not supported ({lim['world_sizes']})")
    if "max_bytes" not in lim:
        return _Decision(None, "MSCCL++ takes the sizes its startup tuning chose (no fixed threshold)")
    ok = nbytes <= lim["max_bytes"]
    return _Decision(ok, f"MSCCL++ takes sizes <= {fmt_bytes(lim['max_bytes'])} (SGLANG_MSCCLPP_MAX_BYTES)")


def _torch_symm(version: Version, nbytes: int, ws: int, f: Mapping[str, Any], ic: str, *, size_check: bool = True) -> _Decision:
    lim = limits_for("torch_symm_mem", version)
    if lim is None:
        return _Decision(False, "no torch symmetric-memory path in this release")
    if not f["enable_torch_symm_mem"]:
        return _Decision(False, "--enable-torch-symm-mem not given")
    if f["dtype"] != lim["dtype"]:
        return _Decision(False, f"torch symmetric memory takes {lim['dtype']} only")
    table = {int(k): v for k, v in lim["max_bytes_by_world_size"].items()}
    if ws not in table:
        return _Decision(False, f"world size {ws} not supported ({sorted(table)})")
    if ic == "pcie":
        return _Decision(False, "needs multicast (NVSwitch); a PCIe group disables it")
    cap = f["gpu_capability"]
    if cap is not None and cap not in lim["capabilities"]:
        return _Decision(False, f"CUDA capability {cap}.x is not supported ({lim['capabilities']})")
    bound = table[ws]
    ok = (nbytes < bound) if size_check else True
    why = f"torch symmetric memory takes {lim['dtype']} sizes < {fmt_bytes(bound)}" if size_check else "this release calls it without a size check"
    if cap is None:
        return _Decision(None if ok else False, why + "; needs CUDA capability 9.x/10.x and NVSwitch multicast (hardware-dependent)")
    return _Decision(ok, why + "; needs NVSwitch multicast")


def _pcie_ipc(version: Version, nbytes: int, ws: int, f: Mapping[str, Any]) -> _Decision:
    lim = limits_for("pcie_ipc", version)
    if lim is None:
        return _Decision(False, "no PCIe IPC all-reduce in this release (from 0.5.21)")
    if not f["enable_pcie_ipc_allreduce"]:
        return _Decision(False, f"{lim['switch']} not set (off by default)")
    if f["group"] not in lim["groups"]:
        return _Decision(False, f"only the {lim['groups']} group gets it")
    if f["enable_deterministic_inference"]:
        return _Decision(False, "deterministic inference turns it off")
    if ws not in lim["world_sizes"]:
        return _Decision(False, f"world size {ws} not supported ({lim['world_sizes']})")
    if f["nnodes"] > 1:
        return _Decision(False, "one node only")
    if f["dtype"] != lim["dtype"]:
        return _Decision(False, f"{lim['dtype']} only")
    bound = f["pcie_ipc_max_bytes"]
    if bound is None:
        return _Decision(None, "only up to its workspace: (largest captured CUDA-graph batch x draft tokens) x hidden x 2 bytes; unknown here (needs FlashInfer with pcie_ipc_comm)")
    ok = nbytes <= bound
    return _Decision(ok, f"PCIe IPC takes bf16 sizes <= {fmt_bytes(bound)} (its workspace); needs FlashInfer with pcie_ipc_comm")


def _decide(step: DispatchStep, version: Version, nbytes: int, ws: int, f: Mapping[str, Any], ic: str) -> _Decision:
    p = step.path
    if p == "custom_allreduce":
        d = _custom_ar(version, nbytes, ws, f, ic)
    elif p == "mscclpp":
        return _mscclpp(version, nbytes, ws, f)
    elif p == "pcie_ipc":
        d = _pcie_ipc(version, nbytes, ws, f)
    elif p == "quick_allreduce":
        if f["platform"] == "rocm":
            return _Decision(None, "ROCm quick all-reduce: not predicted here")
        return _Decision(False, "ROCm only")
    elif p == "torch_symm_mem":
        return _torch_symm(version, nbytes, ws, f, ic)
    elif p == "torch_symm_mem_inplace":
        if f["cuda_graph"] or f["piecewise_cuda_graph"]:
            return _Decision(False, "PyNccl comes first inside CUDA graphs")
        return _torch_symm(version, nbytes, ws, f, ic, size_check=bool(step.size_checked))
    elif p == "pynccl_symm_mem":
        if limits_for("pynccl_symm_mem", version) is None or not f["enable_symm_mem"]:
            return _Decision(False, "--enable-symm-mem not given")
        if f["group"] in ("moe_ep", "moe_tp", "world"):
            return _Decision(False, f"group {f['group']!r} has no PyNccl communicator")
        if step.scope == "tensor":
            return _Decision(None, "only for tensors SGLang allocated in its symmetric-memory pool (decided per layer)")
        d = _Decision(True, "--enable-symm-mem: NCCL symmetric kernels through PyNccl, every size")
    elif p == "flashinfer_allreduce":
        if f["flashinfer_allreduce_fusion"]:
            return _Decision(None, "groups tagged with a FlashInfer fusion workspace (attention TP / MoE) within its token bound")
        return _Decision(False, "no FlashInfer fusion backend")
    elif p == "pynccl_piecewise":
        ok = f["piecewise_cuda_graph"]
        return _Decision(ok, "inside a piecewise CUDA graph" if ok else "not inside a piecewise CUDA graph")
    elif p == "pynccl":
        if f["group"] in ("moe_ep", "moe_tp", "world"):
            return _Decision(False, f"group {f['group']!r} has no PyNccl communicator")
        ok = f["cuda_graph"]
        return _Decision(ok, "inside a CUDA graph: PyNccl (NCCL)" if ok else "eager: PyNccl stays disabled")
    elif p == "torch_pg":
        return _Decision(True, "eager fallback: torch.distributed on the device group (ProcessGroupNCCL)")
    else:  # a path name the data file gained without code here
        return _Decision(None, f"{p}: not predicted")
    if d.applies and step.unless:
        for other in step.unless:
            blocker = _mscclpp(version, nbytes, ws, f) if other == "mscclpp" else _custom_ar(version, nbytes, ws, f, ic)
            if blocker.applies:
                return _Decision(False, f"{path_info(other).title} takes it first")
    return d


_NCCL_COMM = {
    "pynccl_symm_mem": "SGLang's PyNccl communicator (created eagerly with the group; symmetric-memory buffers)",
    "pynccl_piecewise": "SGLang's PyNccl communicator (created eagerly with the group)",
    "pynccl": "SGLang's PyNccl communicator (created eagerly with the group)",
    "torch_pg": "torch's ProcessGroupNCCL communicator (created lazily at the group's first collective)",
}


def _walk(entry: DispatchRange, version: Version, nbytes: int, ws: int, f: Mapping[str, Any], ic: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    maybe: list[str] = []
    chosen = None
    for step in entry.order:
        d = _decide(step, version, nbytes, ws, f, ic)
        steps.append({"path": step.path, "title": path_info(step.path).title, "applies": d.applies, "why": d.why, "impl": d.impl})
        if d.applies is None:
            maybe.append(step.path)
        elif d.applies:
            chosen = step.path
            break
    return {
        "path": chosen,
        "title": path_info(chosen).title if chosen else None,
        "impl": steps[-1]["impl"] if chosen else None,
        "reaches_nccl": (chosen in _NCCL_COMM) if chosen else None,
        "nccl_communicator": _NCCL_COMM.get(chosen or ""),
        "may_instead": maybe,
        "steps": steps,
    }


def _parse_version(sglang_version: str) -> Version:
    try:
        return normalize_version(sglang_version)
    except InvalidVersion:
        raise SizesError([error("--sglang-version", sglang_version, "is not a PEP 440 version", "pass the SGLang release, e.g. 0.5.23")]) from None


def predict_path(sglang_version: str, nbytes: int, tp_size: int, flags: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Which implementation SGLang ``sglang_version`` would pick for one all-reduce of ``nbytes``
    bytes on a group of ``tp_size`` ranks, given its flags (see :data:`FLAGS`; unknown keys are an
    error). A prediction from SGLang's source thresholds and defaults, not a measurement.

    When ``flags['interconnect']`` is not given and the answer differs between NVLink and PCIe,
    ``path`` is ``"depends"`` and ``by_interconnect`` holds both answers. ``may_instead`` lists
    earlier paths whose use depends on something not known here (hardware, a workspace bound)."""
    problems = []
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        problems.append(error("nbytes", str(nbytes), "must be a non-negative integer", "pass the message size in bytes"))
    if isinstance(tp_size, bool) or not isinstance(tp_size, int) or tp_size < 1:
        problems.append(error("--tp-size", str(tp_size), "must be a positive integer", "pass the group's world size, e.g. --tp-size 8"))
    if problems:
        raise SizesError(problems)
    f = _normalize_flags(flags)
    version = _parse_version(sglang_version)
    entry = dispatch_for(version)
    if entry is None:
        raise SizesError([error("--sglang-version", sglang_version, "is older than every release this plugin knows (0.4.3)", "pass an SGLang release from 0.4.3 on")])
    mode = "piecewise_cuda_graph" if f["piecewise_cuda_graph"] else ("cuda_graph" if f["cuda_graph"] else "eager")
    out: dict[str, Any] = {
        "prediction": True,
        "label": "prediction from SGLang's source thresholds and defaults, not a measurement",
        "sglang_version": sglang_version,
        "rules": {"versions": entry.versions, "checked": list(entry.checked), "source": entry.source},
        "nbytes": nbytes,
        "tp_size": tp_size,
        "mode": mode,
        "flags": {k: v for k, v in f.items() if v != FLAGS[k][1]},
        "depends_on": [],
        "notes": [],
    }
    newest = Version(entry.newest_checked)
    if version > newest and entry.versions.startswith(">=") and "," not in entry.versions:
        out["notes"].append(f"SGLang {sglang_version} is newer than the newest release checked ({newest}); its rules are assumed unchanged")
    if entry.note:
        out["notes"].append(entry.note)
    if tp_size == 1:
        out.update(path="none", title="no all-reduce", reaches_nccl=False, nccl_communicator=None, may_instead=[], steps=[])
        out["notes"].append("a one-rank group performs no all-reduce (GroupCoordinator.all_reduce returns the input)")
        return out
    if f["platform"] == "rocm":
        out["notes"].append("ROCm: quick all-reduce and aiter kernels are not predicted; read the audit of a running server")
    interconnects = [f["interconnect"]] if f["interconnect"] else ["nvlink", "pcie"]
    results = {ic: _walk(entry, version, nbytes, tp_size, f, ic) for ic in interconnects}
    first = results[interconnects[0]]
    same = all(r["path"] == first["path"] and r["may_instead"] == first["may_instead"] for r in results.values())
    if same:
        out.update({k: first[k] for k in ("path", "title", "impl", "reaches_nccl", "nccl_communicator", "may_instead", "steps")})
    else:
        out.update(path="depends", title="depends on the interconnect", impl=None, reaches_nccl=None, nccl_communicator=None, may_instead=[], steps=[])
        out["depends_on"].append("interconnect: NVLink between every GPU pair, or PCIe")
    out["by_interconnect"] = {ic: {k: r[k] for k in ("path", "title", "impl", "reaches_nccl", "may_instead")} for ic, r in results.items()}
    if any(r["may_instead"] for r in results.values()):
        out["depends_on"].append("an earlier path may take it: " + ", ".join(sorted({p for r in results.values() for p in r["may_instead"]})))
    if tp_size not in (2, 4, 6, 8):
        out["notes"].append(f"world size {tp_size}: SGLang's original custom all-reduce supports 2, 4, 6 and 8 ranks only")
    return out


# --------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------


def _shown(value: Any) -> str:
    # str() of an int over 4300 digits raises; such a number is shown by its size instead.
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"(an integer of {value.bit_length()} bits)"
    return str(value)


def _positive(name: str, value: Any, fix: str, problems: list[Finding], *, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        problems.append(error(name, _shown(value), f"must be a positive integer up to {MAX_COUNT}", fix))
        return None
    return value


def size_report(
    config: Mapping[str, Any] | str | Path,
    *,
    batch_size: int,
    tp_size: int,
    num_draft_tokens: int | None = None,
    eagle_topk: int | None = None,
    num_steps: int | None = None,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    dtype: str = "auto",
    sglang_version: str | None = None,
    flags: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """All-reduce message bytes of one decode step, one EAGLE draft step, one EAGLE verify step and
    one prefill chunk, each with the formula and (when ``sglang_version`` is given) the predicted
    path (:func:`predict_path`). Arguments mirror SGLang's: ``--speculative-num-draft-tokens``,
    ``--speculative-eagle-topk``, ``--speculative-num-steps``, ``--chunked-prefill-size``,
    ``--cuda-graph-max-bs``, ``--dtype``, TP size; ``flags`` as in :func:`predict_path` (its
    ``cuda_graph``, ``piecewise_cuda_graph`` and ``dtype`` are set per phase here)."""
    problems: list[Finding] = []
    bs = _positive("--batch-size", batch_size, "pass the number of running requests, e.g. --batch-size 8", problems, allow_none=False)
    tp = _positive("--tp-size", tp_size, "pass the tensor-parallel size, e.g. --tp-size 8", problems, allow_none=False)
    ndt = _positive("--speculative-num-draft-tokens", num_draft_tokens, "pass SGLang's --speculative-num-draft-tokens, e.g. 4", problems)
    topk = _positive("--speculative-eagle-topk", eagle_topk, "pass SGLang's --speculative-eagle-topk, e.g. 1", problems)
    steps = _positive("--speculative-num-steps", num_steps, "pass SGLang's --speculative-num-steps, e.g. 3", problems)
    max_bs = _positive("--cuda-graph-max-bs", cuda_graph_max_bs, "pass SGLang's --cuda-graph-max-bs", problems)
    chunk = chunked_prefill_size
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk == 0 or not -1 <= chunk <= MAX_COUNT):
        problems.append(error("--chunked-prefill-size", _shown(chunk), "must be a positive integer, or -1 (chunking off)", "pass SGLang's --chunked-prefill-size, e.g. 8192"))
    # The tensor's dtype is the model's (set per phase below); cuda_graph / piecewise_cuda_graph say
    # how decode-like steps and prefill run and are turned into a per-phase mode.
    user_flags = {k: v for k, v in (flags or {}).items() if str(k).lstrip("-").replace("-", "_").lower() != "dtype"}
    f = None
    try:
        f = _normalize_flags(user_flags)
    except SizesError as exc:
        problems.extend(exc.findings)
    if sglang_version is not None:
        try:
            _parse_version(sglang_version)
        except SizesError as exc:
            problems.extend(exc.findings)
    shape = None
    try:
        shape = model_shape(config, dtype)
    except SizesError as exc:
        problems.extend(exc.findings)
    if problems or shape is None or f is None or bs is None or tp is None:
        raise SizesError(problems)

    elem, hidden = shape.element_size, shape.hidden_size
    per_token = hidden * elem
    notes = list(shape.notes)
    graph_ok = f["cuda_graph"] and not (max_bs is not None and bs > max_bs)
    if f["cuda_graph"] and not graph_ok:
        notes.append(f"batch {bs} > --cuda-graph-max-bs {max_bs}: decode / draft / verify run eagerly")
    spec = ndt is not None or topk is not None

    phases: list[dict[str, Any]] = []

    def add(phase: str, label: str, tokens: int, tokens_formula: str, mode: str) -> None:
        nbytes = tokens * per_token
        phases.append({
            "phase": phase, "label": label, "tokens": tokens, "tokens_formula": tokens_formula,
            "bytes": nbytes, "formula": f"{tokens} tokens ({tokens_formula}) x {hidden} hidden x {elem} bytes ({shape.dtype}) = {nbytes}",
            "mode": mode, "path": None,
        })

    step_mode = "cuda_graph" if graph_ok else "eager"
    add("decode", "decode step" + (" (without speculation)" if spec else ""), bs, f"batch {bs} x 1", step_mode)
    if topk is not None:
        per = f" per draft step, {steps} steps" if steps else " per draft step"
        add("eagle_draft", "EAGLE draft step" + (f" (x{steps})" if steps else ""), bs * topk, f"batch {bs} x topk {topk}{per}", step_mode)
    if ndt is not None:
        add("eagle_verify", "EAGLE verify step", bs * ndt, f"batch {bs} x num_draft_tokens {ndt}", step_mode)
        notes.append("the EAGLE draft-extend step after verify is captured at the verify width (batch x num_draft_tokens)")
    if chunk is not None and chunk > 0:
        piecewise = f["piecewise_cuda_graph"] or f["enable_piecewise_cuda_graph"]
        add("prefill_chunk", "prefill chunk", chunk, f"--chunked-prefill-size {chunk}", "piecewise_cuda_graph" if piecewise else "eager")
    elif chunk == -1:
        notes.append("--chunked-prefill-size -1: chunking is off, a prefill all-reduce carries the whole prompt (prompt tokens x hidden x element size)")
    else:
        notes.append("no --chunked-prefill-size given: SGLang picks one from GPU memory (e.g. 2048-8192; arg_groups/memory_hook.py 0.5.23:97-153), pass it to see the prefill size")

    pcie_bound = f["pcie_ipc_max_bytes"]
    if pcie_bound is None and max_bs is not None and f["enable_pcie_ipc_allreduce"]:
        # pcie_ipc_ar.py 0.5.23:136-165, 246-275; base_runner.py 0.5.23:350-380: the workspace holds the widest
        # decode reduction, largest captured batch x draft tokens per request rows of hidden bf16.
        rows = max_bs * (ndt if ndt else 1)
        pcie_bound = rows * hidden * 2
        notes.append(
            f"PCIe IPC bound taken as --cuda-graph-max-bs {max_bs} x {ndt or 1} tokens x {hidden} hidden x 2 bytes = "
            f"{fmt_bytes(pcie_bound)} (SGLang clamps the captured batch to its request pool)"
        )
    if sglang_version is not None:
        for ph in phases:
            phase_flags = {k: v for k, v in f.items() if v != FLAGS[k][1]}
            phase_flags["cuda_graph"] = ph["mode"] == "cuda_graph"
            phase_flags["piecewise_cuda_graph"] = ph["mode"] == "piecewise_cuda_graph"
            phase_flags["dtype"] = shape.dtype
            if pcie_bound is not None:
                phase_flags["pcie_ipc_max_bytes"] = pcie_bound
            ph["path"] = predict_path(sglang_version, ph["bytes"], tp, phase_flags)
    else:
        notes.append("no SGLang version given: paths not predicted")

    per_forward = 2 * shape.num_hidden_layers + 1 if shape.num_hidden_layers else None
    return {
        "model": shape.to_dict(),
        "tp_size": tp,
        "batch_size": bs,
        "speculative": {"num_draft_tokens": ndt, "eagle_topk": topk, "num_steps": steps},
        "chunked_prefill_size": chunk,
        "bytes_per_token": per_token,
        "formula": FORMULA,
        "all_reduces_per_forward": per_forward,
        "phases": phases,
        "sglang_version": sglang_version,
        "notes": notes,
    }


def _path_text(p: Mapping[str, Any]) -> str:
    if p["path"] == "depends":
        parts = [f"{ic}: {_one_path(r)}" for ic, r in p["by_interconnect"].items()]
        return "depends on the interconnect -- " + "; ".join(parts)
    return _one_path(p)


def _one_path(r: Mapping[str, Any]) -> str:
    if r.get("path") is None:
        return "undetermined"
    text = r["title"] + (f" [{r['impl']}]" if r.get("impl") else "")
    if r.get("reaches_nccl") is True:
        text += " -> NCCL"
    elif r.get("reaches_nccl") is False:
        text += " (no NCCL)"
    if r.get("may_instead"):
        text += " (unless " + ", ".join(path_info(m).title for m in r["may_instead"]) + " takes it)"
    return text


def add_tuner_rules(report: dict[str, Any], profile: Any, *, tp_size: int, nnodes: int = 1) -> None:
    """Each phase's ``tuner``: the first of ``profile``'s rules its all-reduce matches on the tp group, or None.

    The answer of :func:`~sglang_eagle_nccl.knowledge.nccl.tuner_rules.first_match`, the plugin's model of
    its C tuner (tests/native checks the library against it on generated rules and calls).
    """
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import first_match, rule_from_dict, rule_label

    rules = [rule_from_dict(r, f"profile {profile.name}") for r in profile.tuner_rules]
    report["tuner_profile"] = profile.name
    for phase in report["phases"]:
        index = first_match(rules, "AllReduce", phase["bytes"], tp_size, nnodes, "tp") if rules else None
        phase["tuner"] = None if index is None else {
            "rule": rule_label(index), "algorithm": rules[index].algorithm, "protocol": rules[index].protocol,
            "channels": rules[index].channels,
        }


def format_size_report(report: Mapping[str, Any]) -> str:
    """Human-readable text for :func:`size_report`: sizes, formula, predicted path per phase."""
    m = report["model"]
    lines = [
        f"model: hidden_size {m['hidden_size']} ({m['hidden_from']}), {m['dtype']} ({m['dtype_from']}), "
        f"{report['bytes_per_token']} bytes per token; TP {report['tp_size']}, batch {report['batch_size']}",
        f"formula: {report['formula']}",
    ]
    if report.get("all_reduces_per_forward"):
        lines.append(f"all-reduces per forward pass: about {report['all_reduces_per_forward']} (2 x {m['num_hidden_layers']} layers + 1)")
    lines.append("")
    width = max(len(p["label"]) for p in report["phases"])
    for p in report["phases"]:
        lines.append(f"{p['label']:<{width}}  {fmt_bytes(p['bytes'])}")
        lines.append(f"{'':<{width}}    = {p['formula']}")
        mode = {"cuda_graph": "inside a CUDA graph", "eager": "eager", "piecewise_cuda_graph": "inside a piecewise CUDA graph"}[p["mode"]]
        if p["path"] is not None:
            lines.append(f"{'':<{width}}    path ({mode}, predicted): {_path_text(p['path'])}")
        else:
            lines.append(f"{'':<{width}}    runs {mode}")
        if "tuner" in p:
            rule = p["tuner"]
            answer = "no rule matches: NCCL decides" if rule is None else (
                f"{rule['rule']}: {rule['algorithm']}/{rule['protocol']}"
                + (f", {rule['channels']} channels" if rule["channels"] else ""))
            lines.append(f"{'':<{width}}    tuner ({report['tuner_profile']}, where NCCL carries it): {answer}")
    if report.get("sglang_version"):
        first = next((p["path"] for p in report["phases"] if p["path"]), None)
        if first:
            lines.append("")
            lines.append(
                f"paths are predictions from SGLang {report['sglang_version']}'s source thresholds and defaults, not "
                f"measurements (rules for {first['rules']['versions']}: {first['rules']['source']})"
            )
            notes = sorted({n for p in report["phases"] if p["path"] for n in p["path"]["notes"]})
            for n in notes:
                lines.append(f"  note: {n}")
    for n in report.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)
