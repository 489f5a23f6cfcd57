"""Shared fixtures. Tests import the plugin as installed (wheel) when run with the venv's
`pytest` executable, or from the checkout when run with `python -m pytest` from the repo."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

try:
    from hypothesis import settings
except ImportError:  # the SGLang venvs' own pytest may lack it; their tests do not use it
    settings = None

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/support helpers

if settings is not None:
    # Property tests assert properties, not speed: a loaded 2-core machine must not fail them on
    # hypothesis' 200 ms deadline. "ci" (the default) is derandomised, so a run is repeatable;
    # "long" (SGLANG_EAGLE_NCCL_HYPOTHESIS=long, ci/mutation) searches ten times as long.
    settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
    settings.register_profile("long", deadline=None, max_examples=1000, print_blob=True)
    # ci/mutation: "ci"'s examples, without shrinking a failing one. A mutant is killed by the first
    # failure; shrinking it only costs time (minutes per mutant of a reader that loops on every line).
    from hypothesis import Phase

    settings.register_profile("mutation", settings.get_profile("ci"),
                              phases=[p for p in Phase if p not in (Phase.shrink, Phase.explain)])
    settings.load_profile(os.environ.get("SGLANG_EAGLE_NCCL_HYPOTHESIS", "ci"))


@pytest.fixture(scope="session", autouse=True)
def private_handoff_key(tmp_path_factory):
    """Tests sign serialised profiles with a key of their own, never the user's (XDG_CACHE_HOME)."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture
def clean_environ(monkeypatch):
    """Remove every NCCL / plugin variable for the test; monkeypatch restores them after."""
    for key in list(os.environ):
        if key.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")):
            monkeypatch.delenv(key, raising=False)
    return os.environ


@pytest.fixture
def environ_guard():
    """Assert the test left os.environ exactly as it found it."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = {
        k for k in set(before) | set(after) if before.get(k) != after.get(k) and k != "PYTEST_CURRENT_TEST"
    }
    assert not changed, f"os.environ changed: {sorted(changed)}"
