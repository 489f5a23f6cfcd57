"""What SGLang enabled for a group's all-reduces in this process, read from the live objects
(:func:`describe_group`).

Called inside SGLang's process right after ``GroupCoordinator.__init__`` returned (the group hook,
``inproc/hooks/hook_groups.py``, records the result in its ``group_created`` event): it only *reads*
attributes of the live objects -- the GroupCoordinator and each communicator it built -- never calls
SGLang code that could communicate or allocate, and never raises. One reader per implementation
says whether it is there, whether SGLang will use it, why not, and which sizes it takes.

The order SGLang tries the implementations in and their size rules per release are facts of
:mod:`sglang_eagle_nccl.knowledge.sglang.allreduce_paths`, which also turns the result into audit
lines (:func:`~sglang_eagle_nccl.knowledge.sglang.allreduce_paths.format_paths`).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from sglang_eagle_nccl.contract import versions
from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import (
    DispatchStep,
    dispatch_for,
    fmt_bytes,
    limits_for,
    normalize_version,
    order_note,
    path_info,
)

__all__ = [
    "describe_group",
]

_MISSING = object()

# The step of the order -> the GroupCoordinator object whose state decides it.
_STEP_OBJECT = {
    "custom_allreduce": "custom_allreduce",
    "pcie_ipc": "pcie_ipc",
    "quick_allreduce": "quick_allreduce",
    "mscclpp": "mscclpp",
    "torch_symm_mem": "torch_symm_mem",
    "torch_symm_mem_inplace": "torch_symm_mem",
    "pynccl_symm_mem": "pynccl",
    "pynccl_piecewise": "pynccl",
    "pynccl": "pynccl",
    "flashinfer_allreduce": "flashinfer_allreduce",
    "torch_pg": "torch_pg",
}


@functools.cache
def _installed_sglang() -> str | None:
    # Package metadata only: importing sglang here would be far too heavy (and is not needed).
    return versions.installed_sglang_version()


# --------------------------------------------------------------------------------------------------
# Reading live objects without running their code
# --------------------------------------------------------------------------------------------------


def _peek(obj: Any, name: str, default: Any = None) -> Any:
    """An attribute's stored value, without running a property or ``__getattr__``.

    The describer runs inside SGLang's process at group creation; evaluating a property of a
    communicator could allocate or communicate, so only values stored on the instance or plainly
    on its class are read."""
    if obj is None:
        return default
    try:
        instance_dict = object.__getattribute__(obj, "__dict__")
    except Exception:  # noqa: BLE001 - objects without a __dict__ (slots, builtins)
        instance_dict = None
    if isinstance(instance_dict, dict) and name in instance_dict:
        return instance_dict[name]
    try:
        value = inspect.getattr_static(obj, name)
    except Exception:  # noqa: BLE001 - AttributeError, or a broken metaclass
        return default
    if hasattr(type(value), "__get__") and not isinstance(value, (int, float, str, bytes, tuple, list, dict, frozenset, set)):
        return default  # property, method, other descriptor: not a stored value
    return value


def _has(obj: Any, name: str) -> bool:
    return _peek(obj, name, _MISSING) is not _MISSING


def _plain(value: Any, depth: int = 0) -> Any:
    """JSON-safe copy of a stored value: numbers, strings, NamedTuples / dataclasses as dicts."""
    if depth > 4:
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    fields = getattr(type(value), "_fields", None)
    if isinstance(value, tuple) and fields:
        return {f: _plain(getattr(value, f, None), depth + 1) for f in fields}
    dc_fields = getattr(type(value), "__dataclass_fields__", None)
    if isinstance(dc_fields, dict):
        return {f: _plain(getattr(value, f, None), depth + 1) for f in dc_fields}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    name = getattr(value, "name", None)
    if isinstance(name, str):  # enums (quick all-reduce regime)
        return name
    return repr(value)


def _class_name(obj: Any) -> str | None:
    return None if obj is None else type(obj).__name__


def _device_kind(group: Any) -> str | None:
    device = _peek(group, "device")
    kind = getattr(device, "type", None) if device is not None else None
    return kind if isinstance(kind, str) else (str(device) if device is not None else None)


def _backend_of(device_group: Any) -> str | None:
    """torch's backend name of a process group: a table lookup in c10d, no collective."""
    torch = sys.modules.get("torch")
    if torch is None or device_group is None:
        return None
    try:
        return str(torch.distributed.get_backend(device_group))
    except Exception:  # noqa: BLE001 - destroyed group, torch without distributed
        return None


