"""Writing ``patches/index.json``: the start-up model of the manifests (:mod:`sglang_eagle_nccl.contract.manifests`),
built from what :mod:`~sglang_eagle_nccl.knowledge.sglang.patchsets` parsed.

``python -m sglang_eagle_nccl.knowledge.sglang.manifest_index [--check] [DIR]`` rewrites (or checks) it;
``tests/unit/knowledge/sglang/test_manifest_index.py`` fails while the committed index is stale.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from sglang_eagle_nccl.contract.manifests import (
    FORMAT,
    HOOK_FIELDS,
    INDEX_NAME,
    OFFLINE_HOOK_FIELDS,
    SET_FIELDS,
    _sha256_of,
    manifest_dir,
)


def build(sets: Iterable[Any], folder: str) -> dict[str, Any]:
    """The index of ``sets`` (``patchsets.PatchSet`` objects parsed from ``folder``)."""
    from dataclasses import fields

    entries = []
    for patch_set in sets:
        entry: dict[str, Any] = {name: getattr(patch_set, name) for name in SET_FIELDS}
        entry["file"] = os.path.basename(patch_set.path)
        # What a hook relies on (relies_on) is proven by the compatibility matrix and shown by doctor;
        # start-up never reads it, so the index does not carry it.
        entry["hooks"] = [{f.name: getattr(hook, f.name) for f in fields(hook) if f.name not in OFFLINE_HOOK_FIELDS}
                          for hook in patch_set.hooks]
        extra = {f.name for f in fields(patch_set)} - {*SET_FIELDS, "hooks", "path"}
        if extra or any(set(h) != set(HOOK_FIELDS) for h in entry["hooks"]):
            # A field added to the manifests must reach the runtime too: update the classes above.
            raise ValueError(f"patchsets has fields the index does not carry: {sorted(extra) or HOOK_FIELDS}")
        entries.append(entry)
    manifests = {name: _sha256_of(os.path.join(folder, name)) for name in sorted(os.listdir(folder)) if name.endswith(".toml")}
    return {"format": FORMAT, "manifests": manifests, "patch_sets": entries}


def render(index: dict[str, Any]) -> str:
    import json

    return json.dumps(index, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def expected_text(folder: str | None = None) -> str:
    """What ``index.json`` must contain for the manifests in ``folder`` (parsed by ``patchsets``)."""
    from sglang_eagle_nccl.knowledge.sglang.patchsets import load_manifests

    folder = folder or manifest_dir()
    return render(build(load_manifests(folder), folder))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sglang_eagle_nccl.knowledge.sglang.manifest_index [--check] [DIR]``: rewrite (or check) the index."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    folders = [a for a in args if a != "--check"]
    folder = folders[0] if folders else manifest_dir()
    text = expected_text(folder)
    path = os.path.join(folder, INDEX_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            current = f.read()
    except OSError:
        current = None
    if check:
        if current != text:
            print(f"{path} is stale: run python -m sglang_eagle_nccl.knowledge.sglang.manifest_index", file=sys.stderr)
            return 1
        return 0
    if current != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
