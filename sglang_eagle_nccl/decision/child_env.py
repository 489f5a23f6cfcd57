"""The one function that builds the environment a launcher hands to the processes it starts.

``launch`` (the SGLang server it starts), ``preflight`` (its ranks), ``env`` (processes an
external launcher starts: Ray, Kubernetes, systemd) and the Ray hook in SGLang's driver (the
scheduler actors it creates) all call :func:`child_environment`, so a child always receives the
same things: the NCCL values themselves (a process without the plugin still gets them), the gate,
the node rank, the root marker, and the signed serialised profile recording the inputs as the
child will see them.

A spawned child inherits its parent's whole environment; a *standalone* child (``env`` output, a
Ray actor: started elsewhere by a raylet, a kubelet, systemd) gets only what is given to it. Its
environment therefore carries every ``SGLANG_EAGLE_NCCL*`` input the serialised profile records:
a process started with exactly that environment, anywhere, finds the inputs it was resolved from
and activates; one whose own environment adds or changes an input refuses the profile as stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.handoff import current_inputs, encode, read_key
from sglang_eagle_nccl.decision.plan import process_env
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
    standalone: bool = False,
    nccl_values: Mapping[str, str] | None = None,
) -> dict[str, str | None]:
    """Variables to set (None: to remove) in a child's environment (see :func:`decide_child_environment`).

    ``create_key`` False (a dry run): signed only with an existing key, nothing written.
    """
    handoff = decide_child_environment(profile, run_dir=run_dir, node_rank=node_rank, environ=environ,
                                       root_pid=root_pid, standalone=standalone, nccl_values=nccl_values)
    return handoff.signed() if create_key else handoff.updates


def decide_child_environment(
    profile: Profile,
    *,
    run_dir: str | None,
    node_rank: int | None,
    environ: Mapping[str, str],
    root_pid: str | None,
    standalone: bool = False,
    nccl_values: Mapping[str, str] | None = None,
) -> Handoff:
    """Variables to set (None: to remove) in a child's environment, based on ``environ``; writes nothing.

    ``root_pid`` None makes the child the root of the launch (the SGLang server ``launch``
    starts); a pid or :data:`EXTERNAL_ROOT` makes it a child that inherits decisions.
    ``standalone``: the child sees only the returned variables (plus what its own host adds),
    so every recorded input is among them. ``nccl_values``: the NCCL values the child must hold
    when the caller decided them already (the Ray hook: the node's profile values plus SGLang's
    own writes after the policy); default the profile's values for ``node_rank``.
    """
    data = profile.to_dict()
    nccl = dict(process_env(data, node_rank, run_dir) if nccl_values is None else nccl_values)
    bad = sorted(k for k in nccl if not names.is_allowed_name(k))
    if bad:  # the one rule every writer obeys, here too: only NCCL_* / TORCH_NCCL_* values travel
        raise ValueError(f"refusing to hand non-NCCL variables to a child: {', '.join(bad)}")
    updates: dict[str, str | None] = dict(nccl)
    updates[names.ENV_ENABLE] = environ[names.ENV_ENABLE] if names.is_enabled(environ) else "1"
    if node_rank is not None:
        updates[names.ENV_NODE_RANK] = str(node_rank)
    updates[names.ENV_ROOT_PID] = root_pid
    after = {k: v for k, v in environ.items() if k not in updates}
    after.update({k: v for k, v in updates.items() if v is not None})
    inputs = current_inputs(after)
    if standalone:
        audit_root = data.get("policy", {}).get("audit_dir")
        if names.ENV_AUDIT_DIR in inputs and audit_root:
            # A relative root was made absolute where the profile was resolved; the child, in
            # another working directory, must read the same root, and its input must match.
            inputs[names.ENV_AUDIT_DIR] = audit_root
        # Printed or passed on as it is: the inputs the hand-off records must be in it.
        updates.update(inputs)
    # Signed with an existing key only: deciding writes nothing. A launch signs once the key exists
    # (Handoff.signed, create_key=True).
    updates[names.ENV_PROFILE] = encode(data, inputs=inputs, run_dir=run_dir, key=read_key() or b"")
    return Handoff(updates, data, inputs, run_dir)


class Handoff:
    """A child environment decided, its hand-off signed with the key there was (or unsigned: ``-``)."""

    __slots__ = ("updates", "data", "inputs", "run_dir")

    def __init__(self, updates: dict[str, str | None], data: dict[str, Any], inputs: dict[str, str],
                 run_dir: str | None) -> None:
        self.updates, self.data, self.inputs, self.run_dir = updates, data, inputs, run_dir

    def signed(self) -> dict[str, str | None]:
        """The same environment with the hand-off signed by this user's key (created if need be).

        Only the signature can change: the values, inputs and launch directory are the decided ones.
        """
        wire = self.updates[names.ENV_PROFILE] or ""
        if not wire.endswith(".-"):
            return dict(self.updates)
        return {**self.updates, names.ENV_PROFILE: encode(self.data, inputs=self.inputs, run_dir=self.run_dir)}


def merged(environ: Mapping[str, str], updates: Mapping[str, str | None]) -> dict[str, str]:
    """``environ`` with ``updates`` applied (for a child started with an explicit environment)."""
    out = {k: v for k, v in environ.items() if k not in updates}
    out.update({k: v for k, v in updates.items() if v is not None})
    return out