def _at_least(version: Version | None, other: str) -> bool | None:
    return None if version is None else version >= Version(other)


# --------------------------------------------------------------------------------------------------
# One reader per implementation. Each returns the entry shown in the audit:
#   present    the object exists on the GroupCoordinator
#   enabled    SGLang will use it for some all-reduces (True/False, None when it cannot be told)
#   why_not    when not enabled: why, as far as the object tells
#   thresholds raw values read from the object
#   carries    which all-reduces it takes, in words, from those values
# --------------------------------------------------------------------------------------------------


def _entry(path: str, obj: Any, requested: Any) -> dict[str, Any]:
    info = path_info(path)
    return {
        "path": path,
        "title": info.title,
        "nccl": info.nccl,
        "requested": requested if isinstance(requested, bool) else None,
        "present": obj is not None,
        "class": _class_name(obj),
        "enabled": False,
        "why_not": None,
        "thresholds": {},
        "carries": None,
    }


def _not_created(entry: dict[str, Any], flag: str, world_size: Any, what: str) -> None:
    if entry["requested"] is False:
        entry["why_not"] = f"not requested for this group ({flag}=False)"
    elif world_size == 1:
        entry["why_not"] = "one rank: SGLang creates no communicator"
    else:
        entry["why_not"] = f"not created ({what})"


def _read_custom_allreduce(group: Any, ws: Any, device_kind: str | None, version: Version | None) -> dict[str, Any]:
    ca = _peek(group, "ca_comm")
    e = _entry("custom_allreduce", ca, _peek(group, "use_custom_allreduce"))
    if ca is None:
        _not_created(
            e, "use_custom_allreduce", ws,
            "SGLang skipped it or its setup raised; from 0.4.6 SGLang logs 'Setup Custom allreduce failed'"
            + ("; on a CPU device no custom all-reduce can exist" if device_kind == "cpu" else ""),
        )
        if e["requested"] is False:
            e["why_not"] += (
                ": --disable-custom-all-reduce, deterministic inference, or a group SGLang always builds "
                "without it (pp, moe_ep, moe_tp, ...)"
            )
        return e
    disabled = _peek(ca, "disabled")
    e["enabled"] = disabled is False
    th = e["thresholds"]
    for name in ("max_size", "max_pull_size", "max_push_size", "world_size", "full_nvlink"):
        value = _peek(ca, name, _MISSING)
        if value is not _MISSING:
            th[name] = _plain(value)
    workspace = _peek(ca, "max_required_workspace_size")
    if workspace is not None:
        th["max_required_workspace_size"] = _plain(workspace)  # 0.4.3 TensorRT-LLM kernel path
    config = _peek(ca, "config")
    if config is not None:
        th["config"] = _plain(config)
    if not e["enabled"]:
        e["why_not"] = _custom_ar_why_not(ca, ws, device_kind)
        return e
    if type(ca).__name__ == "CustomAllReduceV2" or config is not None:
        e["carries"] = _v2_carries(ca, config, version)
    else:
        e["carries"] = _v1_carries(th, ws, version)
    return e


def _custom_ar_why_not(ca: Any, ws: Any, device_kind: str | None) -> str:
    if device_kind == "cpu":
        return "present but disabled: the device is a CPU and SGLang's custom all-reduce kernels need a GPU"
    supported = _peek(ca, "_SUPPORTED_WORLD_SIZES")
    if isinstance(supported, (list, tuple)) and isinstance(ws, int) and ws not in supported:
        return f"present but disabled: world size {ws} is not one SGLang supports ({list(supported)})"
    return (
        "present but disabled during setup: kernels unavailable, the group spans nodes, more than 2 GPUs "
        "without full NVLink, or the GPU P2P check failed (SGLang's warning in the log names which)"
    )


