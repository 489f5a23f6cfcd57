"""Hooks that feed the phase ledger: forward passes, the draft's multi-step forward, CUDA-graph replays,
and the collectives of SGLang's group coordinators.

Installed only when the ledger is on (``when = "ledger"`` in the manifests; the installer skips
them otherwise), and called without binding arguments by name (:func:`run_ledger_hook`): these
run once per collective, so the per-call cost is a few attribute reads and one dict update.

Which implementation carried a collective is decided where SGLang decides it:

- a collective's entry point (``all_reduce``, ``all_gather``, ``reduce_scatter_tensor``,
  ``broadcast``) opens a *cell*; hooks further in (``_all_reduce_out_place`` with its method,
  ``_all_reduce_in_place``, ``all_gather_into_tensor``) write the implementation into the
  innermost open cell, the first one to know wins, and the entry point counts the collective
  once, when it returns;
- a hook further in that runs with no cell open (a compiled graph calls SGLang's registered
  custom op, which looks the group up by name and calls ``_all_reduce_out_place`` directly)
  counts the collective itself;
- on CPU, SGLang chooses between its shared-memory all-reduce and ``torch.distributed`` with its
  own ``is_shm_available(dtype, world_size, local_size)``: the hook asks that same function in
  the coordinator's module, with the same arguments, after the call;
- ``torch.distributed`` on the group's device group is named by the group's backend
  (``gloo`` on CPU, ``torch_nccl`` for ProcessGroupNCCL);
- anything else is ``unidentified``, never a guess.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from sglang_eagle_nccl.contract.launch_dir import identity
from sglang_eagle_nccl.inproc.boot.state import STATE
from sglang_eagle_nccl.inproc.evidence import ledger as ledger_mod
from sglang_eagle_nccl.inproc.evidence.ledger_phases import DRAFT_DECODE, phase_of

LEDGER = ledger_mod.LEDGER
_cells = threading.local()


def _locate() -> tuple[str, dict[str, Any]] | None:
    run_dir = STATE.audit.run_dir if STATE.audit is not None else STATE.run_dir
    if not run_dir:
        return None
    selection = STATE.selection
    return run_dir, {
        "identity": identity(), "role": STATE.role,
        "sglang_version": getattr(selection, "version", None) if selection is not None else None,
    }


def start() -> None:
    """The ledger is on in this process: its file is written to the launch directory."""
    ledger_mod.start(_locate)


# --- step contexts ---------------------------------------------------------------------------------


def _forward_batch(args: tuple, kwargs: dict) -> Any:
    return args[0] if args else kwargs.get("forward_batch")


def _tokens(fb: Any) -> int | None:
    ids = getattr(fb, "input_ids", None)
    shape = getattr(ids, "shape", None)
    return int(shape[0]) if shape else None


def _batch(fb: Any) -> int | None:
    bs = getattr(fb, "batch_size", None)
    return bs if isinstance(bs, int) else None


def _run_step(ctx: list[Any], original: Any, args: tuple, kwargs: dict) -> Any:
    try:
        result = original(*args, **kwargs)
    except BaseException:
        LEDGER.leave(ctx, completed=False)
        raise
    LEDGER.leave(ctx, completed=True)
    LEDGER.maybe_flush()
    return result


def _learn_model(runner: Any, is_draft: bool) -> None:
    which = "draft" if is_draft else "target"
    if which in LEDGER.models:
        return
    config = getattr(getattr(runner, "model_config", None), "hf_text_config", None) or getattr(
        getattr(runner, "model_config", None), "hf_config", None)
    layers = getattr(getattr(runner, "model_config", None), "num_hidden_layers", None) or getattr(config, "num_hidden_layers", None)
    hidden = getattr(config, "hidden_size", None)
    LEDGER.models[which] = {"layers": layers if isinstance(layers, int) else None,
                            "hidden": hidden if isinstance(hidden, int) else None}


def forward(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around ``ModelRunner.forward(forward_batch, ...)``: one step of the phase its forward mode says."""
    fb = _forward_batch(args, kwargs)
    mode = getattr(getattr(fb, "forward_mode", None), "name", None)
    is_draft = bool(getattr(instance, "is_draft_worker", False))
    _learn_model(instance, is_draft)
    phase = phase_of(mode, is_draft)
    return _run_step(LEDGER.enter(phase, "eager", _batch(fb), _tokens(fb)), original, args, kwargs)


