"""Cross-rank agreement on NCCL settings, checked when each SGLang group is created.

NCCL never compares NCCL_PROTO, NCCL_ALGO, NCCL_BUFFSIZE, channel caps ... across ranks; a
mismatch hangs (P2P/SHM), fails with "message truncated" (sockets) or silently truncates (IB)
(NCCL compares none of these across ranks). Every rank of a group therefore all-gathers the must-match part of its NCCL
environment over the group's gloo ``cpu_group`` before SGLang builds the group's NCCL
communicator, and every rank raises the same error naming the ranks, variables and values.
Node-local variables (interfaces, HCAs, topology files) may differ and are not compared.

The comparison is pure (:func:`compare`); :func:`check_group` does the collective, bounded by
a timeout so a dead or stuck peer produces an error instead of a hang.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.names import ALLOWED_PREFIXES
from sglang_eagle_nccl.knowledge.nccl.variables import rank_rule


class ConsistencyError(PluginStop, RuntimeError):
    """Ranks of one group disagree on NCCL settings, or did not answer in time."""


# Paths of plugin libraries differ between installations (nodes, venvs) by design; what ranks must
# share is the library itself and its rules, compared through the extras instead.
PER_INSTALLATION = frozenset({"NCCL_ENV_PLUGIN", "NCCL_TUNER_PLUGIN"})


def must_match_part(env: Mapping[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in sorted(env.items())
        if k.startswith(ALLOWED_PREFIXES) and k not in PER_INSTALLATION and rank_rule(k) == "must_match"
    }


def fingerprint(env: Mapping[str, str], extras: Mapping[str, str] | None = None) -> str:
    data = json.dumps({**must_match_part(env), **(extras or {})}, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def payload(env: Mapping[str, str], rank: int, extras: Mapping[str, str] | None = None,
            node: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What one rank contributes: its must-match NCCL values plus ``extras`` (e.g. the native
    plugin library version and tuner-rules digest, named in parentheses so no NCCL name collides),
    and where it runs: ``node`` (its node rank, its Ray node), so an error can name the nodes even
    where hostnames repeat (containers, Ray nodes of one machine)."""
    values = {**must_match_part(env), **(extras or {})}
    return {
        "rank": rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "node": {k: v for k, v in (node or {}).items() if v is not None},
        "fingerprint": fingerprint(env, extras),
        "values": values,
    }


def _where(p: Mapping[str, Any]) -> str:
    """``host:pid`` plus the node rank and Ray node a rank reported (older payloads have neither)."""
    node = p.get("node") if isinstance(p.get("node"), Mapping) else {}
    parts = []
    if node.get("node_rank") is not None:
        parts.append(f"node {node['node_rank']}")
    if node.get("ray_node"):
        parts.append(f"Ray node {str(node['ray_node'])[:12]}")
    return f"{p['host']}:{p['pid']}" + (f" ({', '.join(parts)})" if parts else "")


def _node_ranks(payloads: Sequence[Mapping[str, Any]]) -> dict[int, Any]:
    """rank -> node rank, when the ranks reported more than one node rank (else {}: nothing to add)."""
    found = {}
    for p in payloads:
        node = p.get("node") if isinstance(p.get("node"), Mapping) else {}
        if node.get("node_rank") is not None:
            found[int(p["rank"])] = node["node_rank"]
    return found if len(set(found.values())) > 1 else {}


@dataclass(frozen=True)
class Mismatch:
    variable: str
    values_by_rank: tuple[tuple[int, str | None], ...]

    def describe(self, node_ranks: Mapping[int, Any] | None = None) -> str:
        groups: dict[str | None, list[int]] = {}
        for rank, value in self.values_by_rank:
            groups.setdefault(value, []).append(rank)
        nodes = node_ranks or {}

        def who(ranks: list[int]) -> str:
            text = f"rank{'s' if len(ranks) > 1 else ''} {','.join(map(str, ranks))}"
            on = sorted({nodes[r] for r in ranks if r in nodes}, key=str)
            return text + (f" (node{'s' if len(on) > 1 else ''} {','.join(map(str, on))})" if on else "")

        parts = [f"{who(r)}: {'(unset)' if v is None else repr(v)}" for v, r in groups.items()]
        return f"{self.variable} differs ({'; '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        return {"variable": self.variable, "values_by_rank": {str(r): v for r, v in self.values_by_rank}}


