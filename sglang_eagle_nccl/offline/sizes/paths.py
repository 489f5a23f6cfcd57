"""Which implementation SGLang would pick for one all-reduce of a given size (:func:`predict_path`).

:func:`predict_path` walks SGLang's dispatch order (``knowledge/sglang/data/allreduce_paths.toml``) for one
message size and says which implementation would carry it: a prediction from SGLang's own
thresholds and defaults, not a measurement; where the answer depends on hardware (NVLink or PCIe,
GPU generation, world size) it says so. The audit's per-group record (``describe_group``) shows
what a running server really enabled.

Pure functions; errors are :class:`~sglang_eagle_nccl.offline.sizes.shape.SizesError` with one
finding per problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

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
from sglang_eagle_nccl.offline.sizes.shape import SizesError

__all__ = [
    "FLAGS",
    "normalize_flags",
    "parse_version",
    "predict_path",
]

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


def normalize_flags(flags: Mapping[str, Any] | None) -> dict[str, Any]:
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


def parse_version(sglang_version: str) -> Version:
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
    f = normalize_flags(flags)
    version = parse_version(sglang_version)
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
