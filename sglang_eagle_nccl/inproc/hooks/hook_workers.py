"""Hooks in SGLang's worker processes: the scheduler's start, each process's role, the EAGLE workers."""

from __future__ import annotations

from typing import Any

from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.inproc import env_writer as envmod
from sglang_eagle_nccl.inproc.boot.state import STATE, record


def scheduler_env(instance: Any, arguments: dict) -> None:
    """Before ``Scheduler.__init__``: the profile is in ``os.environ`` before any NCCL call."""
    overwrites = envmod.restore(STATE.expected_env, keep=set(STATE.policy.get("sglang_wins", ())))
    ranks = {k: arguments[k] for k in ("gpu_id", "tp_rank", "pp_rank", "dp_rank", "moe_ep_rank") if arguments.get(k) is not None}
    if STATE.role in ("process", "child"):
        STATE.role = "scheduler"
        if STATE.audit:
            STATE.audit.role = "scheduler"
    record("scheduler_start", ranks=ranks, overwrites=[o.to_dict() for o in overwrites], env=envmod.nccl_snapshot())
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
    record("process_role", title=title)


# --- EAGLE workers ----------------------------------------------------------------------------

# Attributes through which an EAGLE worker holds its draft / target parts and their groups, any
# SGLang version (the EAGLE worker classes of srt/speculative/, 0.4.3 -> 0.5.23). Only objects really reachable from the worker are
# reported: a group the worker does not hold is "unknown", never guessed from global state.
_GROUP_ATTRS = ("tp_group", "attn_tp_group", "attention_tp_group", "draft_tp_group")
_WALK_ATTRS = (
    "draft_worker", "_draft_worker", "draft_runner", "draft_model_runner", "model_runner", "target_worker",
    "_target_worker", "worker", "tp_worker", "draft_runner_list",
)


def _is_group(obj: Any) -> bool:
    return hasattr(obj, "unique_name") and hasattr(obj, "ranks") and hasattr(obj, "cpu_group")


def _describe(group: Any) -> dict[str, Any]:
    unique = getattr(group, "unique_name", "?")
    return {"group": str(unique).split(":")[0], "unique_name": unique, "ranks": list(getattr(group, "ranks", []))}


def find_groups(root: Any, max_depth: int = 4) -> dict[str, dict[str, Any]]:
    """GroupCoordinators reachable from an EAGLE worker through its worker/runner attributes."""
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


def _draft_layout(worker: Any) -> Any:
    """The draft's parallel layout (SGLang >= 0.5.23), reached through the worker only."""
    for path in (("draft_parallel_layout",), ("_draft_worker", "parallel_layout"), ("draft_worker", "parallel_layout"),
                 ("parallel_layout",)):
        obj = worker
        try:
            for attr in path:
                obj = getattr(obj, attr, None)
                if obj is None:
                    break
        except Exception:  # noqa: BLE001
            obj = None
        if obj is not None:
            return obj
    return None


def eagle_worker(result: Any, instance: Any, arguments: dict) -> None:
    """After an EAGLE worker's ``__init__``: which existing groups draft and verify run on."""
    groups = find_groups(instance)
    draft: dict[str, Any] = {p: g for p, g in groups.items() if "draft" in p}
    verify: dict[str, Any] = {p: g for p, g in groups.items() if "draft" not in p}
    draft_note = None
    if not draft:
        layout = _draft_layout(instance)
        if layout is not None and hasattr(layout, "tp_group"):
            if layout.tp_group is not None and _is_group(layout.tp_group):
                draft = {"parallel_layout.tp_group": _describe(layout.tp_group)}
            elif layout.tp_group is None:
                # SGLang >= 0.5.23: a layout without a group of its own runs the draft in the target's
                # scope (draft_tp_context switches nothing); which group that is, the worker does not hold.
                draft_note = "shares the target's groups (its parallel layout names no group of its own)"
    record(
        "eagle_groups",
        worker=type(instance).__name__,
        module=type(instance).__module__,
        draft=draft,
        verify=verify,
        draft_note=draft_note,
        new_groups=False,
    )
    names_ = sorted({g["unique_name"] for g in {**draft, **verify}.values() if g.get("unique_name")})
    log(f"{type(instance).__name__}: draft/verify run on existing group(s) {', '.join(names_) or '(not held by the worker)'}")
