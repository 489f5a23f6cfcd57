"""What one process gets: the plan activation carries out (decided and checked, nothing written).

:func:`plan` reads the profile of a process (one its caller resolved, the serialised one a parent
handed down, through the one wire decoder, or the ``SGLANG_EAGLE_NCCL*`` variables) and runs every
check activation runs; :func:`process_env` is the one answer to "what must a process of node N
hold". Imported at interpreter start by every enabled process: nothing heavy at module level.
"""

import os

from sglang_eagle_nccl.contract import names

TYPE_CHECKING = False  # typing is not imported at interpreter start (annotations are strings)
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping
    from typing import Any

    from sglang_eagle_nccl.profile.model import Profile


class Plan:
    """Everything :func:`apply` will do, decided and checked before anything is written."""

    __slots__ = ("data", "profile", "wire", "run_dir", "node_rank", "is_root", "desired", "unset", "warnings")

    def __init__(self, data: "dict[str, Any]", profile: "Profile | None", wire: str | None, run_dir: str | None,
                 node_rank: int | None, is_root: bool, desired: dict[str, str], unset: list[str],
                 warnings: list[str]) -> None:
        self.data = data
        self.profile = profile
        self.wire = wire  # the inherited serialised profile, kept as it is (None: encode our own)
        self.run_dir = run_dir
        self.node_rank = node_rank
        self.is_root = is_root
        self.desired = desired
        self.unset = unset  # variables to remove (a stale native plugin path of another install)
        self.warnings = warnings


# --- deciding -----------------------------------------------------------------------------------


def node_rank_from(environ: "Mapping[str, str]") -> int | None:
    """``SGLANG_EAGLE_NCCL_NODE_RANK`` as a node rank; a value that is not one is an error."""
    value = environ.get(names.ENV_NODE_RANK)
    if value is None or value == "":
        return None
    rank = names.parse_node_rank(value.strip())
    if rank is not None:
        return rank
    from sglang_eagle_nccl.contract.findings import ProfileError, error

    raise ProfileError([
        error(names.ENV_NODE_RANK, value,
              f"must be a node rank: ASCII digits, at most {names.NODE_RANK_MAX_DIGITS} of them",
              f"set {names.ENV_NODE_RANK} to this node's --node-rank (0, 1, ...) or unset it")
    ])


def process_env(data: "Mapping[str, Any]", node_rank: int | None, run_dir: str | None = None) -> dict[str, str]:
    """What a process of node ``node_rank`` must hold: ``[env]`` plus its ``[nodes.<rank>.env]``.

    A value holding the ``{audit_dir}`` placeholder gets the launch's audit directory; until the
    process knows its launch (SGLang's launcher opens it only at ``_set_envs_and_config``) the
    variable is left out, and it is written when the launch is joined.
    """
    env = dict(data.get("env", {}))
    if node_rank is not None:
        env.update(data.get("nodes", {}).get(str(node_rank), {}))
    # The placeholder module pulls in the finding and parsing machinery (dataclasses, packaging:
    # ~15 ms at interpreter start); every SGLang child runs this, and almost no profile has one.
    if not any(names.AUDIT_DIR_PLACEHOLDER in value for value in env.values()):
        return env
    from sglang_eagle_nccl.profile.placeholders import expand_placeholders, has_placeholder

    for name, value in list(env.items()):
        if has_placeholder(value):
            if run_dir:
                env[name] = expand_placeholders(name, value, run_dir)
            else:
                del env[name]
    return env


def _validate_handed_down(data: "dict[str, Any]") -> "Profile":
    # Only for a hand-off no validating process of this user provably wrote: the full checks,
    # with the whole NCCL knowledge base (never imported at start on the signed path).
    from sglang_eagle_nccl.profile.resolve import validate_data

    return validate_data(data, source=names.ENV_PROFILE)


def plan(profile: "Profile | None" = None, environ: "Mapping[str, str] | None" = None) -> "Plan":
    """Read and check the profile for this process; raise ProfileError (nothing written) when unusable.

    ``profile``: one the caller resolved itself (launch flags). Otherwise the serialised profile a
    parent handed down (``SGLANG_EAGLE_NCCL_PROFILE``), else the ``SGLANG_EAGLE_NCCL*`` variables.
    """
    environ = os.environ if environ is None else environ
    warnings: list[str] = []
    wire_text = None
    run_dir = None
    if profile is not None:
        data = profile.to_dict()
    else:
        wire_text = environ.get(names.ENV_PROFILE)
        if wire_text:
            from sglang_eagle_nccl.contract.handoff import decode

            decoded = decode(wire_text, environ, validate=_validate_handed_down)
            data, profile, run_dir = decoded.data, decoded.profile, decoded.run_dir
        else:
            wire_text = None
            from sglang_eagle_nccl.profile.resolve import resolve

            resolution = resolve(environ=environ)
            profile, data = resolution.profile, resolution.profile.to_dict()
            warnings = [w.message() for w in resolution.warnings]
    node_rank = node_rank_from(environ)
    # The root marker means something only beside the serialised profile it came with: a process
    # that was handed no profile resolved its own and is the root of its own launch. A marker left
    # alone (a shell that unset only SGLANG_EAGLE_NCCL_PROFILE after `eval "$(sglang-eagle-nccl env
    # --audit-dir ...)"`) would otherwise make every later launch a child that never opens a launch
    # directory: its audit silently off.
    is_root = names.ENV_ROOT_PID not in environ or not environ.get(names.ENV_PROFILE)
    desired = process_env(data, node_rank, run_dir)
    if not is_root:
        # A child inherits what the launcher settled on; where the policy lets SGLang's own write
        # win, the inherited value is that decision and must stay.
        keep = set(data.get("policy", {}).get("sglang_wins", ()))
        desired = {k: v for k, v in desired.items() if not (k in keep and k in environ)}
    from sglang_eagle_nccl.decision.plugins import plugin_env

    native = plugin_env(data, environ, desired)
    desired.update({k: v for k, v in native.items() if v is not None})
    unset = [k for k, v in native.items() if v is None]
    return Plan(data, profile, wire_text, run_dir, node_rank, is_root, desired, unset, warnings)