def _v1_carries(th: dict[str, Any], ws: Any, version: Version | None) -> str:
    max_size = th.get("max_size")
    if not isinstance(max_size, int):
        return "unknown (max_size not readable)"
    limits = limits_for("custom_allreduce_v1", version) if version is not None else None
    cmp = limits["compare"] if limits else "<= or <"
    if ws != 2 and th.get("full_nvlink") is False:
        return "nothing on CUDA: more than 2 ranks without full NVLink (should_custom_ar() refuses)"
    text = f"sizes {cmp} {fmt_bytes(max_size)}, multiples of 16 bytes, eager and CUDA graph"
    workspace = th.get("max_required_workspace_size")
    if isinstance(workspace, list) and len(workspace) == 2 and all(isinstance(w, int) for w in workspace):
        bound = workspace[0] if ws == 2 else workspace[1]
        text += f" (and < {fmt_bytes(bound)}, TensorRT-LLM kernel path)"
    return text


def _heuristic_ceiling(h: Any, multicast: bool) -> int | None:
    values = []
    for name in ("one_shot_push_threshold", "two_shot_push_threshold", "one_shot_pull_threshold", "two_shot_pull_threshold"):
        v = getattr(h, name, None)
        if isinstance(v, int):
            values.append(v)
    mc = getattr(h, "mc", None)
    if multicast and mc is not None and isinstance(getattr(mc, "max_bytes", None), int):
        values.append(mc.max_bytes)
    return max(values) if values else None


def _v2_carries(ca: Any, config: Any, version: Version | None) -> str:
    """CustomAllReduceV2: up to 0.5.17 should_custom_ar() compares with max_size
    (custom_all_reduce_v2.py 0.5.13:111-121, 0.5.17:323-334); from 0.5.20 it asks _pick_config(),
    which takes a size while it is within one of the tuned (and workspace-clipped) thresholds of
    the graph or the eager table (0.5.20:335-361, 0.5.23:385-415)."""
    max_size = _peek(ca, "max_size")
    uses_config = _at_least(version, "0.5.20")
    graph = getattr(config, "graph", None) if config is not None else None
    eager = getattr(config, "eager", None) if config is not None else None
    if uses_config and graph is not None and eager is not None and _peek(ca, "override_algo") is None:
        multicast = getattr(config, "num_mc_blocks", None) is not None
        g, e = _heuristic_ceiling(graph, multicast), _heuristic_ceiling(eager, multicast)
        text = f"multiples of 16 bytes up to {fmt_bytes(g)} in CUDA graphs and {fmt_bytes(e)} eager (tuned table, clipped to the workspace)"
        g1, e1 = getattr(graph, "one_shot_push_threshold", None), getattr(eager, "one_shot_push_threshold", None)
        if isinstance(g1, int) and isinstance(e1, int):
            text += f"; one-shot push up to {fmt_bytes(g1)} / {fmt_bytes(e1)}, two-shot above"
        return text
    if isinstance(max_size, int):
        return f"sizes <= {fmt_bytes(max_size)}, multiples of 16 bytes, eager and CUDA graph"
    return "unknown (max_size not readable)"


