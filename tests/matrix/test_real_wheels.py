"""Facts checked in the published SGLang wheels that ci/matrix.py downloads.

Runs after the matrix (ci/test awaits it first): a missing wheel is a missing install step, so
it fails with the command that fetches it rather than skipping. Not in plain `pytest`'s
testpaths, which must pass on a fresh clone with an empty cache.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from sglang_eagle_nccl.knowledge.sglang import patchsets

# Read at collection, before tests/conftest.py points XDG_CACHE_HOME at a temporary folder (it does
# so that tests sign profiles with a key of their own): the wheels are in the user's cache, found by
# the CI scripts' one rule (ci/cache_root.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ci"))
try:
    from cache_root import cache_root
finally:
    sys.path.pop(0)
CACHE = cache_root()


def _wheel(version: str) -> Path:
    found = sorted((CACHE / "wheels").glob(f"sglang-{version}-*.whl"))
    if not found:
        pytest.fail(f"SGLang {version}'s wheel is not in {CACHE / 'wheels'}: run `python ci/matrix.py` first")
    return found[0]


@pytest.mark.parametrize("version,present", [("0.5.11", True), ("0.5.12.post1", True), ("0.5.13", False)])
def test_v1_multi_layer_eagle_worker_gate_matches_the_real_wheels(version, present):
    """The hook on MultiLayerEagleWorker is gated to 0.5.11-0.5.12.post1 because 0.5.13 removed the module."""
    hook = next(
        h for h in patchsets.select("0.5.11").patch_set.hooks if "multi_layer_eagle_worker:" in h.target
    )
    with zipfile.ZipFile(_wheel(version)) as zf:
        names = set(zf.namelist())
        check = patchsets.check_hook_with_reader(
            lambda rel: zf.read(rel).decode() if rel in names else None, hook
        )
    assert check.ok is present, (version, check)


def _tree(zf: zipfile.ZipFile):
    from sglang_eagle_nccl.knowledge.sglang import callgraph

    names = set(zf.namelist())
    # The SGLang helpers the manifests name as calling the function they are given (0.5.19's run_hook).
    callbacks = {c for s in patchsets.load_manifests() for h in s.hooks for r in h.relies_on for c in r.callbacks}
    return callgraph.SourceTree(lambda rel: zf.read(rel).decode("utf-8", "replace") if rel in names else None,
                                callback_helpers=callbacks)


@pytest.mark.parametrize(
    "version,post_init_writes,resolve_once_writes",
    [
        ("0.5.18", True, None),  # resolution in __post_init__; no resolve_once yet
        ("0.5.19", False, True),  # __post_init__ is empty; resolve_once runs the arg_groups pipeline
        ("0.5.20", False, True),
    ],
)
def test_where_deterministic_inference_writes_nccl_algo(version, post_init_writes, resolve_once_writes):
    """The recorded facts behind tests/fixtures/sglang_facts/resolution.toml, read from the real wheels."""
    from sglang_eagle_nccl.knowledge.sglang import callgraph

    with zipfile.ZipFile(_wheel(version)) as zf:
        tree = _tree(zf)
        for target, expected in (
            ("ServerArgs.__post_init__", post_init_writes),
            ("ServerArgs.resolve_once", resolve_once_writes),
        ):
            # any path: the write is conditional (deterministic inference, TP > 1); where it is, is the question
            reach = callgraph.reach(tree, f"sglang.srt.server_args:{target}", writes=["NCCL_ALGO"], accept=lambda c: True)
            if expected is None:
                assert not reach.found, (version, target)
            else:
                assert bool(reach.writes_of("NCCL_ALGO")) is expected, (version, target)
    hooked = {
        h.target.split(":")[1]
        for h in patchsets.select(version).patch_set.hooks_for(Version(version))
        if h.handler == "server_args_resolution"
    }
    assert hooked == {"ServerArgs.resolve_once" if resolve_once_writes else "ServerArgs.__post_init__"}
