"""Which all-reduce implementations SGLang has, the order it tries them in and the sizes each takes,
per release, and the audit's lines for one group's description.

SGLang carries many all-reduces of a group outside NCCL (custom all-reduce, PCIe IPC, torch
symmetric memory, MSCCL++, quick all-reduce on ROCm, FlashInfer) and only the rest through its own
PyNccl communicator (inside CUDA graphs) or torch's ProcessGroupNCCL (eager). Tuning NCCL for
decode and EAGLE verify only matters when those small messages reach NCCL at all, so the audit
records, per group and process, what SGLang built and the byte bounds it will apply.

This module holds the facts and the words:

* the order SGLang tries the implementations in and their size rules, per release, as data
  (``data/allreduce_paths.toml``; read with :func:`dispatch_for` / :func:`limits_for` /
  :func:`path_info`);
* :func:`format_paths`, which turns one group's description into audit lines.

The description is read from the live objects inside SGLang's process by
:func:`sglang_eagle_nccl.inproc.evidence.allreduce_readers.describe_group`; what a message of a given
size would take is predicted by :mod:`sglang_eagle_nccl.offline.sizes.paths`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from packaging.version import Version

from sglang_eagle_nccl.contract import versions
from sglang_eagle_nccl.knowledge._toml import loads as toml_loads

__all__ = [
    "DispatchRange",
    "DispatchStep",
    "PathInfo",
    "dispatch_for",
    "fmt_bytes",
    "format_paths",
    "limits_for",
    "normalize_version",
    "order_note",
    "path_info",
]

MiB = 1024 * 1024


# --------------------------------------------------------------------------------------------------
# The data
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PathInfo:
    name: str
    title: str
    what: str
    attrs: tuple[str, ...]
    nccl: bool
    modes: str


@dataclass(frozen=True)
class DispatchStep:
    path: str
    when: str
    unless: tuple[str, ...] = ()
    scope: str | None = None  # pynccl_symm_mem: "tensor" (marked tensors only) or "all"
    size_checked: bool | None = None  # torch_symm_mem_inplace


@dataclass(frozen=True)
class DispatchRange:
    versions: str
    checked: tuple[str, ...]
    source: str
    order: tuple[DispatchStep, ...]
    note: str | None = None

    @property
    def newest_checked(self) -> str:
        return max(self.checked, key=Version)


@functools.cache
def _data() -> dict[str, Any]:
    text = resources.files("sglang_eagle_nccl.knowledge.sglang").joinpath("data/allreduce_paths.toml").read_text("utf-8")
    return toml_loads(text)


@functools.cache
def path_info(name: str) -> PathInfo:
    """What one implementation is (title, attribute, NCCL or not), from the data file."""
    row = _data()["paths"][name]
    return PathInfo(name, row["title"], row["what"], tuple(row["attrs"]), bool(row["nccl"]), row["modes"])


@functools.cache
def _dispatch_ranges() -> tuple[DispatchRange, ...]:
    ranges = []
    for row in _data()["dispatch"]:
        steps = tuple(
            DispatchStep(
                path=s["path"], when=s["when"], unless=tuple(s.get("unless", ())), scope=s.get("scope"),
                size_checked=s.get("size_checked"),
            )
            for s in row["order"]
        )
        ranges.append(DispatchRange(row["versions"], tuple(row["checked"]), row["source"], steps, row.get("note")))
    return tuple(ranges)


def normalize_version(version: str | Version) -> Version:
    """The release whose code ``version`` runs (:func:`~sglang_eagle_nccl.contract.versions.stands_for`:
    ``0.5.24rc1`` -> 0.5.24, ``0.5.23+cu130`` -> 0.5.23; post releases stay, 0.5.4.post3 changed the
    dispatch). Raises ``InvalidVersion`` for a non-PEP 440 string."""
    return versions.stands_for(version if isinstance(version, Version) else str(version))


def _in(spec: str, version: Version) -> bool:
    return versions.contains(spec, version)


def dispatch_for(version: str | Version) -> DispatchRange | None:
    """The all-reduce order of an SGLang release, or None for releases older than 0.4.3.

    A release newer than the newest checked one gets the newest order (the last range is open)."""
    v = normalize_version(version)
    for entry in _dispatch_ranges():
        if _in(entry.versions, v):
            return entry
    return None


def limits_for(path: str, version: str | Version) -> dict[str, Any] | None:
    """The size rules of implementation ``path`` (``custom_allreduce_v1``, ``custom_allreduce_v2``,
    ``torch_symm_mem``, ``pcie_ipc``, ``mscclpp``, ``pynccl_symm_mem``) in ``version``, or None when
    that release does not have it."""
    v = normalize_version(version)
    for row in _data()["limits"].get(path, ()):
        if _in(row["versions"], v):
            return dict(row)
    return None


def fmt_bytes(n: int | None) -> str:
    """``16777216`` -> ``16777216 bytes (16 MiB)``; exact bytes first, a rounded unit for reading."""
    if n is None:
        return "unknown"
    for unit, size in (("GiB", 1024**3), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            value = n / size
            shown = f"{value:.0f}" if value == int(value) else f"{value:.1f}"
            return f"{n} bytes ({shown} {unit})"
    return f"{n} bytes"


def order_note(entry: DispatchRange, version: Version) -> str | None:
    """The note of an order used for ``version``: that it is assumed for a release newer than the newest
    checked one (the last range is open), else the range's own note."""
    newest = Version(entry.newest_checked)
    if version > newest and entry is _dispatch_ranges()[-1]:
        return f"SGLang {version} is newer than the newest release checked ({newest}); its order is assumed unchanged"
    return entry.note


