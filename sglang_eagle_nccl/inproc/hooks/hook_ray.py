"""Hooks where SGLang starts processes as Ray actors: its scheduler actors, and the engine actor of
its offline benchmark.

A Ray actor is started by the raylet of its node with the raylet's environment plus the job's and
the actor's ``runtime_env["env_vars"]``, never the driver's ``os.environ`` (Ray's runtime-environment semantics). SGLang
creates its scheduler actors with no ``runtime_env`` (``srt/ray/engine.py``, 0.5.10 -> 0.5.23), so
without this module neither the profile, nor the gate, nor SGLang's own NCCL writes in the driver
reach any scheduler. Two kinds of hook make up for it:

- a *scope* around the SGLang call that creates the actors (``RayEngine._launch_scheduler_processes``,
  which also runs SGLang's in-process Ray DP controller; ``_create_ray_engine_backend`` of the
  offline benchmark). It decides, before anything is started, what every actor of the call gets,
  and fails closed there (nothing started) when it cannot;
- ``ray.actor.ActorClass.options``, inert outside a scope: inside one, the actor being configured
  gets a ``runtime_env`` whose ``env_vars`` are what a spawned scheduler would inherit, built by the
  one child-environment builder (:func:`~sglang_eagle_nccl.decision.child_env.child_environment`):
  the validated, signed hand-off, the gate, the inputs it was resolved from, the root marker, the
  launch directory, the node rank, and the NCCL values: the profile's for that node plus SGLang's
  own writes in the driver after the profile's policy (restored, or ``sglang_wins``). Not every
  NCCL variable of the driver: node-local values (``NCCL_SOCKET_IFNAME`` ...) of the driver's node
  must not be copied to other nodes.

Ray merges an actor's ``env_vars`` over the job's (``_merge_runtime_env``, per variable), so the
user's values stay; where a user value meets one of these (a profile variable, an input), the
profile wins as it does everywhere else, and that is reported (log line + ``ray_actor_env`` record).
Ray rewrites ``$NAME`` and ``${...}`` in those values when a worker starts: a value of ours holding
one is refused here, before any actor starts. Every decision of this paragraph and the next is a
pure function of :mod:`~sglang_eagle_nccl.decision.ray_env`.

Node ranks on Ray: SGLang numbers the nodes of its automatic placement group ``0 .. nnodes-1``
with node 0 the driver's (rank 0's) bundle and the others in bundle order (``bundle_for_node``); a
custom placement group has no node numbers at all (one GPU per bundle, ranks over
``SGLANG_RAY_BUNDLE_INDICES``). Here a node is a Ray node, and its rank is: 0 for the node of the
first scheduler actor SGLang creates (TP/PP rank 0), then every other node of the placement group
in the order of its lowest bundle index (:func:`number_nodes`) -- SGLang's own numbering on the
automatic group, one bundle per node.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.decision.plan import process_env
from sglang_eagle_nccl.decision.ray_env import (
    actor_runtime_env,
    foreign_inputs,
    number_nodes,
    overlay_sglang_writes,
    ray_rewritten,
)
from sglang_eagle_nccl.inproc.boot.state import STATE, record
from sglang_eagle_nccl.inproc.refusal import stop

# How long the scope waits for SGLang's placement group to be placed before giving up (the node of
# each bundle decides which [nodes.<rank>.env] its actor gets).
PLACEMENT_TIMEOUT_S = 120.0

_scope_var: Any = None


def _scope() -> Any:
    global _scope_var
    if _scope_var is None:
        import contextvars

        _scope_var = contextvars.ContextVar("sglang_eagle_nccl_ray_scope", default=None)
    return _scope_var


class RayEnvError(PluginStop, RuntimeError):
    """The plugin cannot give SGLang's Ray actors the environment a spawned scheduler would get."""


# --- deciding (pure: ray_env) -------------------------------------------------------------------