def draft_forward(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around the EAGLE draft worker's ``draft_forward``: the multi-step draft (the draft model runs
    without ``ModelRunner.forward``); one call is one draft-decode step of ``topk`` tokens per request."""
    fb = _forward_batch(args, kwargs)
    mode = getattr(getattr(fb, "forward_mode", None), "name", None)
    batch = _batch(fb)
    topk = getattr(instance, "topk", None)
    tokens = batch * topk if isinstance(batch, int) and isinstance(topk, int) else None
    phase = "idle" if mode == "IDLE" else DRAFT_DECODE
    return _run_step(LEDGER.enter(phase, "eager", batch, tokens), original, args, kwargs)


def graph_replay(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around a CUDA-graph backend's ``replay``: the current step replays a captured graph."""
    LEDGER.mark_replay(type(instance).__name__)
    return original(*args, **kwargs)


# --- collectives -----------------------------------------------------------------------------------


def _cell_stack() -> list[list[Any]]:
    stack = getattr(_cells, "stack", None)
    if stack is None:
        stack = _cells.stack = []
    return stack


def _mark(impl: str | None) -> bool:
    """Write ``impl`` into the innermost open cell (first one wins); False when no cell is open."""
    stack = _cell_stack()
    if not stack:
        return False
    if impl is not None and stack[-1][0] is None:
        stack[-1][0] = impl
    return True


def _backend_impl(group: Any) -> str:
    """``torch.distributed`` on the coordinator's device group, named by that group's backend."""
    try:
        import torch.distributed as dist

        backend = str(dist.get_backend(group.device_group)).lower()
    except Exception:  # noqa: BLE001 - a group torch does not know
        return "unidentified"
    return {"gloo": "gloo", "nccl": "torch_nccl"}.get(backend, "torch")


_cpu_impls: dict[tuple[int, Any], str] = {}


def _cpu_impl(group: Any, tensor: Any) -> str:
    """SGLang's own CPU choice: its shared-memory collective when ``is_shm_available`` says so.

    That choice is a function of the dtype and the group's sizes, and the device group's backend
    never changes: asked once per group and dtype (the group is alive as long as SGLang holds it,
    so its ``id`` is not reused meanwhile)."""
    key = (id(group), tensor.dtype)
    impl = _cpu_impls.get(key)
    if impl is None:
        impl = _cpu_impls[key] = _cpu_impl_uncached(group, tensor)
    return impl


def _cpu_impl_uncached(group: Any, tensor: Any) -> str:
    shm = getattr(sys.modules.get(type(group).__module__), "is_shm_available", None)
    if shm is not None:
        try:
            if shm(tensor.dtype, group.world_size, group.local_size):
                return "shm"
        except Exception:  # noqa: BLE001 - an older signature: then torch.distributed
            pass
    return _backend_impl(group)


def _mode(tensor: Any) -> str | None:
    if getattr(tensor, "is_cuda", False):
        import torch

        if torch.cuda.is_current_stream_capturing():
            return "capture"
    return None


def _count(op: str, group: Any, tensor: Any, impl: str) -> None:
    LEDGER.collective(
        op, str(getattr(group, "unique_name", "?")), int(getattr(group, "world_size", 0)),
        int(tensor.numel()) * int(tensor.element_size()), str(tensor.dtype).replace("torch.", ""), impl,
        _mode(tensor),
    )