def _read_pcie_ipc(group: Any, ws: Any, device_kind: str | None) -> dict[str, Any]:
    comm = _peek(group, "pcie_ipc_comm")
    e = _entry("pcie_ipc", comm, None)
    if comm is None:
        if _has(group, "pcie_ipc_comm"):
            e["why_not"] = (
                "not created: needs SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1, the 'tp' group, more than one rank and "
                "deterministic inference off (or its setup failed; SGLang logs a warning)"
            )
        else:
            e["why_not"] = "this SGLang release has no PCIe IPC all-reduce (from 0.5.21)"
        return e
    e["enabled"] = _peek(comm, "disabled") is False
    max_numel = _peek(comm, "max_numel")
    th = e["thresholds"]
    th["max_numel"] = max_numel if isinstance(max_numel, int) else None
    th["world_size"] = _plain(_peek(comm, "_world_size", ws))
    th["dtype"] = "bfloat16"
    if not e["enabled"]:
        e["why_not"] = (
            "present but disabled: the device is a CPU" if device_kind == "cpu" else
            "present but disabled: world size not 2/4/8, FlashInfer without pcie_ipc_comm, or its workspace "
            "failed to build (SGLang logs which)"
        )
        return e
    if isinstance(max_numel, int) and max_numel > 0:
        e["carries"] = f"bfloat16 tensors of at most {max_numel} elements ({fmt_bytes(2 * max_numel)}), 2+ dims, contiguous"
    else:
        e["carries"] = (
            "bound not sized yet: SGLang sizes it before CUDA-graph capture to (largest captured batch x draft "
            "tokens per request) x hidden size elements, bfloat16 only (SGLANG_PCIE_IPC_MAX_NUMEL overrides)"
        )
    return e


def _read_quick_allreduce(group: Any, ws: Any) -> dict[str, Any]:
    qr = _peek(group, "qr_comm")
    e = _entry("quick_allreduce", qr, None)
    if qr is None:
        e["why_not"] = "not created (ROCm only: AMD gfx942 or newer with custom all-reduce on)"
        return e
    e["enabled"] = _peek(qr, "disabled") is False
    th = e["thresholds"]
    qr_max = _peek(qr, "qr_max_size")
    th["qr_max_size"] = qr_max if isinstance(qr_max, int) else None
    level = _peek(qr, "qr_quant_level")
    th["quant_level"] = _plain(level)
    table = _peek(qr, "_QR_MIN_SIZE")
    level_index = getattr(level, "value", None)
    if isinstance(table, dict) and isinstance(level_index, int):
        mins = {}
        for (dtype, size), row in table.items():
            if size == ws and isinstance(row, (list, tuple)) and level_index < len(row):
                mins[str(dtype).replace("torch.", "")] = row[level_index]
        th["min_bytes"] = mins
    if not e["enabled"]:
        e["why_not"] = "present but disabled during setup (unsupported world size or GPU; SGLang logs which)"
        return e
    e["carries"] = f"sizes from the per-dtype minimum in min_bytes up to {fmt_bytes(th['qr_max_size'])}"
    return e


def _read_mscclpp(group: Any, ws: Any) -> dict[str, Any]:
    comm = _peek(group, "pymscclpp_comm")
    flag = "use_mscclpp" if _has(group, "use_mscclpp") else "use_pymscclpp"
    e = _entry("mscclpp", comm, _peek(group, flag))
    if comm is None:
        if not _has(group, "pymscclpp_comm"):
            e["why_not"] = "this SGLang release has no MSCCL++ path (from 0.4.7)"
        else:
            _not_created(e, flag, ws, "SGLang skipped it")
            if e["requested"] is False:
                e["why_not"] += ": --enable-mscclpp not given"
        return e
    available = _peek(comm, "available")
    e["enabled"] = available is True
    max_bytes = _peek(comm, "max_bytes")
    if isinstance(max_bytes, int):
        e["thresholds"]["max_bytes"] = max_bytes
    if not e["enabled"]:
        e["why_not"] = "present but unavailable (unsupported world size, no MSCCL++ package, or no tuned configuration)"
        return e
    if isinstance(max_bytes, int):
        e["carries"] = f"inside CUDA graphs only: sizes <= {fmt_bytes(max_bytes)}"
    else:
        e["carries"] = "inside CUDA graphs only: sizes its startup tuning chose (no fixed threshold to read)"
    return e


