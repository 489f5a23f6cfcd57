"""The patch manifests as SGLang's processes read them: a JSON index, checked against the TOML files.

:mod:`~sglang_eagle_nccl.knowledge.sglang.patchsets` is the one reader of ``patches/*.toml`` (TOML,
``packaging`` specifiers, frozen dataclasses, target checks in SGLang's source). Running it in
every SGLang process costs ~85 M instructions before a single hook is installed (~25 ms on a
2-core CI machine; see bench/registration.py), so its result is also kept as
``patches/index.json``: written from what ``patchsets`` parsed (``python -m
sglang_eagle_nccl.contract.manifests``), committed next to the manifests and shipped with
them in the wheel. A process trusts the index only when it records the SHA-256 of exactly the
manifest files present; otherwise (a manifest edited and the index not regenerated) it returns
None and the caller falls back to ``patchsets``: slower, never wrong.
``tests/unit/knowledge/sglang/test_manifest_index.py`` fails while the committed index is stale, and proves that
both paths select the same hooks.

The classes below carry the attributes of ``patchsets.Hook`` / ``PatchSet`` / ``Selection``
that the runtime reads, as plain ``__slots__`` classes: building frozen dataclasses is most of
what importing ``patchsets`` costs.
"""

from __future__ import annotations

import os

from sglang_eagle_nccl.contract.hook_target import TargetNames
from sglang_eagle_nccl.contract.versions import in_range, parse, public

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence
    from typing import Any

    from packaging.version import Version

INDEX_NAME = "index.json"
FORMAT = 1

HOOK_FIELDS = ("target", "kind", "handler", "required", "params", "versions", "when", "mechanism", "process")
SET_FIELDS = ("id", "title", "versions", "tested_through", "tested", "mechanism", "sglang_writes", "correctness_writes",
              "notes")
# Read by the compatibility matrix and doctor, never at start-up: the index leaves them out.
OFFLINE_HOOK_FIELDS = ("relies_on",)


# --- the runtime's view of a manifest ----------------------------------------------------------


class IndexedHook(TargetNames):
    """The fields of ``patchsets.Hook``; same names, same meaning."""

    __slots__ = HOOK_FIELDS

    def __init__(self, target: str, kind: str, handler: str, required: bool, params: Sequence[str] = (),
                 versions: str | None = None, when: str = "always", mechanism: str | None = None,
                 process: str = "") -> None:
        self.target = target
        self.kind = kind
        self.handler = handler
        self.required = required
        self.params = tuple(params)
        self.versions = versions
        self.when = when
        self.mechanism = mechanism
        self.process = process

    def applies_to(self, version: Version) -> bool:
        return self.versions is None or in_range(self.versions, version)

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target, "kind": self.kind, "handler": self.handler, "required": self.required,
            "params": list(self.params), "versions": self.versions, "when": self.when, "mechanism": self.mechanism,
        }

    def __repr__(self) -> str:
        return f"IndexedHook({self.target!r}, {self.kind!r}, {self.handler!r})"


class IndexedPatchSet:
    """The fields and selection methods of ``patchsets.PatchSet``."""

    __slots__ = (*SET_FIELDS, "hooks", "path")

    def __init__(self, data: dict[str, Any], hooks: tuple[IndexedHook, ...], path: str) -> None:
        self.id: str = data["id"]
        self.title: str = data["title"]
        self.versions: str = data["versions"]
        self.tested_through: str = data["tested_through"]
        self.tested: tuple[str, ...] = tuple(data["tested"])
        self.mechanism: str = data["mechanism"]
        self.sglang_writes: tuple[str, ...] = tuple(data["sglang_writes"])
        self.correctness_writes: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
            (str(flag), tuple(variables)) for flag, variables in data["correctness_writes"]
        )
        self.notes: str = data["notes"]
        self.hooks = hooks
        self.path = path

    def contains(self, version: Version) -> bool:
        return in_range(self.versions, version)

    def hooks_for(self, version: Version, *, cli: bool | None = None) -> list[IndexedHook]:
        hooks = [h for h in self.hooks if h.applies_to(version)]
        if cli is not None:
            hooks = [h for h in hooks if cli or h.when != "cli"]
        return hooks

    def mechanism_of(self, hook: IndexedHook) -> str:
        return hook.mechanism or self.mechanism


class IndexedSelection:
    """``patchsets.Selection`` for a release the selected set was proven on."""

    __slots__ = ("version", "patch_set", "status")

    def __init__(self, version: str, patch_set: IndexedPatchSet, status: str) -> None:
        self.version = version
        self.patch_set = patch_set
        self.status = status

    @property
    def tested(self) -> bool:
        return self.status == "tested"


# --- reading ------------------------------------------------------------------------------------


def manifest_dir() -> str:
    """Where the manifests are: inside the installed package, else the checkout's top-level patches/."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    packaged = os.path.join(package, "patches")
    if os.path.isdir(packaged):
        return packaged
    return os.path.join(os.path.dirname(package), "patches")


def _sha256_of(path: str) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


_LOADED: dict[str, tuple[IndexedPatchSet, ...] | None] = {}


def load(directory: str | None = None) -> tuple[IndexedPatchSet, ...] | None:
    """The patch sets of the index (oldest first, as ``load_manifests``), or None if it is missing or stale."""
    folder = directory or manifest_dir()
    if folder not in _LOADED:
        _LOADED[folder] = _read(folder)
    return _LOADED[folder]


def _read(folder: str) -> tuple[IndexedPatchSet, ...] | None:
    import json

    try:
        with open(os.path.join(folder, INDEX_NAME), "rb") as f:
            index = json.loads(f.read())
        recorded = index["manifests"]
        present = sorted(name for name in os.listdir(folder) if name.endswith(".toml"))
        if index.get("format") != FORMAT or present != sorted(recorded):
            return None
        if any(_sha256_of(os.path.join(folder, name)) != recorded[name] for name in present):
            return None
        return tuple(
            IndexedPatchSet(
                entry,
                tuple(IndexedHook(**hook) for hook in entry["hooks"]),
                os.path.join(folder, entry["file"]),
            )
            for entry in index["patch_sets"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        # No index, or one this version cannot read: patchsets parses the manifests instead.
        return None


def select(version: str, directory: str | None = None) -> IndexedSelection | None:
    """The patch set a *tested* SGLang release selects, from the index; None: ask ``patchsets``.

    Tested means this exact release (a local label such as ``+cu130`` dropped) is one of the
    set's ``tested`` releases: the compatibility matrix checked its wheel. None for everything
    ``patchsets.select`` has more to say about: no usable index, a version that does not parse,
    a pre-release or dev build, a version no set contains (its error), a release the matrix
    never checked (newer than the set was proven on, never published such as 0.5.0, or
    published after this plugin was built): the caller checks the targets in SGLang's source.
    """
    from packaging.version import InvalidVersion

    sets = load(directory)
    if sets is None:
        return None
    try:
        v = parse(version)
    except InvalidVersion:
        return None
    if v.is_prerelease or v.is_devrelease or v.epoch:
        return None
    release = str(public(v))
    for patch_set in sets:
        if patch_set.contains(v):
            return IndexedSelection(version, patch_set, "tested") if release in patch_set.tested else None
    return None
