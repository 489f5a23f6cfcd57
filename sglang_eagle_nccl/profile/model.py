"""The validated, immutable :class:`Profile` and its views (process, group, node environments)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl import names
from sglang_eagle_nccl.findings import Finding, ProfileError, error
from sglang_eagle_nccl.profile.policy import Policy, policy_from_mapping

Pairs = tuple[tuple[str, str], ...]

SERIAL_VERSION = 1

# SGLang's GroupCoordinator group names, any version (sglang-internals.md §7b). A group section
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

    # -- views -------------------------------------------------------------------------------
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def group_env(self, group: str) -> dict[str, str]:
        return dict(dict(self.groups).get(group, ()))

    def node_env(self, node_rank: int | None) -> dict[str, str]:
        if node_rank is None:
            return {}
        return dict(dict(self.nodes).get(node_rank, ()))

    def process_env(self, node_rank: int | None = None) -> dict[str, str]:
        """What a process of node ``node_rank`` must have in its environment."""
        env = self.env_dict()
        env.update(self.node_env(node_rank))
        return env

    def expected_env(self, group: str | None = None, node_rank: int | None = None) -> dict[str, str]:
        """What a communicator of ``group`` created eagerly in scope should see."""
        env = self.process_env(node_rank)
        if group is not None:
            env.update(self.group_env(group))
        return env

    def all_names(self) -> set[str]:
        names = {k for k, _ in self.env}
        for _, pairs in self.groups:
            names.update(k for k, _ in pairs)
        for _, pairs in self.nodes:
            names.update(k for k, _ in pairs)
        return names

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "v": SERIAL_VERSION,
            "name": self.name,
            "description": self.description,
            "env": dict(self.env),
            "groups": {g: dict(p) for g, p in self.groups},
            "nodes": {str(n): dict(p) for n, p in self.nodes},
            "policy": self.policy.to_dict(),
            "sources": list(self.sources),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Profile:
        """Rebuild a profile serialised by :meth:`to_json` (the ``SGLANG_EAGLE_NCCL_PROFILE`` value).

        Structure and variable names are checked again here: the string comes from the
        environment, so nothing outside ``NCCL_*``/``TORCH_NCCL_*`` may slip in through it.
        Values were validated by the launcher that produced the string.
        """
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ProfileError([_bad_serial(f"not valid JSON ({exc})")]) from None
        if not isinstance(data, dict) or data.get("v") != SERIAL_VERSION:
            raise ProfileError([_bad_serial(f"expected an object with v={SERIAL_VERSION}")])
        allowed = {"v", "name", "description", "env", "groups", "nodes", "policy", "sources"}
        extra = set(data) - allowed
        if extra:
            raise ProfileError([_bad_serial(f"unknown keys {sorted(extra)}")])
        findings: list[Finding] = []
        env = _serial_pairs(data.get("env", {}), "env", findings)
        groups_raw = data.get("groups", {})
        nodes_raw = data.get("nodes", {})
        if not isinstance(groups_raw, dict) or not isinstance(nodes_raw, dict):
            raise ProfileError([_bad_serial("groups and nodes must be objects")])
        groups = tuple(
            sorted((str(g), _serial_pairs(p, f"groups.{g}", findings)) for g, p in groups_raw.items())
        )
        nodes: list[tuple[int, Pairs]] = []
        for n, p in nodes_raw.items():
            if not str(n).isdigit():
                findings.append(_bad_serial(f"node key {n!r} is not a node rank"))
                continue
            nodes.append((int(n), _serial_pairs(p, f"nodes.{n}", findings)))
        policy, policy_findings = policy_from_mapping(data.get("policy", {}), "serialised profile")
        findings += policy_findings
        if any(f.severity == "error" for f in findings):
            raise ProfileError(findings)
        name = data.get("name")
        sources = data.get("sources", [])
        if not isinstance(name, str) or not isinstance(sources, list):
            raise ProfileError([_bad_serial("name must be a string and sources a list")])
        return cls(
            name=name,
            env=env,
            groups=groups,
            nodes=tuple(sorted(nodes)),
            policy=policy,
            sources=tuple(str(s) for s in sources),
            description=str(data.get("description", "")),
        )


def _bad_serial(why: str) -> Finding:
    return error(
        names.ENV_PROFILE, None,
        f"the serialised profile is malformed: {why}",
        f"unset {names.ENV_PROFILE}; it is written by sglang-eagle-nccl for the processes it starts",
    )


def _serial_pairs(obj: Any, where: str, findings: list[Finding]) -> Pairs:
    from sglang_eagle_nccl.names import is_allowed_name

    if not isinstance(obj, dict):
        findings.append(_bad_serial(f"{where} must be an object"))
        return ()
    pairs = []
    for k, v in obj.items():
        if not isinstance(k, str) or not is_allowed_name(k):
            findings.append(
                error(
                    str(k), None,
                    f"{where}: a profile may only set NCCL_* and TORCH_NCCL_* variables",
                    f"remove it from {names.ENV_PROFILE}",
                )
            )
            continue
        if not isinstance(v, str) or "\x00" in v or "\n" in v:
            findings.append(_bad_serial(f"{where}.{k} must be a one-line string"))
            continue
        pairs.append((k, v))
    return tuple(sorted(pairs))