def compare(payloads: Sequence[Mapping[str, Any]]) -> list[Mismatch]:
    """Must-match variables whose value (or presence) differs between ranks."""
    names: set[str] = set()
    for p in payloads:
        names.update(p["values"])
    mismatches = []
    for name in sorted(names):
        values = tuple((int(p["rank"]), p["values"].get(name)) for p in payloads)
        if len({v for _, v in values}) > 1:
            mismatches.append(Mismatch(name, values))
    return mismatches


def format_error(group: str, mismatches: Sequence[Mismatch], payloads: Sequence[Mapping[str, Any]]) -> str:
    hosts = {int(p["rank"]): _where(p) for p in payloads}
    node_ranks = _node_ranks(payloads)
    nodes = sorted(set(node_ranks.values()), key=str)
    on_nodes = f" on nodes {', '.join(map(str, nodes))}" if nodes else ""
    lines = [
        f"NCCL settings differ between ranks of SGLang group '{group}' "
        f"(ranks {', '.join(str(r) for r in sorted(hosts))}{on_nodes}); NCCL does not check this and would hang or "
        "corrupt data:"
    ]
    lines += [f"  - {m.describe(node_ranks)}" for m in mismatches]
    lines.append(
        "  Fix: give every rank the same value (one profile for all nodes; per-node sections only for "
        "node-local variables), or check what else sets NCCL_* on the odd rank(s). Processes: "
        + ", ".join(f"rank {r}={h}" for r, h in sorted(hosts.items()))
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class CheckResult:
    group: str
    ranks: tuple[int, ...]
    fingerprint: str
    mismatches: tuple[Mismatch, ...]
    payloads: tuple[Mapping[str, Any], ...]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _gather_with_timeout(cpu_group: Any, item: dict[str, Any], world_size: int, timeout_s: float) -> list[Any]:
    import torch.distributed as dist

    result: dict[str, Any] = {}

    def run() -> None:
        try:
            # The monitored barrier names the ranks that never arrived (gloo only).
            if hasattr(dist, "monitored_barrier"):
                dist.monitored_barrier(group=cpu_group, timeout=timedelta(seconds=timeout_s), wait_all_ranks=True)
            out: list[Any] = [None] * world_size
            dist.all_gather_object(out, item, group=cpu_group)
            result["out"] = out
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            result["error"] = exc

    # The collective runs in a daemon thread so that a peer that never answers cannot hang
    # this process beyond the timeout (gloo's own group timeout in SGLang is two hours).
    worker = threading.Thread(target=run, name="sglang-eagle-nccl-consistency", daemon=True)
    worker.start()
    worker.join(timeout_s + 5.0)
    if worker.is_alive():
        raise ConsistencyError(
            f"not every rank answered the NCCL settings check within {timeout_s:.0f}s: a peer rank died or is "
            "stuck before creating this group. Check the other ranks' logs; raise the limit with "
            "consistency_timeout_s in the profile's [policy] if start-up is legitimately slow."
        )
    if "error" in result:
        exc = result["error"]
        raise ConsistencyError(
            f"the NCCL settings check failed because a peer rank disappeared or timed out: {exc}"
        ) from exc
    return result["out"]


def check_group(
    cpu_group: Any,
    group_name: str,
    env: Mapping[str, str],
    *,
    timeout_s: float,
    extras: Mapping[str, str] | None = None,
    node: Mapping[str, Any] | None = None,
) -> CheckResult:
    """All-gather the must-match NCCL settings over ``cpu_group``; return what differs."""
    import torch.distributed as dist

    world_size = dist.get_world_size(group=cpu_group)
    rank = dist.get_rank()
    item = payload(env, rank, extras, node)
    gathered = _gather_with_timeout(cpu_group, item, world_size, timeout_s) if world_size > 1 else [item]
    mismatches = compare(gathered)
    return CheckResult(
        group=group_name,
        ranks=tuple(int(p["rank"]) for p in gathered),
        fingerprint=item["fingerprint"],
        mismatches=tuple(mismatches),
        payloads=tuple(gathered),
    )
