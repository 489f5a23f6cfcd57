"""The behaviour proof on the installed SGLang (start-up on an untested release, and ``doctor``), cached.

On an SGLang no manifest was proven on (0.5.24 will come), names and parameters are not enough: a
hook whose target exists but no longer does the work would be installed on nothing. This runs
the same resolved, condition-aware proof as the compatibility matrix
(:mod:`~sglang_eagle_nccl.knowledge.sglang.proof`) on the installed source, for every hook of the
selected patch set with a stated behaviour.

Cost and where it runs: a cold proof parses a few hundred of SGLang's modules (seconds; measured
by ``bench/proof_startup.py``, result in ``bench/results/``). The result is cached in the user's
cache directory under a key made of the installed wheel's ``RECORD`` file (pip writes a hash of
every installed file there, so any change to SGLang's files changes it) and of the analysing
code and manifests; a cached result is a few milliseconds to read. Only a process that is not a
``multiprocessing`` child proves on a miss (the launcher, ``doctor``); SGLang's spawned children
(the scheduler) read the launcher's result and never parse SGLang on their critical path: on a
miss they skip the behaviour proof and say so (the launcher has already refused or marked it).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

PROOF_FORMAT = 1
HERE = Path(__file__).resolve().parent
# The analysing code, part of the cache key: a change to any of these proves again.
ANALYSIS_MODULES = ("callgraph", "callgraph_names", "callgraph_conditions", "proof")


def record_file(root: Path) -> Path | None:
    """The installed SGLang's ``RECORD`` (in its dist-info folder next to the package: contract.versions)."""
    from sglang_eagle_nccl.contract.versions import record_beside

    found = record_beside(str(root))
    return Path(found) if found else None


def cache_key(root: Path, manifest_text: str) -> str | None:
    """Hash of the installed wheel's RECORD, the analysing code and the manifest; None without a RECORD."""
    record = record_file(root)
    if record is None:
        return None
    h = hashlib.sha256()
    h.update(f"{PROOF_FORMAT}\0".encode())
    for part in (record, *(HERE / f"{m}.py" for m in ANALYSIS_MODULES)):
        h.update(part.read_bytes())
        h.update(b"\0")
    h.update(manifest_text.encode("utf-8"))
    return h.hexdigest()[:32]


def cache_dir() -> Path | None:
    from sglang_eagle_nccl.contract.handoff import key_path

    key = key_path()
    return Path(key).parent / "proofs" if key else None


def _is_child() -> bool:
    import multiprocessing

    return multiprocessing.parent_process() is not None


def prove_installed(patch_set: Any, version: str, root: Path, *, cli: bool = True,
                    compute: bool | None = None) -> dict[str, list[dict[str, Any]]] | None:
    """``{hook target: [proof dicts]}`` for the hooks of ``patch_set`` that state a behaviour on ``version``.

    From the cache when the installed wheel, the code and the manifest are unchanged; otherwise
    proven now when ``compute`` (default: unless this process is a multiprocessing child), else None.
    """
    manifest_text = Path(patch_set.path).read_text("utf-8") if patch_set.path else ""
    key = cache_key(root, manifest_text)
    folder = cache_dir()
    path = folder / f"{key}-{'cli' if cli else 'run'}.json" if key and folder else None
    if path is not None:
        try:
            return json.loads(path.read_text("utf-8"))["hooks"]
        except (OSError, ValueError, KeyError):
            pass
    if compute is None:
        compute = not _is_child()
    if not compute:
        return None
    # The proof's imports only where it runs: a hit or a skip needs none of them.
    from packaging.version import Version

    from sglang_eagle_nccl.knowledge.sglang import callgraph, proof

    v = Version(version)
    hooks = [h for h in patch_set.hooks_for(v, cli=cli) if h.is_sglang and h.relies_on]
    callbacks = {c for h in hooks for r in h.relies_on for c in r.callbacks}
    tree = callgraph.SourceTree(_reader(root), callback_helpers=callbacks)
    out: dict[str, list[dict[str, Any]]] = {}
    for hook in hooks:
        out[hook.target] = [proof.prove(tree, hook.target, r).to_dict() for r in hook.relies_on if r.applies_to(v)]
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"format": PROOF_FORMAT, "version": version, "hooks": out}), "utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # an unwritable cache costs time, never the answer
    return out


def _reader(root: Path):
    def read(rel: str) -> str | None:
        path = root / rel
        return path.read_text("utf-8", errors="replace") if path.is_file() else None

    return read


def unproven(proofs: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """``{target: reason}`` for each hook with a stated behaviour that is not proven."""
    out = {}
    for target, items in proofs.items():
        failed = [p for p in items if not p.get("ok")]
        if failed:
            out[target] = "; ".join(f"{p['statement']}: {p.get('reason', '')}" for p in failed)
    return out
