"""Facts checked in the published SGLang wheels that ci/matrix.py downloads.

Runs after the matrix (ci/test awaits it first): a missing wheel is a missing install step, so
it fails with the command that fetches it rather than skipping. Not in plain `pytest`'s
testpaths, which must pass on a fresh clone with an empty cache.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from sglang_eagle_nccl.knowledge.sglang import patchsets

# Read at collection, before tests/conftest.py points XDG_CACHE_HOME at a temporary folder (it does
# so that tests sign profiles with a key of their own): the wheels are in the user's cache.
CACHE = Path(
    os.environ.get("SGLANG_EAGLE_NCCL_CACHE")
    or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sglang-eagle-nccl")
)


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
