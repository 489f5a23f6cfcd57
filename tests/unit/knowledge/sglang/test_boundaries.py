"""The patch manifests' boundaries, pinned from facts recorded in the published wheels.

``tests/fixtures/sglang_facts/resolution.toml`` keeps, per release at a boundary, skeletons of the
SGLang source that decides where server-argument resolution (and deterministic inference's NCCL
writes) runs. These tests run the call graph on them under the shipped manifests: the hook the
manifest applies to each release must reach every correctness write, and no write may be left to a
hook that does not apply. Moving a boundary back (hooking ``__post_init__`` on 0.5.19, where it is
empty) fails here without any wheel.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from sglang_eagle_nccl.knowledge._toml import loads as toml_loads
from sglang_eagle_nccl.knowledge.sglang import callgraph, patchsets

FACTS = toml_loads(
    (Path(__file__).resolve().parents[3] / "fixtures" / "sglang_facts" / "resolution.toml").read_text("utf-8")
)
RESOLUTION = {r["version"]: r for r in FACTS["release"]}


def _resolution_hooks(version: str) -> list[patchsets.Hook]:
    selection = patchsets.select(version)
    return [
        h for h in selection.patch_set.hooks_for(Version(version)) if h.handler == "server_args_resolution"
    ]


def _correctness_variables(version: str) -> list[str]:
    ps = patchsets.select(version).patch_set
    return sorted({v for _, variables in ps.correctness_writes for v in variables})


@pytest.mark.parametrize("version", sorted(RESOLUTION, key=Version))
def test_the_resolution_hook_reaches_every_correctness_write(version):
    files = RESOLUTION[version]["files"]
    tree = callgraph.SourceTree(files.get)
    variables = _correctness_variables(version)
    writes = [
        w
        for rel in files
        if rel.endswith(".py")
        for w in callgraph.writes_in_module(
            tree, rel[:-3].replace("/", ".").removesuffix(".__init__"), variables
        )
    ]
    hooks = _resolution_hooks(version)
    assert len(hooks) == 1, f"exactly one resolution hook applies to {version}: {[h.target for h in hooks]}"
    hook = hooks[0]
    reach = callgraph.reach(tree, hook.target, accept=lambda c: True)  # any path: the hook sees a conditional write
    assert reach.found, f"{hook.target} is not in the recorded source of {version}"
    reached = {(w.variable, w.line) for w, _ in reach.writes}
    for write in writes:
        assert (write.variable, write.line) in reached, (
            f"{version}: {write.variable} at {write.where()} not reachable from {hook.target}"
        )
    # What the hook claims on this release is exactly what the source does.
    claimed = {
        v for r in hook.relies_on if r.kind == "writes" and r.applies_to(Version(version)) for v in r.subject
    }
    assert claimed == {w.variable for w in writes}, version


def test_0_5_19_moved_resolution_out_of_post_init():
    """The boundary this issue moved: on 0.5.19 __post_init__ exists (a name check passes) but writes nothing."""
    tree = callgraph.SourceTree(RESOLUTION["0.5.19"]["files"].get)
    post_init = callgraph.reach(tree, "sglang.srt.server_args:ServerArgs.__post_init__", accept=lambda c: True)
    assert post_init.found and post_init.writes == []
    assert [h.target for h in _resolution_hooks("0.5.19")] == [
        "sglang.srt.server_args:ServerArgs.resolve_once"
    ]
    assert [h.target for h in _resolution_hooks("0.5.18")] == [
        "sglang.srt.server_args:ServerArgs.__post_init__"
    ]
    tree18 = callgraph.SourceTree(RESOLUTION["0.5.18"]["files"].get)
    assert callgraph.reach(tree18, "sglang.srt.server_args:ServerArgs.resolve_once").found is False


@pytest.mark.parametrize("fact", FACTS["eagle_worker_v2"], ids=lambda f: f["version"])
def test_eagle_worker_v2_is_hooked_from_the_release_that_ships_it(fact):
    selection = patchsets.select(fact["version"])
    targets = {h.target for h in selection.patch_set.hooks_for(Version(fact["version"]))}
    assert ("sglang.srt.speculative.eagle_worker_v2:EAGLEWorkerV2.__init__" in targets) is fact["present"]
