"""What the hooks do to ``os.environ`` (apply a group's values, restore the profile over SGLang's writes),
and noticing when someone else wrote over it.

The planning and comparing functions here are pure; every write goes through the one writer,
:mod:`sglang_eagle_nccl.inproc.boot.environ` (one guard: only the plugin's names, nothing a C
environment cannot hold, all or nothing).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from sglang_eagle_nccl.contract.names import is_allowed_name
from sglang_eagle_nccl.contract.names import nccl_snapshot as nccl_snapshot
from sglang_eagle_nccl.inproc.boot import environ as _writer

ChangeKind = Literal["added", "changed", "unchanged", "removed"]


@dataclass(frozen=True)
class Change:
    name: str
    before: str | None
    after: str | None

    @property
    def kind(self) -> ChangeKind:
        if self.before is None:
            return "removed" if self.after is None else "added"
        if self.after is None:
            return "removed"
        return "unchanged" if self.before == self.after else "changed"

    def to_dict(self) -> dict[str, str | None]:
        return {"name": self.name, "kind": self.kind, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class ApplyReport:
    changes: tuple[Change, ...]

    def of_kind(self, kind: ChangeKind) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]

    @property
    def added(self) -> list[Change]:
        return self.of_kind("added")

    @property
    def changed(self) -> list[Change]:
        return self.of_kind("changed")

    @property
    def unchanged(self) -> list[Change]:
        return self.of_kind("unchanged")

    def to_dict(self) -> dict[str, list[dict[str, str | None]]]:
        return {k: [c.to_dict() for c in self.of_kind(k)] for k in ("added", "changed", "unchanged")}


@dataclass(frozen=True)
class Overwrite:
    """A value someone else (SGLang) wrote over the profile, and what the plugin did about it."""

    name: str
    profile_value: str
    foreign_value: str | None  # None: they removed it
    restored: bool  # False when policy lets the foreign write stand (sglang_wins)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "profile_value": self.profile_value,
            "foreign_value": self.foreign_value,
            "restored": self.restored,
        }


def plan(desired: Mapping[str, str], environ: Mapping[str, str]) -> ApplyReport:
    return ApplyReport(tuple(Change(k, environ.get(k), v) for k, v in sorted(desired.items())))


def _guard(names: Collection[str]) -> None:
    bad = [n for n in names if not is_allowed_name(n)]
    if bad:  # unreachable through validated profiles; kept so no caller can bypass it
        raise ValueError(f"refusing to set non-NCCL variables: {', '.join(sorted(bad))}")


def apply(desired: Mapping[str, str]) -> ApplyReport:
    """Write ``desired`` into the environment (NCCL names only); return what was added / changed / unchanged."""
    _guard(desired)
    return ApplyReport(tuple(Change(n, b, a) for n, b, a in _writer.write(dict(desired))))


def put_back(saved: Mapping[str, str | None]) -> None:
    """Return variables to the values recorded in ``saved`` (None: the variable was unset).

    Used after temporarily changing the environment (per-group overrides while a group is built);
    it only ever restores.
    """
    _writer.put_back(saved)


def diff(before: Mapping[str, str], after: Mapping[str, str]) -> list[Change]:
    """Every NCCL variable that differs between two snapshots (what a third party wrote)."""
    names = sorted(set(before) | set(after))
    return [Change(n, before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n)]


def find_overwrites(
    desired: Mapping[str, str], environ: Mapping[str, str], *, keep: Collection[str] = ()
) -> list[Overwrite]:
    """Values in ``environ`` that differ from ``desired`` (pure); ``keep`` names are left as they are."""
    return [
        Overwrite(name, value, environ.get(name), restored=name not in keep)
        for name, value in sorted(desired.items())
        if environ.get(name) != value
    ]


def restore(desired: Mapping[str, str], *, keep: Collection[str] = ()) -> list[Overwrite]:
    """Re-apply ``desired`` over values someone else wrote since; report each overwrite."""
    _guard(desired)
    overwrites = find_overwrites(desired, os.environ, keep=keep)
    _writer.write({o.name: o.profile_value for o in overwrites if o.restored})
    return overwrites