def _read_torch_symm_mem(group: Any, ws: Any, device_kind: str | None) -> dict[str, Any]:
    attr = "torch_symm_mem_comm" if _has(group, "torch_symm_mem_comm") else "symm_mem_comm"
    comm = _peek(group, attr)
    flag = next(
        (f for f in ("use_torch_symm_mem_all_reduce", "use_torch_symm_mem") if _has(group, f)),
        "use_torch_symm_mem_all_reduce",
    )
    e = _entry("torch_symm_mem", comm, _peek(group, flag))
    if comm is None:
        if not _has(group, attr):
            e["why_not"] = "this SGLang release has no torch symmetric-memory path (from 0.5.3)"
        else:
            _not_created(e, flag, ws, "SGLang skipped it")
            if e["requested"] is False:
                e["why_not"] += ": --enable-torch-symm-mem not given, or a group built without it"
        return e
    e["enabled"] = _peek(comm, "disabled") is False
    th = e["thresholds"]
    max_size = _peek(comm, "max_size")
    th["max_size"] = max_size if isinstance(max_size, int) else None
    th["dtype"] = _plain(str(_peek(comm, "dtype", "torch.bfloat16"))).replace("torch.", "")
    cap = _peek(comm, "device_capability")
    if cap is not None:
        th["device_capability"] = _plain(cap)
    if not e["enabled"]:
        e["why_not"] = (
            "present but disabled: the device is a CPU" if device_kind == "cpu" else
            "present but disabled: torch symmetric memory unavailable, CUDA capability not 9.x/10.x, world size "
            "not 2/4/6/8, or no multicast support (SGLang logs which)"
        )
        return e
    e["carries"] = f"{th['dtype']} tensors of sizes < {fmt_bytes(th['max_size'])}, multiples of 4 bytes"
    return e


def _read_pynccl(group: Any, ws: Any) -> dict[str, Any]:
    comm = _peek(group, "pynccl_comm")
    e = _entry("pynccl", comm, _peek(group, "use_pynccl"))
    if comm is None:
        _not_created(e, "use_pynccl", ws, "SGLang skipped it")
        return e
    available = _peek(comm, "available")
    e["enabled"] = available is True
    th = e["thresholds"]
    th["available"] = available if isinstance(available, bool) else None
    disabled = _peek(comm, "disabled")
    th["disabled_now"] = disabled if isinstance(disabled, bool) else None
    version = _peek(comm, "nccl_version")
    if version is not None:
        th["nccl_version"] = _plain(version)
    th["symmetric_memory"] = _symmetric_memory(group)
    if not e["enabled"]:
        e["why_not"] = (
            "created but unavailable: one rank"
            if _peek(comm, "world_size") == 1
            else "created but unavailable: the NCCL library could not be loaded (SGLANG_NCCL_SO_PATH / libnccl.so.2; "
            "no GPU NCCL here)"
        )
        return e
    e["carries"] = "every size it is handed: inside CUDA graphs (graph_capture() enables it)" + (
        ", and eagerly every all-reduce (symmetric memory on)" if th["symmetric_memory"] is True else ""
    )
    return e


def _symmetric_memory(group: Any) -> bool | None:
    """--enable-symm-mem as the group sees it (0.5.5+ stores SGLang's reader on the group). The reader
    only looks at SGLang's parsed server arguments (pynccl_allocator.py 0.5.5:67-68, 0.5.23:234-238)."""
    reader = _peek(group, "is_symmetric_memory_enabled")
    if not callable(reader):
        return None
    try:
        value = reader()
    except Exception:  # noqa: BLE001 - server arguments not published in this process
        return None
    return value if isinstance(value, bool) else None


def _read_flashinfer(group: Any) -> dict[str, Any]:
    e = _entry("flashinfer_allreduce", None, None)
    if not _has(group, "_fi_workspace_hint"):
        e["why_not"] = "this SGLang release has no FlashInfer all-reduce path on groups (from 0.5.20)"
        return e
    hint = _peek(group, "_fi_workspace_hint")
    e["present"] = hint is not None
    e["thresholds"]["workspace"] = hint if isinstance(hint, str) else None
    if hint is None:
        e["why_not"] = (
            "group not tagged with a FlashInfer workspace (tagging happens after every group exists, only with "
            "--flashinfer-allreduce-fusion-backend; the tp group itself is never tagged)"
        )
        return e
    e["enabled"] = True
    e["carries"] = "2-D contiguous tensors its fusion workspace accepts (token bound set by FlashInfer)"
    return e


