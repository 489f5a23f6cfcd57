"""What the plugin does at each hook point. Version-independent; named by the patch manifests.

Handler conventions (the manifest ``kind`` says which one a handler follows):

- ``before``: ``handler(instance, arguments)`` runs before the original; its return is ignored;
- ``after``: ``handler(result, instance, arguments)`` runs after the original; the result is
  never replaced;
- ``around``: ``handler(original, instance, args, kwargs, arguments)`` calls ``original``.

``arguments`` maps parameter names to values (bound from the real signature, so positional
and keyword calls look the same). Only ``__init__`` methods, the launcher's env set-up and
the CLI are hooked: never a collective, never a forward pass.

A bug in a before/after handler is reported and swallowed so it cannot take SGLang down;
deliberate stops (:class:`ConsistencyError`, profile errors) always propagate.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from sglang_eagle_nccl.errors import PluginStop
from sglang_eagle_nccl.runtime import environ as envmod
from sglang_eagle_nccl.runtime.patching import bind
from sglang_eagle_nccl.runtime.state import STATE, current_group_var

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from sglang_eagle_nccl.runtime.patchsets import Hook

DELIBERATE = (PluginStop, SystemExit, KeyboardInterrupt)


def log(message: str) -> None:
    print(f"[sglang-eagle-nccl] {message}", file=sys.stderr, flush=True)


def audit(event: str, **fields: Any) -> None:
    if STATE.audit is not None:
        STATE.audit.write(event, **fields)


def _expected_process_env() -> dict[str, str]:
    assert STATE.profile is not None
    return STATE.profile.process_env(STATE.node_rank)


def _report_bug(hook: Hook, exc: BaseException) -> None:
    log(f"internal error in hook {hook.handler} on {hook.target} (ignored, SGLang continues): {exc!r}")
    audit("plugin_error", hook=hook.target, handler=hook.handler, error=repr(exc), traceback=traceback.format_exc())


def run_hook(hook: Hook, original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """Entry point of every installed wrapper (both mechanisms)."""
    handler = HANDLERS[hook.handler]
    if not STATE.active and hook.when != "cli":
        return original(*args, **kwargs)
    if hook.kind == "around":
        return handler(original, instance, args, kwargs, bind(original, args, kwargs))
    if hook.kind == "before":
        try:
            handler(instance, bind(original, args, kwargs))
        except DELIBERATE:
            raise
        except Exception as exc:  # noqa: BLE001 - isolation of plugin bugs
            _report_bug(hook, exc)
        return original(*args, **kwargs)
    result = original(*args, **kwargs)
    try:
        handler(result, instance, bind(original, args, kwargs))
    except DELIBERATE:
        raise
    except Exception as exc:  # noqa: BLE001
        _report_bug(hook, exc)
    return result


# --- launcher ---------------------------------------------------------------------------------


def engine_env(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``_set_envs_and_config``: report SGLang's NCCL writes, restore the profile."""
    server_args = arguments.get("server_args")
    node_rank = getattr(server_args, "node_rank", None)
    if isinstance(node_rank, int) and STATE.node_rank is None and (getattr(server_args, "nnodes", 1) or 1) > 1:
        # Engine API on a multi-node launch: the node rank is known only now; it selects the
        # profile's [nodes.<rank>.env] here and, through the environment, in every child.
        from sglang_eagle_nccl.names import ENV_NODE_RANK

        STATE.node_rank = node_rank
        os.environ[ENV_NODE_RANK] = str(node_rank)
    before = envmod.nccl_snapshot()
    result = original(*args, **kwargs)
    after = envmod.nccl_snapshot()
    profile = STATE.profile
    assert profile is not None
    writes = envmod.diff(before, after)
    expected = _expected_process_env()
    keep = set(profile.policy.sglang_wins)
    overwrites = envmod.restore(expected, keep=keep)
    flags = {
        name: getattr(server_args, name)
        for name in ("enable_symm_mem", "enable_nccl_nvls", "enable_deterministic_inference", "tp_size", "dp_size", "pp_size", "nnodes", "node_rank")
        if server_args is not None and hasattr(server_args, name)
    }
    audit(
        "sglang_env_writes",
        where="_set_envs_and_config",
        writes=[c.to_dict() for c in writes],
        server_flags=flags,
    )
    audit(
        "env_restored",
        overwrites=[o.to_dict() for o in overwrites],
        env=envmod.nccl_snapshot(),
    )
    for change in writes:
        shown = "(removed)" if change.after is None else change.after
        log(f"SGLang set {change.name}={shown}" + (f" (was {change.before})" if change.before is not None else ""))
    for o in overwrites:
        if o.restored:
            log(f"restored {o.name}={o.profile_value} from profile '{profile.name}' (SGLang had {o.foreign_value})")
        else:
            log(f"kept SGLang's {o.name}={o.foreign_value} over the profile's {o.profile_value} (policy sglang_wins)")
    return result


