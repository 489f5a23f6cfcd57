"""The one function that builds the environment a launcher hands to the processes it starts.

``launch`` (the SGLang server it starts), ``preflight`` (its ranks) and ``env`` (processes an
external launcher starts: Ray, Kubernetes, systemd) all call :func:`child_environment`, so a
child always receives the same four things: the NCCL values themselves (a process without the
plugin still gets them), the gate, the node rank, and the signed serialised profile recording the
inputs as the child will see them.
"""

from __future__ import annotations

from collections.abc import Mapping

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.handoff import current_inputs, encode, read_key
from sglang_eagle_nccl.inproc.boot.activation import process_env
from sglang_eagle_nccl.profile.model import Profile

# Marks a launch none of whose processes is its root (env --audit-dir: every process started
# from that environment joins the one launch directory as a child).
EXTERNAL_ROOT = "external"


def child_environment(
    profile: Profile,
    *,
    run_dir: str | None,
    node_rank: int | None,
    environ: Mapping[str, str],
    root_pid: str | None,
    create_key: bool = True,
) -> dict[str, str | None]:
    """Variables to set (None: to remove) in a child's environment, based on ``environ``.

    ``root_pid`` None makes the child the root of the launch (the SGLang server ``launch``
    starts); a pid or :data:`EXTERNAL_ROOT` makes it a child that inherits decisions.
    """
    data = profile.to_dict()
    updates: dict[str, str | None] = dict(process_env(data, node_rank, run_dir))
    updates[names.ENV_ENABLE] = environ[names.ENV_ENABLE] if names.is_enabled(environ) else "1"
    if node_rank is not None:
        updates[names.ENV_NODE_RANK] = str(node_rank)
    updates[names.ENV_ROOT_PID] = root_pid
    after = {k: v for k, v in environ.items() if k not in updates}
    after.update({k: v for k, v in updates.items() if v is not None})
    # create_key=False (a dry run) signs only with an existing key: it must write nothing.
    key = None if create_key else (read_key() or b"")
    updates[names.ENV_PROFILE] = encode(data, inputs=current_inputs(after), run_dir=run_dir, key=key)
    return updates


def merged(environ: Mapping[str, str], updates: Mapping[str, str | None]) -> dict[str, str]:
    """``environ`` with ``updates`` applied (for a child started with an explicit environment)."""
    out = {k: v for k, v in environ.items() if k not in updates}
    out.update({k: v for k, v in updates.items() if v is not None})
    return out
