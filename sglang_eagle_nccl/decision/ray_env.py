"""What a Ray actor of SGLang's gets in its ``runtime_env``: the decisions of :mod:`hook_ray`, as pure functions.

The rules (each function states its own; the plain tier tests them on generated runtime envs
against a reference merge written for the test, the Ray tier once more on a real cluster):

- **The user's values are kept.** An actor's ``runtime_env`` is the one the caller gave
  ``.options()`` (every key of it), its ``env_vars`` holding the caller's own variables plus the
  plugin's; the job's ``env_vars`` are not copied in (Ray merges them under the actor's, per variable).
- **Precedence.** Where a variable of the plugin meets a user value (the job's or the actor's), the
  plugin's wins, as for a spawned process; a differing NCCL variable or plugin input is reported
  (``replaced``), the per-actor variables (hand-off, root marker, node rank) are not: they differ by design.
  Ray can set a variable for an actor, not unset one: a plugin input in the job's ``env_vars`` that the
  hand-off was not resolved from would make every actor refuse the profile as stale (:func:`foreign_inputs`).
- **What SGLang wrote in the driver.** A profile variable keeps the profile's value unless the profile
  lets SGLang win it; any other variable SGLang wrote (or removed) in the driver is passed on as
  written (:func:`overlay_sglang_writes`).
- **Node numbering.** Node 0 is the node of the first scheduler actor SGLang creates; every other node
  of the placement group follows in the order of its lowest bundle index (:func:`number_nodes`).
- **Values Ray rewrites.** Ray passes every ``env_vars`` value through Python's
  ``os.path.expandvars`` when it starts a worker (``$name`` and ``${...}`` replaced by the worker's
  environment, left as they are when unset) and then deletes every remaining ``${NAME}`` made of
  upper-case letters, digits and ``_`` (``ray._private.utils.update_envs``, called by
  ``RuntimeEnvContext.exec_worker``). It has no escape for ``$``. A value of the plugin holding such a
  reference (:func:`ray_rewrites`) cannot reach an actor unchanged: the driver refuses before any
  actor starts (:func:`ray_rewritten`), rather than every actor refusing the profile as stale.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sglang_eagle_nccl.contract import names

# What os.path.expandvars reads as a reference (the same pattern in Python 3.10 to 3.13): ``$`` then
# ASCII word characters, or ``${`` up to the next ``}``. Ray's deletion of unset ``${NAME}`` only
# ever touches such a reference.
_RAY_REFERENCE = re.compile(r"\$(\w+|\{[^}]*\})", re.ASCII)

# The variables that differ per actor by design (never reported as a replaced user value).
PER_ACTOR = frozenset((names.ENV_PROFILE, names.ENV_ROOT_PID, names.ENV_NODE_RANK))


def ray_rewrites(value: str) -> bool:
    """Whether Ray may start a worker with another value than ``value`` (a ``$name`` or ``${...}`` in it)."""
    return _RAY_REFERENCE.search(value) is not None


def ray_rewritten(env: Mapping[str, str]) -> list[str]:
    """The names of ``env`` whose values Ray may rewrite, in order."""
    return [k for k, v in env.items() if ray_rewrites(v)]


def number_nodes(bundle_nodes: Mapping[int, str], first_bundle: int) -> dict[str, int]:
    """Ray node id -> node rank for one placement group.

    ``bundle_nodes``: bundle index -> id of the node it is placed on; ``first_bundle``: the bundle of
    the first scheduler actor SGLang creates. Every bundle must be placed.
    """
    order = [bundle_nodes[first_bundle]] + [bundle_nodes[b] for b in sorted(bundle_nodes)]
    ranks: dict[str, int] = {}
    for node in order:
        ranks.setdefault(node, len(ranks))
    return ranks


def overlay_sglang_writes(values: Mapping[str, str], sglang_written: Mapping[str, str | None],
                          keep: set[str] | frozenset[str]) -> dict[str, str]:
    """The profile's NCCL ``values`` for an actor's node, with what SGLang wrote in the driver.

    ``sglang_written``: name -> the driver's value after the profile's policy (None: SGLang removed
    it). A profile variable keeps the profile's value unless SGLang may win it (``keep``).
    """
    out = dict(values)
    for name, value in sorted(sglang_written.items()):
        if name in out and name not in keep:
            continue  # restored in the driver: the profile's value, for this actor's node
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def merge_env_vars(ours: Mapping[str, str], theirs: Mapping[str, str]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """``theirs`` (a runtime_env's env_vars) with ``ours`` on top, and the user values ours replaced.

    Reported are the variables a user gave another value, except the per-actor ones (:data:`PER_ACTOR`).
    """
    merged = dict(theirs)
    replaced = []
    for name, value in ours.items():
        before = theirs.get(name)
        if before is not None and before != value and name not in PER_ACTOR:
            replaced.append({"name": name, "user_value": before, "value": value})
        merged[name] = value
    return merged, replaced


def foreign_inputs(job_env_vars: Mapping[str, str], ours: Mapping[str, str]) -> list[str]:
    """Plugin inputs the job's runtime_env would add to every actor that the hand-off was not
    resolved from (Ray can set a variable for an actor, not unset one): the actors would refuse
    the profile as stale, so the driver refuses first."""
    return sorted(k for k in names.INPUT_VARS if k in job_env_vars and k not in ours)


def actor_runtime_env(given: Any, job_env_vars: Mapping[str, str],
                      ours: Mapping[str, str]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The ``runtime_env`` an actor is created with, and the user values the plugin's replaced.

    ``given``: the ``runtime_env`` the caller passed to ``.options()`` (None or not a mapping: none);
    ``job_env_vars``: the job's ``env_vars``, which Ray merges under the actor's; ``ours``: the
    plugin's variables for this actor. Every key of ``given`` is kept; its ``env_vars`` become the
    caller's with ours on top (a non-mapping ``env_vars`` is replaced by ours alone).
    """
    runtime_env = dict(given) if isinstance(given, Mapping) else {}
    actor_vars = runtime_env.get("env_vars")
    actor_vars = dict(actor_vars) if isinstance(actor_vars, Mapping) else {}
    merged, replaced = merge_env_vars(ours, {**job_env_vars, **actor_vars})
    # Only the actor's own variables go into its runtime_env: Ray merges the job's under them.
    runtime_env["env_vars"] = {k: v for k, v in merged.items() if k in ours or k in actor_vars}
    return runtime_env, replaced