def actor_nccl_values(data: Mapping[str, Any], node_rank: int | None, run_dir: str | None,
                      sglang_written: Mapping[str, str | None], keep: set[str]) -> dict[str, str]:
    """The NCCL values an actor of node ``node_rank`` must start with: the profile's for that node,
    with what SGLang wrote in the driver (:func:`~sglang_eagle_nccl.decision.ray_env.overlay_sglang_writes`)."""
    return overlay_sglang_writes(process_env(data, node_rank, run_dir), sglang_written, keep)


# --- doing --------------------------------------------------------------------------------------


class _Scope:
    """What one SGLang call that creates Ray actors hands them; decided before the first one."""

    def __init__(self, role: str, where: str) -> None:
        self.role = role  # "scheduler" or "engine"
        self.where = where
        self.profile = STATE.profile
        if self.profile is None or STATE.data is None:
            raise RayEnvError(
                f"{where}: SGLang is creating Ray actors in a process where the NCCL profile is not active, so "
                "they would start without it. Fix: enable the plugin in this process (launch flags, "
                "SGLANG_EAGLE_NCCL, or `sglang-eagle-nccl launch`)."
            )
        self.keep = set(STATE.policy.get("sglang_wins", ()))
        self.sglang_written = {k: os.environ.get(k) for k in sorted(STATE.sglang_written)}
        # placement group id -> (bundle index -> Ray node id, Ray node id -> node rank)
        self.placements: dict[str, tuple[dict[int, str], dict[str, int]]] = {}
        self.count = 0
        # Decided now, once: a failure here stops SGLang before any actor exists.
        self.check_job_env(self.environment(node_rank=None, root=self.role == "engine"))

    def environment(self, node_rank: int | None, root: bool) -> dict[str, str]:
        from sglang_eagle_nccl.decision.child_env import child_environment

        values = actor_nccl_values(STATE.data or {}, node_rank, None if root else STATE.run_dir,
                                   self.sglang_written, self.keep)
        updates = child_environment(
            self.profile, run_dir=None if root else STATE.run_dir, node_rank=node_rank, environ=os.environ,
            # Scheduler actors are children of this launch; the offline benchmark's engine actor runs
            # RayEngine, the launcher (it opens the launch and is the root of its schedulers).
            root_pid=None if root else os.environ.get(names.ENV_ROOT_PID, str(os.getpid())),
            standalone=True, nccl_values=values,
        )
        env = {k: v for k, v in updates.items() if v is not None}
        from sglang_eagle_nccl.contract.findings import ProfileError
        from sglang_eagle_nccl.profile.limits import check_exec_size

        too_big = [f for f in check_exec_size(env, []) if f.severity == "error"]
        if too_big:
            raise RayEnvError(f"{self.where}: the Ray actors' environment cannot be built: {ProfileError(too_big)}")
        rewritten = ray_rewritten(env)
        if rewritten:
            shown = ", ".join(f"{k}={env[k]!r}" for k in rewritten)
            raise RayEnvError(
                f"{self.where}: Ray rewrites '$NAME' and '${{...}}' in every runtime_env value when it starts a "
                f"worker (os.path.expandvars, then unset '${{NAME}}' deleted), with no escape, so SGLang's "
                f"{self.role} actors would not get {shown} as written and would refuse the profile as stale. "
                "Nothing was started. Fix: remove the '$' from that value (a profile file's path, the audit "
                "directory, SGLANG_EAGLE_NCCL_ENV), e.g. move or rename the directory."
            )
        return env

    def check_job_env(self, ours: Mapping[str, str]) -> None:
        job = _job_env_vars()
        stale = foreign_inputs(job, ours)
        if stale:
            shown = ", ".join(f"{k}={job[k]!r}" for k in stale)
            raise RayEnvError(
                f"{self.where}: the Ray job's runtime_env sets {shown} for every actor, but this process resolved "
                f"its NCCL profile without {'it' if len(stale) == 1 else 'them'}: SGLang's {self.role} actors "
                "would refuse the profile as stale. Nothing was started. Fix: set the same value in this "
                "process's environment (the profile is resolved here), or drop it from the runtime_env."
            )

    def node_rank_for(self, options: Mapping[str, Any]) -> tuple[int | None, dict[str, Any]]:
        """The node rank of the actor these options place, and where it goes (for the record)."""
        strategy = options.get("scheduling_strategy")
        pg = getattr(strategy, "placement_group", None)
        bundle = getattr(strategy, "placement_group_bundle_index", None)
        if pg is None or not isinstance(bundle, int) or bundle < 0:
            if (STATE.data or {}).get("nodes"):
                raise RayEnvError(
                    f"{self.where}: a {self.role} actor is created without a placement group bundle, so its Ray "
                    "node (and the profile's [nodes.<rank>.env] section it needs) is unknown before it starts. "
                    "Nothing more was started. Fix: create the engine on a placement group (SGLang does by "
                    "default), or move the node sections' values to each node's own environment."
                )
            return None, {}
        pg_id = pg.id.hex()
        if pg_id not in self.placements:
            self.placements[pg_id] = (_bundle_nodes(pg, self.where), {})
        bundle_nodes, ranks = self.placements[pg_id]
        if bundle not in bundle_nodes:
            raise RayEnvError(
                f"{self.where}: a {self.role} actor is placed on bundle {bundle} of placement group {pg_id}, whose "
                f"placed bundles are {sorted(bundle_nodes)}. Nothing more was started."
            )
        if not ranks:  # numbered from the first actor SGLang creates on this placement group
            ranks.update(number_nodes(bundle_nodes, bundle))
        node_id = bundle_nodes[bundle]
        return ranks[node_id], {"placement_group": pg_id, "bundle": bundle, "ray_node": node_id}

    def runtime_env(self, options: Mapping[str, Any], actor: str) -> dict[str, Any]:
        if self.role == "engine":
            node_rank, where = None, {}
        else:
            node_rank, where = self.node_rank_for(options)
        ours = self.environment(node_rank, root=self.role == "engine")
        if self.count == 0:
            # The job may have been connected only now (SGLang's first Ray call auto-initialises it).
            self.check_job_env(ours)
        given, replaced = actor_runtime_env(options.get("runtime_env"), _job_env_vars(), ours)
        self.count += 1
        record("ray_actor_env", actor_role=self.role, actor=actor, where=self.where, node_rank=node_rank, **where,
               env={k: v for k, v in ours.items() if names.is_allowed_name(k)},
               plugin_vars=sorted(k for k in ours if k.startswith(names.ENV_ENABLE)),
               replaced_user_values=replaced, ray_cluster=_gcs_address())
        for r in replaced:
            log(f"Ray {self.role} actor {actor}: the runtime_env's {r['name']}={r['user_value']!r} replaced by "
                f"{r['value']!r} (the NCCL profile's precedence, as for a spawned process)")
        return given


