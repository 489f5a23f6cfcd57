"""Forged releases must fail the compatibility proof; the real release must pass it (issue 26 item 3).

For five releases spread over 0.4.3 .. 0.5.23 this takes the published wheel from the CI cache,
runs the matrix's own check (``ci/matrix.py``: ``check_source`` on the release, ``check_reliance``
on the statement a forgery attacks) and asserts: the unforged release is ✓, and each forged copy
(``tests/forgery/forge.py``: the hooked target still exists, the behaviour no longer happens) is ✗
with the reason that names what is wrong. Where a forgery goes is read from the unforged proof
(the function on the proven path that makes the call), so the same kinds apply to every release.

Runs with the plain venv and the cached wheels (``python ci/matrix.py --offline`` fills nothing;
``python ci/matrix.py`` downloads them): ``python -m pytest -q -p no:randomly tests/forgery``. Not
in plain ``pytest``'s testpaths (a fresh clone has no wheels); a missing wheel fails, never skips.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import forge  # tests/forgery/forge.py (pytest puts this folder on sys.path)
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ci"))
try:
    import matrix
    from cache_root import cache_root
finally:
    sys.path.pop(0)
CACHE = cache_root()  # read at collection, before tests/conftest.py moves XDG_CACHE_HOME

from sglang_eagle_nccl.knowledge.sglang import patchsets  # noqa: E402

RELEASES = ["0.4.3", "0.5.4.post2", "0.5.10", "0.5.17", "0.5.23"]
SCHEDULER = "sglang.srt.managers.scheduler:Scheduler.__init__"
ENGINE_ENV = "sglang.srt.entrypoints.engine:_set_envs_and_config"
KINDS = ["emptied", "moved", "condition", "dead_branch", "atexit", "namesake_import", "other_class",
         "spawn_conditional"]


def _wheel(version: str) -> Path:
    found = sorted((CACHE / "wheels").glob(f"sglang-{version}-*.whl"))
    if not found:
        pytest.fail(f"SGLang {version}'s wheel is not in {CACHE / 'wheels'}: run `python ci/matrix.py` first")
    return found[0]


class Release:
    def __init__(self, version: str) -> None:
        self.version = version
        self.zf = zipfile.ZipFile(_wheel(version))
        self.sets = patchsets.load_manifests()
        self.patch_set = patchsets.select(version, self.sets).patch_set
        self.shared = matrix.SharedModules()
        self.result = matrix.check_source(version, matrix.zip_reader(self.zf), self.zf.namelist(), self.sets,
                                          self.shared)
        self.shared.done()  # forged trees reuse the parsed modules of every unchanged file

    def proven(self, target: str) -> list[dict]:
        row = next(h for h in self.result["hooks"] if h["target"] == target)
        return [b for b in row.get("behaviours", []) if b["ok"]]

    def check(self, forged: forge.ForgedRelease, target: str, statement: str) -> dict:
        """The matrix's check of one stated behaviour on the forged copy."""
        hook = next(h for h in self.patch_set.hooks if h.target == target)
        reliance = next(r for r in hook.relies_on if r.describe() == statement)
        callbacks = {c for h in self.patch_set.hooks for r in h.relies_on for c in r.callbacks}
        tree = self.shared.tree(forged.read, callbacks)
        return matrix.check_reliance(tree, hook, reliance, forged.namelist())


@pytest.fixture(scope="module", params=RELEASES)
def release(request) -> Release:
    return Release(request.param)


def test_the_real_release_is_proven(release):
    assert release.result["ok"], (release.version, release.result["failures"])


def _method_step(release: Release) -> tuple[str, str, str]:
    """(hook target, statement, key) of the last method of a top-level class on a proven path, not a hook target."""
    targets = {h.target for h in release.patch_set.hooks}
    for target in (SCHEDULER, "sglang.srt.distributed.device_communicators.pynccl:PyNcclCommunicator.__init__"):
        for b in release.proven(target):
            for key in reversed(b.get("steps", [])):
                qual = key.partition(":")[2]
                if qual.count(".") == 1 and "<locals>" not in qual and key not in targets:
                    return target, b["statement"], key
    raise AssertionError(f"{release.version}: no method on a proven path")


def _writes_method_step(release: Release) -> tuple[str, str, str] | None:
    for h in release.result["hooks"]:
        for b in h.get("behaviours", []):
            if b["ok"] and b["statement"].startswith("writes NCCL_ALGO"):
                for key in reversed(b["proofs"][0]["steps"]):
                    qual = key.partition(":")[2]
                    if qual.count(".") == 1 and key != h["target"]:
                        return h["target"], b["statement"], key
    return None


@pytest.mark.parametrize("kind", KINDS)
def test_a_forgery_is_not_proven(release, kind):
    forged = forge.ForgedRelease(release.zf)
    precedes = release.proven(SCHEDULER)[0]
    statement, target = precedes["statement"], SCHEDULER
    caller, subject = precedes["steps"][-2], precedes["steps"][-1]
    name = subject.rpartition(":")[2].rpartition(".")[2]
    if kind == "emptied":
        forge.emptied(forged, caller)
        expected = ["is not called"]
    elif kind == "moved":
        forge.moved_to_namesake(forged, caller)
        expected = ["is not called"]
    elif kind == "condition":
        forge.under_condition(forged, caller, "forged_condition")
        expected = ["only under a condition the statement does not state", "`forged_condition`"]
    elif kind == "dead_branch":
        forge.under_condition(forged, caller, "False")
        expected = ["is not called"]
    elif kind == "atexit":
        forge.behind_atexit(forged, caller)
        expected = ["is not called"]
    elif kind == "namesake_import":
        forge.namesake_import(forged, caller, name, is_class=False)
        expected = ["namesake", "sglang.srt._forged_noop:" + name]
    elif kind == "other_class":
        target, statement, key = _writes_method_step(release) or _method_step(release)
        forge.to_other_class(forged, key)
        expected = []  # the reason depends on which statement: checked below
    else:  # spawn_conditional
        target = ENGINE_ENV
        statement = next(b["statement"] for b in release.proven(ENGINE_ENV) if "set_start_method" in b["statement"])
        forge.call_under_condition(forged, ENGINE_ENV, "set_start_method", "server_args.forged_flag")
        expected = ["only under a condition the statement does not state", "`server_args.forged_flag`"]
    assert forged.files, "the forgery changed nothing"
    result = release.check(forged, target, statement)
    assert result["ok"] is False, (release.version, kind, result)
    for fragment in expected:
        assert fragment in result["reason"], (release.version, kind, result["reason"])
    if kind == "other_class":
        assert any(x in result["reason"] for x in ("no write of", "is not called", "cannot be resolved")), result