def _entry(op: str, tensor: Any, original: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    if getattr(instance, "world_size", 1) == 1 or tensor is None or _cell_stack():
        # One rank: SGLang returns at once, nothing is communicated. Inside another collective's
        # cell: that one counts (SGLang's all_gather calls all_gather_into_tensor on GPU).
        if _cell_stack() and tensor is not None and getattr(instance, "world_size", 1) > 1:
            _mark(_inner_impl(op, instance, tensor))
        return original(*args, **kwargs)
    cell: list[Any] = [None]
    result = _run_in(cell, original, args, kwargs)
    impl = cell[0]
    if impl is None:
        impl = _cpu_impl(instance, tensor) if getattr(tensor, "is_cpu", False) else "unidentified"
    _count(op, instance, tensor, impl)
    return result


def _run_in(cell: list[Any], original: Any, args: tuple, kwargs: dict) -> Any:
    """Call SGLang's function with ``cell`` open: an implementation's entry point reached inside marks it."""
    stack = _cell_stack()
    stack.append(cell)
    try:
        return original(*args, **kwargs)
    finally:
        stack.pop()


def _inner_impl(op: str, group: Any, tensor: Any) -> str | None:
    if getattr(tensor, "is_cpu", False):
        return None  # decided by the entry point, after the call
    pynccl = getattr(group, "pynccl_comm", None)
    if pynccl is not None and not getattr(pynccl, "disabled", True):
        return "pynccl"
    return _backend_impl(group)


def _arg(args: tuple, kwargs: dict, index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)


def all_reduce(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around ``GroupCoordinator.all_reduce(input_)``."""
    return _entry("all_reduce", _arg(args, kwargs, 0, "input_"), original, instance, args, kwargs)


def all_gather(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around ``GroupCoordinator.all_gather(input_, dim, ...)``."""
    return _entry("all_gather", _arg(args, kwargs, 0, "input_"), original, instance, args, kwargs)


def all_gather_into_tensor(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around ``GroupCoordinator.all_gather_into_tensor(output, input)``."""
    return _entry("all_gather", _arg(args, kwargs, 1, "input"), original, instance, args, kwargs)


def reduce_scatter_tensor(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around ``GroupCoordinator.reduce_scatter_tensor(output, input)``."""
    return _entry("reduce_scatter", _arg(args, kwargs, 1, "input"), original, instance, args, kwargs)


def broadcast(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around ``GroupCoordinator.broadcast(input_, src)``."""
    return _entry("broadcast", _arg(args, kwargs, 0, "input_"), original, instance, args, kwargs)


def _inner(impl: str | None, tensor: Any, original: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """An implementation's entry point: marks the open cell, or counts on its own when none is open."""
    if _mark(impl) or tensor is None:
        return original(*args, **kwargs)
    cell: list[Any] = [impl]
    result = _run_in(cell, original, args, kwargs)
    _count("all_reduce", instance, tensor, cell[0] or "unidentified")
    return result


def all_reduce_out_place(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around ``GroupCoordinator._all_reduce_out_place(input_, outplace_all_reduce_method)``.

    ``"auto"`` (the compiled path) is resolved the way SGLang resolves it, by its own
    ``_resolve_outplace_all_reduce_method``; None there means PyNccl when the group has one,
    else the in-place path (whose hook then says which)."""
    tensor = _arg(args, kwargs, 0, "input_")
    method = _arg(args, kwargs, 1, "outplace_all_reduce_method")
    if method == "auto" and tensor is not None:
        resolve = getattr(instance, "_resolve_outplace_all_reduce_method", None)
        method = resolve(tensor) if resolve is not None else None
        if method is None and getattr(instance, "pynccl_comm", None) is not None:
            method = "pynccl"
    return _inner(method if isinstance(method, str) and method != "auto" else None, tensor, original, instance, args, kwargs)


def all_reduce_in_place(original: Any, instance: Any, args: tuple, kwargs: dict, *_: Any) -> Any:
    """Around ``GroupCoordinator._all_reduce_in_place(input_)``: PyNccl when the group's is enabled,
    then torch symmetric memory when it takes this size, else ``torch.distributed`` (SGLang's order)."""
    tensor = _arg(args, kwargs, 0, "input_")
    impl: str | None = None
    if tensor is not None and not getattr(tensor, "is_cpu", False):
        pynccl = getattr(instance, "pynccl_comm", None)
        symm = getattr(instance, "torch_symm_mem_comm", None)
        if pynccl is not None and not getattr(pynccl, "disabled", True):
            impl = "pynccl"
        elif symm is not None and not getattr(symm, "disabled", True) and symm.should_torch_symm_mem_allreduce(tensor):
            impl = "torch_symm_mem"
        else:
            impl = _backend_impl(instance)
    return _inner(impl, tensor, original, instance, args, kwargs)


HANDLERS = {
    "ledger_forward": forward,
    "ledger_draft_forward": draft_forward,
    "ledger_graph_replay": graph_replay,
    "ledger_all_reduce": all_reduce,
    "ledger_all_reduce_out_place": all_reduce_out_place,
    "ledger_all_reduce_in_place": all_reduce_in_place,
    "ledger_all_gather": all_gather,
    "ledger_all_gather_into_tensor": all_gather_into_tensor,
    "ledger_reduce_scatter": reduce_scatter_tensor,
    "ledger_broadcast": broadcast,
}


def run_ledger_hook(hook: Any, original: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """The runner of ``when = "ledger"`` hooks: no argument binding, no audit record per call."""
    return HANDLERS[hook.handler](original, instance, args, kwargs)