# --------------------------------------------------------------------------------------------------
# The audit's lines for one group's description
# --------------------------------------------------------------------------------------------------


def format_paths(description: Mapping[str, Any]) -> list[str]:
    """Audit lines for one :func:`describe_group` result (no trailing newlines)."""
    d = description
    lines = []
    try:
        backend = d.get("device_group_backend") or "unknown"
        nccl_word = {True: "NCCL", False: "not NCCL"}.get(d.get("device_group_is_nccl"), "backend unknown")
        lines.append(
            f"all-reduce paths of group {d.get('group')!r} ({d.get('unique_name')}): {d.get('world_size')} rank(s), "
            f"device {d.get('device')}, device group {backend} ({nccl_word}), SGLang {d.get('sglang_version') or 'unknown'}"
        )
        impls = d.get("implementations", {})
        order = d.get("order") or []
        if d.get("world_size") == 1:
            order = []  # nothing to try: a one-rank group returns before the order
        elif order:
            lines.append(f"  order SGLang tries ({d.get('order_source')}):")
            if d.get("order_note"):
                lines.append(f"    note: {d['order_note']}")
            width = max(len(s["title"]) for s in order)
            for i, step in enumerate(order, 1):
                impl = impls.get(step["implementation"], {})
                state = {True: "on ", False: "off"}.get(step.get("active"), "?  ")
                detail = impl.get("carries") if step["active"] else (impl.get("why_not") or "")
                if step["path"] == "pynccl_symm_mem" and impl.get("enabled") and not step["active"]:
                    detail = "symmetric memory off (--enable-symm-mem not given)" if step["active"] is False else "symmetric memory state unknown"
                if step["path"] == "pynccl_piecewise" and step["active"]:
                    detail = "only inside a piecewise CUDA graph"
                lines.append(f"    {i:>2}. {step['title']:<{width}}  {state}  {detail}")
        else:
            lines.append(f"  order SGLang tries: unknown for SGLang {d.get('sglang_version') or '(version unknown)'}")
            for impl in impls.values():
                state = "on " if impl.get("enabled") else "off"
                lines.append(f"    - {impl['title']}: {state} {impl.get('carries') if impl.get('enabled') else impl.get('why_not') or ''}")
        if d.get("summary"):
            lines.append(f"  => {d['summary']}")
        if d.get("error"):
            lines.append(f"  (could not read everything: {d['error']})")
    except Exception as exc:  # noqa: BLE001 - a malformed description still yields a line
        lines.append(f"all-reduce paths: cannot format ({type(exc).__name__}: {exc})")
    return lines