# --- scheduler child --------------------------------------------------------------------------


def scheduler_env(instance: Any, arguments: dict) -> None:
    """Before ``Scheduler.__init__``: the profile is in ``os.environ`` before any NCCL call."""
    profile = STATE.profile
    assert profile is not None
    overwrites = envmod.restore(_expected_process_env(), keep=set(profile.policy.sglang_wins))
    ranks = {k: arguments[k] for k in ("gpu_id", "tp_rank", "pp_rank", "dp_rank", "moe_ep_rank") if arguments.get(k) is not None}
    if STATE.role in ("process", "child"):
        STATE.role = "scheduler"
        if STATE.audit:
            STATE.audit.role = "scheduler"
    audit("scheduler_start", ranks=ranks, overwrites=[o.to_dict() for o in overwrites], env=envmod.nccl_snapshot())
    for o in overwrites:
        if o.restored:
            log(f"scheduler: restored {o.name}={o.profile_value} (found {o.foreign_value})")


def process_role(result: Any, instance: Any, arguments: dict) -> None:
    """After ``setproctitle``: SGLang names its processes ``sglang::<role>``."""
    title = str(arguments.get("title", arguments.get("arg0", "")))
    if not title.startswith("sglang::"):
        return
    role = title[len("sglang::"):] or "sglang"
    STATE.role = role
    if STATE.audit:
        STATE.audit.role = role.split("_TP")[0] if role.startswith("scheduler") else role
    audit("process_role", title=title)


def _backend_name(group: Any) -> str | None:
    try:
        import torch.distributed as dist

        return str(dist.get_backend(group))
    except Exception:  # noqa: BLE001 - diagnostics only
        return None