def _read_torch_pg(group: Any, backend: str | None) -> dict[str, Any]:
    device_group = _peek(group, "device_group")
    e = _entry("torch_pg", device_group, None)
    e["nccl"] = backend == "nccl" if backend is not None else None
    e["thresholds"]["backend"] = backend
    if device_group is None:
        e["why_not"] = "no device group"
        return e
    e["enabled"] = True
    e["carries"] = "every size that reaches it (eager fallback)" + (
        "; NCCL communicator created lazily by torch at the first collective" if backend == "nccl" else ""
    )
    return e


def _read_other_accelerators(group: Any) -> list[str]:
    taken = []
    for attr in ("hpu_communicator", "xpu_communicator", "npu_communicator"):
        comm = _peek(group, attr)
        if comm is not None and _peek(comm, "disabled") is False:
            taken.append(attr)
    return taken


# --------------------------------------------------------------------------------------------------
# The public describer
# --------------------------------------------------------------------------------------------------


def describe_group(group_coordinator: Any, *, sglang_version: str | None = None) -> dict[str, Any]:
    """What SGLang enabled for this group's all-reduces in this process, read from the live objects.

    Call right after ``GroupCoordinator.__init__`` returned. Never raises and never calls SGLang code
    that could communicate or allocate: attributes are read as stored (see :func:`_peek`); the only
    calls are torch's backend-name lookup and SGLang's ``is_symmetric_memory_enabled()`` (a read of
    its parsed arguments). Whatever could not be read is reported in ``error``.

    Returns a JSON-safe dict: ``group``, ``unique_name``, ``world_size``, ``rank``, ``rank_in_group``,
    ``device``, ``device_group_backend``, ``device_group_is_nccl``, ``sglang_version``,
    ``implementations`` (path -> entry with ``present``, ``enabled``, ``why_not``, ``thresholds``,
    ``carries``, ``requested``, ``class``, ``nccl``), ``order`` (the steps SGLang tries, each with
    ``path``, ``implementation``, ``active`` and ``when``), ``order_source``, ``takes_everything``
    (an HPU/XPU/NPU communicator that takes every all-reduce), ``summary`` and ``error``.
    """
    out: dict[str, Any] = {
        "group": None, "unique_name": None, "world_size": None, "rank": None, "rank_in_group": None,
        "device": None, "device_group_backend": None, "device_group_is_nccl": None,
        "sglang_version": None, "implementations": {}, "order": [], "order_source": None,
        "order_note": None, "takes_everything": [], "summary": None, "error": None,
    }
    errors: list[str] = []

    def attempt(label: str, func: Any, *args: Any) -> Any:
        try:
            return func(*args)
        except Exception as exc:  # noqa: BLE001 - diagnostics must never break SGLang's group creation
            errors.append(f"{label}: {type(exc).__name__}: {exc}")
            return None

    try:
        g = group_coordinator
        unique = _peek(g, "unique_name")
        out["unique_name"] = unique if isinstance(unique, str) else None
        out["group"] = unique.rsplit(":", 1)[0] if isinstance(unique, str) else None
        ws = _peek(g, "world_size")
        out["world_size"] = ws if isinstance(ws, int) else None
        for name in ("rank", "rank_in_group"):
            value = _peek(g, name)
            out[name] = value if isinstance(value, int) else None
        device = _peek(g, "device")
        out["device"] = str(device) if device is not None else None
        device_kind = _device_kind(g)
        backend = _backend_of(_peek(g, "device_group"))
        out["device_group_backend"] = backend
        out["device_group_is_nccl"] = None if backend is None else backend == "nccl"

        version_text = sglang_version or _installed_sglang()
        version: Version | None = None
        if version_text:
            out["sglang_version"] = version_text
            try:
                version = normalize_version(version_text)
            except InvalidVersion:
                errors.append(f"SGLang version {version_text!r} is not a PEP 440 version; order unknown")

        impls = out["implementations"]
        for path, reader, args in (
            ("custom_allreduce", _read_custom_allreduce, (g, ws, device_kind, version)),
            ("pcie_ipc", _read_pcie_ipc, (g, ws, device_kind)),
            ("quick_allreduce", _read_quick_allreduce, (g, ws)),
            ("mscclpp", _read_mscclpp, (g, ws)),
            ("torch_symm_mem", _read_torch_symm_mem, (g, ws, device_kind)),
            ("pynccl", _read_pynccl, (g, ws)),
            ("flashinfer_allreduce", _read_flashinfer, (g,)),
            ("torch_pg", _read_torch_pg, (g, backend)),
        ):
            entry = attempt(path, reader, *args)
            if entry is not None:
                impls[path] = entry
        out["takes_everything"] = attempt("other accelerators", _read_other_accelerators, g) or []

        if version is not None:
            entry = attempt("dispatch order", dispatch_for, version)
            if entry is None:
                errors.append(f"SGLang {version_text} is older than every release this plugin knows (0.4.3): order unknown")
            else:
                out["order_source"] = entry.source
                out["order_note"] = order_note(entry, version)
                out["order"] = [_order_step(step, impls) for step in entry.order]
        out["summary"] = attempt("summary", _summary, out)
    except Exception as exc:  # noqa: BLE001 - last guard: report, never raise into SGLang
        errors.append(f"{type(exc).__name__}: {exc}")
    out["error"] = "; ".join(errors) if errors else None
    return out