def _gcs_address() -> str | None:
    """The address of the cluster the driver is connected to: `audit --ray auto` attaches only to this one."""
    try:
        import ray

        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # noqa: BLE001 - not connected, or a Ray without it: the record names no cluster
        return None


def _bundle_nodes(pg: Any, where: str) -> dict[int, str]:
    """Bundle index -> Ray node id of a placement group, once every bundle is placed."""
    import ray

    pg_id = pg.id.hex()
    table = ray.util.placement_group_table(pg).get("bundles_to_node_id") or {}
    if not table or not all(table.values()):
        try:
            ray.get(pg.ready(), timeout=PLACEMENT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - Ray's timeout and unavailable errors alike
            raise RayEnvError(
                f"{where}: placement group {pg_id} was not placed within {PLACEMENT_TIMEOUT_S:.0f} s ({exc!r}), so "
                "the Ray node of each scheduler (and its [nodes.<rank>.env] section) is unknown. Nothing more was "
                "started. Fix: make sure the cluster has the resources the placement group asks for."
            ) from exc
        table = ray.util.placement_group_table(pg).get("bundles_to_node_id") or {}
    nodes = {int(b): str(n) for b, n in table.items() if n}
    if not nodes:
        raise RayEnvError(f"{where}: placement group {pg_id} reports no placed bundle. Nothing more was started.")
    return nodes


def _job_env_vars() -> dict[str, str]:
    """The env_vars of this process's Ray runtime env (the job's, in a driver), or {}."""
    try:
        import ray

        if not ray.is_initialized():
            return {}
        env = ray.get_runtime_context().runtime_env or {}
        found = env.get("env_vars") if hasattr(env, "get") else None
        return {str(k): str(v) for k, v in (found or {}).items()}
    except Exception:  # noqa: BLE001 - no runtime env to merge with
        return {}


def _actor_name(instance: Any, options: Mapping[str, Any]) -> str:
    name = options.get("name")
    if isinstance(name, str) and name:
        return name
    meta = getattr(instance, "__ray_metadata__", None)
    cls = getattr(meta, "modified_class", None)
    return getattr(cls, "__name__", None) or type(instance).__name__


def _in_scope(role: str, where: str, original: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    try:
        scope = _Scope(role, where)
    except RayEnvError as exc:
        record("ray_refused", actor_role=role, where=where, error=str(exc))
        stop(exc)
    token = _scope().set(scope)
    try:
        return original(*args, **kwargs)
    finally:
        _scope().reset(token)
        if scope.count:
            log(f"{where}: gave the NCCL profile to {scope.count} Ray {role} actor(s)")


def scheduler_actors(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``RayEngine._launch_scheduler_processes``: every actor it creates is a scheduler."""
    return _in_scope("scheduler", "RayEngine._launch_scheduler_processes", original, args, kwargs)


def engine_actor(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around the offline benchmark's ``_create_ray_engine_backend``: the actor it creates runs RayEngine."""
    return _in_scope("engine", "_create_ray_engine_backend", original, args, kwargs)


def _sglang_actor_module(instance: Any) -> str | None:
    """The SGLang module that defines the actor class being configured, or None (not SGLang's)."""
    cls = getattr(getattr(instance, "__ray_metadata__", None), "modified_class", None)
    module = getattr(cls, "__module__", None)
    return module if isinstance(module, str) and (module == "sglang" or module.startswith("sglang.")) else None


def _outside_scope(instance: Any, kwargs: Mapping[str, Any]) -> None:
    """An SGLang actor created outside the calls the manifests name: a newer SGLang moved them."""
    module = _sglang_actor_module(instance)
    if module is None:
        return  # the user's own actors: not this plugin's business
    name = _actor_name(instance, kwargs)
    message = (
        f"SGLang creates a Ray actor ({name}, defined in {module}) outside the calls this plugin knows "
        "(RayEngine._launch_scheduler_processes, _create_ray_engine_backend), so it would start without the NCCL "
        "profile. Fix: upgrade sglang-eagle-nccl for this SGLang, or run anyway with allow_partial "
        "(SGLANG_EAGLE_NCCL_ALLOW_PARTIAL=1; the audit marks the actor uncovered)."
    )
    if STATE.policy.get("allow_partial"):
        log(f"warning: {message}", once=f"ray-uncovered-{module}")
        record("hook_uncovered", target=f"{module}:{name}", reason=message, required=False, mechanism="ray")
        return
    record("ray_refused", actor_role="unknown", where=module, error=message)
    stop(RayEnvError(message))


def actor_options(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``ray.actor.ActorClass.options``: inside a scope, the actor gets the plugin's env_vars."""
    scope = _scope().get()
    if scope is None:
        _outside_scope(instance, kwargs)
        return original(*args, **kwargs)
    try:
        runtime_env = scope.runtime_env(kwargs, _actor_name(instance, kwargs))
    except RayEnvError as exc:
        record("ray_refused", actor_role=scope.role, where=scope.where, error=str(exc))
        stop(exc)
    return original(*args, **{**kwargs, "runtime_env": runtime_env})