def _consistency(group_name: str, cpu_group: Any, env: dict[str, str]) -> None:
    # Imported on first use: hashlib/json/threading are not needed to install the hooks.
    from sglang_eagle_nccl.audit import consistency
    from sglang_eagle_nccl.audit.consistency import ConsistencyError, format_error

    profile = STATE.profile
    assert profile is not None
    mode = profile.policy.consistency
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
        result = consistency.check_group(cpu_group, group_name, env, timeout_s=profile.policy.consistency_timeout_s)
    except ConsistencyError as exc:
        audit("consistency_failed", group=group_name, error=str(exc))
        log(f"group '{group_name}': {exc}")
        raise ConsistencyError(f"SGLang group '{group_name}': {exc}") from exc
    if result.ok:
        audit("consistency_ok", group=group_name, ranks=list(result.ranks), fingerprint=result.fingerprint)
        return
    message = format_error(group_name, result.mismatches, result.payloads)
    audit(
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
    profile = STATE.profile
    assert profile is not None
    name = arguments.get("group_name") or "anonymous"
    overrides = profile.group_env(name)
    saved = {k: os.environ.get(k) for k in overrides}
    token = current_group_var().set(name)
    # Per-group values are in os.environ only while this group is built, so the eager PyNccl
    # communicator created inside __init__ reads them; torch's communicator is created lazily at
    # the first collective, after they are gone (the audit says so).
    envmod.apply(overrides)
    try:
        result = original(*args, **kwargs)
        env_at_creation = envmod.nccl_snapshot()
        _consistency(name, getattr(instance, "cpu_group", None), env_at_creation)
    finally:
        current_group_var().reset(token)
        envmod.put_back(saved)
    backend = arguments.get("torch_distributed_backend")
    device_backend = _backend_name(getattr(instance, "device_group", None))
    nccl_device = "nccl" in str(device_backend or backend or "").lower()
    _note_first_comm(env_at_creation)
    audit(
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
        process_env=_expected_process_env(),
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
    audit(
        "pynccl_created",
        group=name,
        world_size=getattr(instance, "world_size", None),
        rank=getattr(instance, "rank", None),
        available=bool(getattr(instance, "available", False)),
        disabled=bool(getattr(instance, "disabled", True)),
        device=str(device) if device is not None else None,
        library=os.environ.get("SGLANG_NCCL_SO_PATH") or "default (libnccl.so.2 / torch's)",
        group_overrides=STATE.profile.group_env(name) if STATE.profile else {},
        env=env,
        process_env=_expected_process_env(),
    )
    return result


def torch_pg_options(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``get_torch_distributed_pg_options(group_name)``: note each torch device group."""
    result = original(*args, **kwargs)
    audit("torch_pg_options", group=arguments.get("group_name"), options=None if result is None else type(result).__name__)
    return result


# --- EAGLE workers ----------------------------------------------------------------------------

_GROUP_ATTRS = ("tp_group", "attn_tp_group", "attention_tp_group", "group", "parallel_layout", "draft_tp_group")
_WALK_ATTRS = (
    "draft_worker", "draft_runner", "draft_model_runner", "model_runner", "target_worker", "worker",
    "tp_worker", "parallel_layout", "_draft_worker", "draft_runner_list",
)


def _is_group(obj: Any) -> bool:
    return hasattr(obj, "unique_name") and hasattr(obj, "ranks") and hasattr(obj, "cpu_group")


def find_groups(root: Any, max_depth: int = 4) -> dict[str, dict[str, Any]]:
    """GroupCoordinators reachable from an EAGLE worker through its runner attributes."""
    found: dict[str, dict[str, Any]] = {}
    seen: set[int] = set()

    def walk(obj: Any, path: str, depth: int) -> None:
        if obj is None or id(obj) in seen or depth > max_depth:
            return
        seen.add(id(obj))
        if _is_group(obj):
            found[path] = _describe(obj)
            return
        if isinstance(obj, (list, tuple)):
            for i, item in enumerate(obj[:8]):
                walk(item, f"{path}[{i}]", depth + 1)
            return
        for attr in _GROUP_ATTRS + _WALK_ATTRS:
            try:
                child = getattr(obj, attr, None)
            except Exception:  # noqa: BLE001 - properties may raise before init completes
                continue
            if child is not None:
                walk(child, f"{path}.{attr}" if path else attr, depth + 1)

    walk(root, "", 0)
    return found


def _describe(group: Any) -> dict[str, Any]:
    unique = getattr(group, "unique_name", "?")
    return {"group": unique.split(":")[0], "unique_name": unique, "ranks": list(getattr(group, "ranks", []))}


def _find_attr(root: Any, name: str, depth: int = 3) -> Any:
    """``name`` on ``root`` or on one of its worker/runner attributes (breadth first)."""
    frontier = [root]
    for _ in range(depth):
        nxt = []
        for obj in frontier:
            value = getattr(obj, name, None)
            if value is not None:
                return value
            nxt += [getattr(obj, a, None) for a in _WALK_ATTRS if getattr(obj, a, None) is not None]
        frontier = nxt
    return None


def eagle_worker(result: Any, instance: Any, arguments: dict) -> None:
    """After an EAGLE worker's ``__init__``: which existing groups draft and verify run on."""
    groups = find_groups(instance)
    draft = {p: g for p, g in groups.items() if "draft" in p}
    verify = {p: g for p, g in groups.items() if "target" in p or "draft" not in p}
    current_tp = None
    try:
        from sglang.srt.distributed import parallel_state as ps  # type: ignore[import-not-found]

        current_tp = _describe(ps.get_tp_group())
    except Exception:  # noqa: BLE001
        pass
    if not draft:
        # SGLang >= 0.5.23 keeps groups in its runtime context: the draft's layout names its own
        # group only when it runs independently (DP attention); otherwise it shares the target's.
        layout = _find_attr(instance, "parallel_layout")
        layout_group = getattr(layout, "tp_group", None) if layout is not None else None
        if layout_group is not None:
            draft = {"parallel_layout.tp_group": _describe(layout_group)}
        elif current_tp:
            draft = {"target tp group (draft_tp_context keeps it)": current_tp}
    if not verify and current_tp:
        verify = {"target tp group (parallel_state.get_tp_group())": current_tp}
    audit(
        "eagle_groups",
        worker=type(instance).__name__,
        module=type(instance).__module__,
        draft=draft,
        verify=verify,
        current_tp=current_tp,
        new_groups=False,
    )
    names = sorted({g["unique_name"] for g in {**draft, **verify}.values() if g.get("unique_name")})
    log(f"{type(instance).__name__}: draft/verify run on existing group(s) {', '.join(names) or '(none found)'}")


# --- SGLang CLI -------------------------------------------------------------------------------

FLAG_HELP = {
    "--nccl-profile": "NCCL profile for every SGLang process (sglang-eagle-nccl): a built-in name "
    "(sglang-eagle-nccl profiles list) or a TOML file. Repeat to layer profiles.",
    "--nccl-env": "KEY=VALUE NCCL setting on top of the profile (repeatable), validated with NCCL's "
    "own parsing rules, e.g. --nccl-env NCCL_ALGO=Tree.",
    "--nccl-audit-dir": "Directory for the per-process audit of NCCL settings (default: "
    "<tmp>/sglang-eagle-nccl-<uid>); a relative DIR is made absolute against the current working "
    "directory. Read it with `sglang-eagle-nccl audit DIR`.",
    "--nccl-allow-partial": "Run even if this SGLang release is newer than the plugin knows and some "
    "hook targets are missing; the audit records what is uncovered.",
}


def cli_add_flags(result: Any, instance: Any, arguments: dict) -> None:
    """After ``ServerArgs.add_cli_args(parser)``: add the plugin's launch flags (idempotent)."""
    parser = arguments.get("parser")
    if parser is None or "--nccl-profile" in getattr(parser, "_option_string_actions", {}):
        return
    group = parser.add_argument_group(
        "NCCL settings (sglang-eagle-nccl)",
        "Apply and audit an NCCL profile in every process SGLang spawns.",
    )
    group.add_argument("--nccl-profile", action="append", default=None, metavar="NAME_OR_FILE", help=FLAG_HELP["--nccl-profile"])
    group.add_argument("--nccl-env", action="append", default=None, metavar="KEY=VALUE", help=FLAG_HELP["--nccl-env"])
    group.add_argument("--nccl-audit-dir", default=None, metavar="DIR", help=FLAG_HELP["--nccl-audit-dir"])
    group.add_argument("--nccl-allow-partial", action="store_true", default=False, help=FLAG_HELP["--nccl-allow-partial"])


def cli_capture(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``ServerArgs.from_cli_args(args)``: read the flags before SGLang drops them."""
    namespace = arguments.get("args")
    profiles = getattr(namespace, "nccl_profile", None) or []
    env_flags = getattr(namespace, "nccl_env", None) or []
    audit_dir = getattr(namespace, "nccl_audit_dir", None)
    allow_partial = bool(getattr(namespace, "nccl_allow_partial", False))
    if profiles or env_flags or audit_dir or allow_partial:
        from sglang_eagle_nccl.runtime.bootstrap import activate_from_cli

        node_rank = getattr(namespace, "node_rank", None)
        activate_from_cli(
            profiles, env_flags, audit_dir=audit_dir, allow_partial=allow_partial,
            node_rank=node_rank if isinstance(node_rank, int) else None,
        )
    return original(*args, **kwargs)


HANDLERS: dict[str, Callable[..., Any]] = {
    "engine_env": engine_env,
    "scheduler_env": scheduler_env,
    "process_role": process_role,
    "group_created": group_created,
    "pynccl_created": pynccl_created,
    "torch_pg_options": torch_pg_options,
    "eagle_worker": eagle_worker,
    "cli_add_flags": cli_add_flags,
    "cli_capture": cli_capture,
}