def _order_step(step: DispatchStep, impls: Mapping[str, Any]) -> dict[str, Any]:
    key = _STEP_OBJECT.get(step.path, step.path)
    impl = impls.get(key, {})
    active = impl.get("enabled")
    if step.path == "pynccl_symm_mem" and active:
        # PyNccl is usable; this step additionally needs --enable-symm-mem (None: not readable,
        # as in 0.5.1-0.5.4 where the group does not hold SGLang's reader).
        active = impl.get("thresholds", {}).get("symmetric_memory")
    return {
        "path": step.path,
        "title": path_info(step.path).title,
        "implementation": key,
        "active": active,
        "when": step.when,
        "unless": list(step.unless),
    }


def _summary(d: Mapping[str, Any]) -> str:
    impls = d.get("implementations", {})
    if d.get("world_size") == 1:
        return "one rank: SGLang performs no all-reduce on this group"
    if d.get("takes_everything"):
        return f"{', '.join(d['takes_everything'])} takes every all-reduce of this group"
    if d.get("device") == "cpu":
        # Every release checks CPU tensors before the order below (parallel_state.py 0.4.10:459-553,
        # 0.5.23:673-700): SGLang's shared-memory kernel when available, else torch.distributed.
        backend = d.get("device_group_backend") or "unknown"
        return (
            "CPU device: SGLang reduces CPU tensors with its shared-memory kernel when available, else "
            f"torch.distributed on the device group ({backend}); no NCCL and none of the GPU paths above"
        )
    bypass = [
        f"{impls[p]['title']} ({impls[p]['carries']})"
        for p in ("flashinfer_allreduce", "custom_allreduce", "pcie_ipc", "quick_allreduce", "mscclpp", "torch_symm_mem")
        if impls.get(p, {}).get("enabled")
    ]
    nccl = []
    pynccl = impls.get("pynccl", {})
    if pynccl.get("enabled"):
        nccl.append("PyNccl inside CUDA graphs" + (" and eagerly (symmetric memory)" if pynccl.get("thresholds", {}).get("symmetric_memory") else ""))
    if d.get("device_group_is_nccl"):
        nccl.append("torch ProcessGroupNCCL eagerly")
    head = ("outside NCCL: " + "; ".join(bypass)) if bypass else "no all-reduce bypasses NCCL"
    if nccl:
        tail = ("the rest reaches NCCL: " if bypass else "every all-reduce reaches NCCL: ") + ", ".join(nccl)
    else:
        backend = d.get("device_group_backend") or "unknown"
        tail = f"nothing reaches NCCL here (device group backend {backend}, PyNccl {'unavailable' if pynccl.get('present') else 'absent'})"
    return f"{head}; {tail}"
