"""Hooks where SGLang creates communicators: every GroupCoordinator and its eager PyNccl communicator.

For each group (``world``, ``tp``, ``pp``, ``attention_tp``, ``moe_*`` ...): the group's per-group
overrides are in ``os.environ`` while it is built (so the eager PyNccl communicator created
inside ``GroupCoordinator.__init__`` reads them), the ranks check that they agree on every
must-match NCCL variable before NCCL builds anything (NCCL never checks: a mismatch hangs or
corrupts data), and the audit records what each communicator was created with.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.inproc import env_writer as envmod
from sglang_eagle_nccl.inproc.boot import native
from sglang_eagle_nccl.inproc.boot.state import STATE, current_group_var, record


def _group_env(name: str) -> dict[str, str]:
    return dict((STATE.data or {}).get("groups", {}).get(name, {}))


def _backend_name(group: Any) -> str | None:
    try:
        import torch.distributed as dist

        return str(dist.get_backend(group))
    except Exception:  # noqa: BLE001 - diagnostics only
        return None


def _node_identity() -> dict[str, Any]:
    """Where this rank runs, for the consistency error: its node rank, and its Ray node when it is a
    Ray actor (the Ray nodes of one machine, or containers, share a hostname)."""
    node: dict[str, Any] = {"node_rank": STATE.node_rank}
    ray = sys.modules.get("ray")
    if ray is not None:
        try:
            if ray.is_initialized():
                node["ray_node"] = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - diagnostics only
            pass
    return node


def _consistency(group_name: str, cpu_group: Any, env: dict[str, str]) -> None:
    # Imported on first use: hashlib/json/threading are not needed to install the hooks.
    from sglang_eagle_nccl.inproc.evidence import consistency
    from sglang_eagle_nccl.inproc.evidence.consistency import ConsistencyError, format_error

    policy = STATE.policy
    mode = policy.get("consistency", "error")
    if mode == "off" or cpu_group is None:
        return
    key = id(cpu_group)
    if key in STATE.checked_groups:
        return
    STATE.checked_groups.add(key)
    try:
        import torch.distributed as dist

        if not isinstance(cpu_group, dist.ProcessGroup):
            return  # a StatelessProcessGroup (no torch collectives to use)
        from sglang_eagle_nccl.inproc.boot.native import consistency_extras

        result = consistency.check_group(
            cpu_group, group_name, env, timeout_s=float(policy.get("consistency_timeout_s", 60.0)),
            extras=consistency_extras(), node=_node_identity(),
        )
    except ConsistencyError as exc:
        record("consistency_failed", group=group_name, error=str(exc), mode=mode)
        log(f"group '{group_name}': {exc}")
        if mode == "error":
            raise ConsistencyError(f"SGLang group '{group_name}': {exc}") from exc
        return
    if result.ok:
        record("consistency_ok", group=group_name, ranks=list(result.ranks), fingerprint=result.fingerprint)
        return
    message = format_error(group_name, result.mismatches, result.payloads)
    record(
        "consistency_mismatch",
        group=group_name,
        ranks=list(result.ranks),
        mismatches=[m.to_dict() for m in result.mismatches],
        mode=mode,
    )
    log(message)
    if mode == "error":
        raise ConsistencyError(message)


def _note_first_comm(env: dict[str, str]) -> None:
    if STATE.first_comm_env is None:
        STATE.first_comm_env = dict(env)


def group_created(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``GroupCoordinator.__init__``: per-group overrides in scope, consistency, audit."""
    name = arguments.get("group_name") or "anonymous"
    overrides = _group_env(name)
    saved = {k: os.environ.get(k) for k in overrides}
    token = current_group_var().set(name)
    # Per-group values are in os.environ only while this group is built, so the eager PyNccl
    # communicator created inside __init__ reads them; torch's communicator is created lazily at
    # the first collective, after they are gone (the audit says so). The native plugins get the
    # group's label for the same window: the env plugin serves the group's values, and the tuner
    # records the label at its init so group rules reach this eager communicator.
    envmod.apply(overrides)
    native.select_group(name)
    try:
        result = original(*args, **kwargs)
        env_at_creation = envmod.nccl_snapshot()
        _consistency(name, getattr(instance, "cpu_group", None), env_at_creation)
    finally:
        native.select_group(None)
        current_group_var().reset(token)
        envmod.put_back(saved)
    backend = arguments.get("torch_distributed_backend")
    device_backend = _backend_name(getattr(instance, "device_group", None))
    nccl_device = "nccl" in str(device_backend or backend or "").lower()
    _note_first_comm(env_at_creation)
    from sglang_eagle_nccl.inproc.evidence.allreduce_readers import describe_group

    record(
        "group_created",
        group=name,
        unique_name=getattr(instance, "unique_name", None),
        ranks=list(getattr(instance, "ranks", []) or []),
        rank_in_group=getattr(instance, "rank_in_group", None),
        world_size=getattr(instance, "world_size", None),
        global_rank=getattr(instance, "rank", None),
        backend=str(backend) if backend is not None else None,
        device_group_backend=device_backend,
        cpu_group_backend=_backend_name(getattr(instance, "cpu_group", None)),
        torch_comm="lazy-nccl" if nccl_device else "none",
        use_pynccl=bool(getattr(instance, "use_pynccl", False)),
        has_pynccl=getattr(instance, "pynccl_comm", None) is not None,
        group_overrides=overrides,
        env=env_at_creation,
        allreduce_paths=describe_group(instance, sglang_version=STATE.selection.version if STATE.selection else None),
    )
    return result


def pynccl_created(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``PyNcclCommunicator.__init__``: check ranks agree first, then audit the comm."""
    name = current_group_var().get() or "(outside a GroupCoordinator)"
    env = envmod.nccl_snapshot()
    group = arguments.get("group")
    # Check before NCCL builds the communicator: its warm-up all-reduce is where a mismatch hangs.
    _consistency(name, group, env)
    _note_first_comm(env)
    result = original(*args, **kwargs)
    device = arguments.get("device")
    record(
        "pynccl_created",
        group=name,
        world_size=getattr(instance, "world_size", None),
        rank=getattr(instance, "rank", None),
        available=bool(getattr(instance, "available", False)),
        disabled=bool(getattr(instance, "disabled", True)),
        device=str(device) if device is not None else None,
        library=os.environ.get("SGLANG_NCCL_SO_PATH") or "default (libnccl.so.2 / torch's)",
        group_overrides=_group_env(name),
        env=env,
    )
    return result


def torch_pg_options(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``get_torch_distributed_pg_options(group_name)``: note each torch device group."""
    result = original(*args, **kwargs)
    record("torch_pg_options", group=arguments.get("group_name"), options=None if result is None else type(result).__name__)
    return result
