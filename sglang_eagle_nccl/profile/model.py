"""The validated, immutable :class:`Profile` and its views (group, node environments).

What a process of a launch holds is decided in one place, :func:`sglang_eagle_nccl.decision.plan.process_env`
(``[env]``, its node's section, the ``{audit_dir}`` placeholder expanded once the launch is known).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl.profile.policy import Policy

Pairs = tuple[tuple[str, str], ...]

# SGLang's GroupCoordinator group names, any version (the group_name arguments of
# srt/distributed/parallel_state.py and layers/dp_attention.py, 0.4.3 - 0.5.23). A group section
# for another name is allowed (new SGLang releases add groups) but warned about.
KNOWN_GROUPS = (
    "world", "tp", "pp", "attention_tp", "attn_tp", "moe_ep", "moe_tp", "moe_dp", "pdmux_prefill_tp",
    "attn_cp", "dcp", "self_pp", "shared_experts_tp",
)


@dataclass(frozen=True)
class Profile:
    """A validated, immutable NCCL profile."""

    name: str
    env: Pairs = ()
    groups: tuple[tuple[str, Pairs], ...] = ()
    nodes: tuple[tuple[int, Pairs], ...] = ()
    policy: Policy = field(default_factory=Policy)
    sources: tuple[str, ...] = ()
    description: str = ""
    # Size/rank/group rules for the tuner plugin, as plain validated dicts (nccl/tuner_rules.py).
    tuner_rules: tuple[dict[str, Any], ...] = ()

    # -- views -------------------------------------------------------------------------------
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def group_env(self, group: str) -> dict[str, str]:
        return dict(dict(self.groups).get(group, ()))

    def node_env(self, node_rank: int | None) -> dict[str, str]:
        if node_rank is None:
            return {}
        return dict(dict(self.nodes).get(node_rank, ()))

    def all_names(self) -> set[str]:
        names = {k for k, _ in self.env}
        for _, pairs in self.groups:
            names.update(k for k, _ in pairs)
        for _, pairs in self.nodes:
            names.update(k for k, _ in pairs)
        return names

    # -- plain data (what the wire format carries) -----------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "env": dict(self.env),
            "groups": {g: dict(p) for g, p in self.groups},
            "nodes": {str(n): dict(p) for n, p in self.nodes},
            "policy": self.policy.to_dict(),
            "sources": list(self.sources),
            "tuner_rules": [dict(r) for r in self.tuner_rules],
        }

    @classmethod
    def from_validated_data(cls, data: Mapping[str, Any]) -> Profile:
        """Rebuild a profile from :meth:`to_dict` output that a validating process wrote.

        No value is checked here: callers hold proof (the wire format's digest) that the data is
        exactly what :func:`~sglang_eagle_nccl.profile.resolve.validate_layer` accepted.
        """
        return cls(
            name=str(data.get("name", "")),
            env=tuple(sorted(data.get("env", {}).items())),
            groups=tuple(sorted((str(g), tuple(sorted(e.items()))) for g, e in data.get("groups", {}).items())),
            nodes=tuple(sorted((int(n), tuple(sorted(e.items()))) for n, e in data.get("nodes", {}).items())),
            policy=Policy.from_validated_data(data.get("policy", {})),
            sources=tuple(data.get("sources", ())),
            description=str(data.get("description", "")),
            tuner_rules=tuple(dict(r) for r in data.get("tuner_rules", ())),
        )
