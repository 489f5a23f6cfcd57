"""Hooks in SGLang's launcher process: its own NCCL writes, and the launch directory.

SGLang writes NCCL variables in two places before it spawns anything (each write's place per release: patches/*.toml, proven by ci/matrix.py):
while it resolves its server arguments (``ServerArgs.__post_init__`` up to 0.5.19,
``ServerArgs.resolve_once`` from 0.5.20: deterministic inference sets ``NCCL_ALGO`` and pins the
channel count, MoE/graph options ``setdefault`` others) and in ``_set_envs_and_config`` (CUMEM,
NVLS ...). Both are reported. A write SGLang makes for correctness is never overridden silently:
a profile that sets the same variable is refused unless the user said ``sglang_wins``. Every
other write is reported and the profile restored in ``_set_envs_and_config``, the last call
before the first child is spawned.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.inproc import env_writer as envmod
from sglang_eagle_nccl.inproc.boot import activation
from sglang_eagle_nccl.inproc.boot.state import STATE, record
from sglang_eagle_nccl.inproc.refusal import stop

SERVER_FLAGS = (
    "enable_symm_mem", "enable_nccl_nvls", "enable_deterministic_inference", "tp_size", "dp_size", "pp_size",
    "nnodes", "node_rank", "use_ray",
)


class CorrectnessConflict(PluginStop, RuntimeError):
    """The profile would override a value SGLang sets for correctness (deterministic inference)."""


def _flags(server_args: Any) -> dict[str, Any]:
    return {name: getattr(server_args, name) for name in SERVER_FLAGS if server_args is not None and hasattr(server_args, name)}


def _sglang_wins() -> set[str]:
    return set(STATE.policy.get("sglang_wins", ()))


def _correctness_writes(server_args: Any) -> dict[str, str]:
    """Variables SGLang writes for correctness under the flags of ``server_args`` -> why (manifest data)."""
    selection = STATE.selection
    if selection is None or server_args is None:
        return {}
    out: dict[str, str] = {}
    for flag, variables in selection.patch_set.correctness_writes:
        if getattr(server_args, flag, False):
            out.update({v: flag for v in variables})
    return out


# --- argument resolution ---------------------------------------------------------------------


def server_args_resolution(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around SGLang's server-argument resolution: its NCCL writes there, and correctness conflicts."""
    before = envmod.nccl_snapshot()
    result = original(*args, **kwargs)
    writes = envmod.diff(before, envmod.nccl_snapshot())
    if not writes:
        return result
    STATE.sglang_written.update(c.name for c in writes)
    correctness = _correctness_writes(instance)
    keep = _sglang_wins()
    expected = STATE.expected_env
    entries = []
    conflicts = []
    for change in writes:
        why = correctness.get(change.name)
        entries.append({**change.to_dict(), "for_correctness": why})
        if why and change.name in expected and change.name not in keep and expected[change.name] != change.after:
            conflicts.append((change, why))
    record("sglang_env_writes", where="server_args", writes=entries, server_flags=_flags(instance))
    for change in writes:
        shown = "(removed)" if change.after is None else change.after
        log(f"SGLang set {change.name}={shown} while resolving its server arguments"
            + (f" (was {change.before})" if change.before is not None else ""))
    if conflicts:
        name = (STATE.data or {}).get("name")
        lines = [
            f"SGLang sets these NCCL variables for correctness, and the NCCL profile '{name}' would silently "
            "override them:"
        ]
        for change, why in conflicts:
            lines.append(
                f"  - {change.name}: SGLang sets {change.after!r} for --{why.replace('_', '-')}; the profile sets "
                f"{expected[change.name]!r}"
            )
        listed = [c.name for c, _ in conflicts]
        toml_list = ", ".join(f'"{n}"' for n in listed)
        flags = " ".join(f"--sglang-wins {n}" for n in listed)
        lines.append(
            f"  Fix: keep SGLang's values with sglang_wins (profile [policy] sglang_wins = [{toml_list}], "
            f"SGLANG_EAGLE_NCCL_SGLANG_WINS={','.join(listed)}, or `sglang-eagle-nccl launch {flags}`), or drop "
            f"{', '.join(listed)} from the profile. Nothing was started."
        )
        record("correctness_conflict", variables=[c.name for c, _ in conflicts], message="\n".join(lines))
        stop(CorrectnessConflict("\n".join(lines)))
    return result


# --- _set_envs_and_config ----------------------------------------------------------------------


def _open_launch_here(server_args: Any) -> None:
    """SGLang's launcher is a launch: open its audit directory unless it inherited one."""
    from sglang_eagle_nccl.contract.launch_dir import open_launch

    policy = STATE.policy
    meta = {
        "profile": STATE.data,
        "launcher": "SGLang launcher (_set_envs_and_config)",
        "launcher_pid": os.getpid(),
        "invocation": activation.invocation(),
        "server_flags": _flags(server_args),
    }
    run_dir = open_launch(policy.get("audit_dir"), meta, required=bool(policy.get("audit_required")))
    if run_dir is not None:
        activation.join_launch(run_dir)
        log(f"profile '{(STATE.data or {}).get('name')}' in force; audit: {run_dir} "
            f"(read it with `sglang-eagle-nccl audit {run_dir}`)")


def engine_env(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``_set_envs_and_config``: open the launch, report SGLang's NCCL writes, restore the profile."""
    server_args = arguments.get("server_args")
    node_rank = getattr(server_args, "node_rank", None)
    if STATE.is_root and isinstance(node_rank, int) and (getattr(server_args, "nnodes", 1) or 1) > 1:
        # Engine API on a multi-node launch: the node rank is known only now; it selects the
        # profile's [nodes.<rank>.env] here and, through the serialised profile, in every child.
        activation.set_node_rank(node_rank, reason="--node-rank of the server arguments")
    if STATE.run_dir is None and STATE.is_root:
        _open_launch_here(server_args)
    before = envmod.nccl_snapshot()
    result = original(*args, **kwargs)
    writes = envmod.diff(before, envmod.nccl_snapshot())
    STATE.sglang_written.update(c.name for c in writes)
    keep = _sglang_wins()
    overwrites = envmod.restore(STATE.expected_env, keep=keep)
    record(
        "sglang_env_writes",
        where="_set_envs_and_config",
        writes=[{**c.to_dict(), "for_correctness": None} for c in writes],
        server_flags=_flags(server_args),
    )
    record("env_restored", overwrites=[o.to_dict() for o in overwrites], env=envmod.nccl_snapshot())
    name = (STATE.data or {}).get("name")
    for change in writes:
        shown = "(removed)" if change.after is None else change.after
        log(f"SGLang set {change.name}={shown}" + (f" (was {change.before})" if change.before is not None else ""))
    for o in overwrites:
        if o.restored:
            log(f"restored {o.name}={o.profile_value} from profile '{name}' (SGLang had {o.foreign_value})")
        else:
            log(f"kept SGLang's {o.name}={o.foreign_value} over the profile's {o.profile_value} (policy sglang_wins)")
    return result
