"""The "ran" tier (ci/ran.py): which releases it runs, and the shape of its committed results.

The rule (ci/ran.py's docstring): both sides of every version bound a patch manifest draws, and the
newest release of each minor line. It is checked two ways: on generated release lists and bounds against a
reference written here with ``packaging``'s own version order, and on the real manifests, where a boundary
is found independently -- two neighbouring published releases on which some ``versions`` specifier of a
manifest gives different answers -- and both must have an entry in ci/ran_results.json. A new boundary
(a hook that starts or stops at a release) without a run fails here.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from sglang_eagle_nccl.knowledge._toml import loads as toml_loads

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "ci"))
try:
    import matrix
    import ran
finally:
    sys.path.pop(0)

RESULTS = json.loads((REPO / "ci" / "ran_results.json").read_text("utf-8"))
STATUSES = {"ok", "fail", "n/a"}

_release = st.builds(
    lambda a, b, c, post: f"{a}.{b}.{c}" + ("" if post is None else f".post{post}"),
    st.integers(0, 1), st.integers(0, 6), st.integers(0, 12), st.one_of(st.none(), st.integers(0, 3)),
)


def _reference(releases: list[str], bounds: list[tuple[str, str]]) -> set[str]:
    ordered = sorted(set(releases), key=Version)
    picked = set()
    for op, bound in bounds:
        spec = SpecifierSet(f"{op}{bound}")
        # The upper side of a bound: inside a lower bound (>=, >), outside an upper one (<, <=).
        upper = [v for v in ordered if (v in spec) == (op in (">=", ">"))]
        lower = [v for v in ordered if v not in upper]
        picked |= set(lower[-1:]) | set(upper[:1])
    lines: dict[tuple[int, int], str] = {}
    for v in ordered:
        lines[Version(v).release[:2]] = v
    return picked | set(lines.values())


@settings(max_examples=300)
@given(
    releases=st.lists(_release, min_size=1, max_size=25, unique=True),
    bounds=st.lists(st.tuples(st.sampled_from([">=", "<", ">", "<="]), _release), max_size=5),
)
def test_selection_is_both_sides_of_every_bound_and_the_newest_of_each_line(releases, bounds):
    specs = [(",".join(f"{op}{b}" for op, b in bounds[i:i + 2]), f"m{i}.toml: hook") for i in range(0, len(bounds), 2)]
    chosen = ran.select(releases, specs)
    assert set(chosen) == _reference(releases, bounds)
    # Newest first, every release with a reason.
    assert list(chosen) == sorted(chosen, key=Version, reverse=True)
    assert all(chosen[v] for v in chosen)


@pytest.mark.parametrize("bad", ["0.5", "0.5.3rc1", "1.0.0.dev1", "0.5.3.post", "v0.5.3", "0.5.3+local"])
def test_versions_this_tier_cannot_order_are_refused(bad):
    with pytest.raises(ValueError, match="not a release version"):
        ran.release_key(bad)


def test_an_exact_release_runs_with_its_neighbours():
    # A statement about one release (a proof's condition, e.g. "==0.5.4.post2") draws two bounds: the release
    # and the releases on each side of it are run.
    chosen = ran.select(["0.5.2", "0.5.3", "0.5.3.post1", "0.5.4"], [("==0.5.3", "m.toml: hook x")])
    assert {"0.5.2", "0.5.3", "0.5.3.post1"} <= set(chosen)


@pytest.mark.parametrize("spec", ["!=0.5.3", "~=0.5.3", ">=0.5", "0.5.3", ">=0.5.3rc1"])
def test_bounds_it_cannot_place_are_refused_naming_the_manifest(spec):
    with pytest.raises(ValueError, match="m.toml"):
        ran.select(["0.5.3", "0.5.4"], [(spec, "m.toml: hook x")])


def test_post_releases_order_after_their_release():
    assert ran.release_key("0.5.3") < ran.release_key("0.5.3.post1") < ran.release_key("0.5.4")
    assert sorted(["0.5.3.post2", "0.5.3", "0.5.10", "0.5.3.post1"], key=ran.release_key) == sorted(
        ["0.5.3.post2", "0.5.3", "0.5.10", "0.5.3.post1"], key=Version)


def _manifest_specs() -> list[str]:
    """Every ``versions`` string anywhere in the manifests (walked here, not with ci/ran.py's reader)."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "versions" and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for path in sorted((REPO / "patches").glob("*.toml")):
        walk(toml_loads(path.read_text("utf-8")))
    return found


def _published() -> list[str]:
    return [r["version"] for r in toml_loads((REPO / "ci" / "versions.toml").read_text("utf-8"))["release"]]


def test_every_release_the_manifests_single_out_ran():
    published = sorted(_published(), key=Version)
    specs = [SpecifierSet(s) for s in _manifest_specs()]
    assert specs, "no version bound found in patches/*.toml"
    # The oldest release: where the oldest range starts (">=0.4.3": no published release below it).
    singled_out = {published[0]}
    for lo, hi in zip(published, published[1:], strict=False):
        if any((lo in s) != (hi in s) for s in specs):
            singled_out |= {lo, hi}
    lines: dict[tuple[int, int], str] = {}
    for v in published:
        lines[Version(v).release[:2]] = v
    singled_out |= set(lines.values())
    pending = RESULTS.get("pending", {})
    missing = sorted(singled_out - set(RESULTS["releases"]) - set(pending), key=Version)
    assert not missing, f"no 'ran' entry for {missing}: run `python3 ci/ran.py --versions {','.join(missing)}`"
    # A release owed a run is said so by hand, with why, and only while it has not run.
    assert all(v in singled_out and v not in RESULTS["releases"] and reason.strip() for v, reason in pending.items())
    assert len(RESULTS["releases"]) >= 15
    # ci/ran.py's own selection is that same set.
    assert set(ran.default_selection()) == singled_out


def test_results_have_the_shape_the_matrix_reads():
    assert RESULTS["command"] == "python3 ci/ran.py"
    assert list(RESULTS["steps"]) == list(ran.STEPS)
    for version, entry in RESULTS["releases"].items():
        assert entry["version"] == version
        dt.datetime.strptime(entry["date"], "%Y-%m-%d %H:%M UTC")
        assert list(entry["steps"]) == list(ran.STEPS), version
        for name, step in entry["steps"].items():
            assert step["status"] in STATUSES, (version, name)
            assert step["detail"].strip(), (version, name)
        assert entry["result"] == ("fail" if any(s["status"] == "fail" for s in entry["steps"].values()) else "ok")
        assert entry["why"] and all(isinstance(w, str) and w for w in entry["why"])
        assert entry["venv_seconds"] >= 0
        if entry["result"] == "ok":
            # A clean run read a clean audit, and SGLang's reported version is the release's.
            assert entry["sglang_reported"] == version
            assert entry["steps"]["audit"]["detail"].startswith("verdict ok")


def _probe(**launcher) -> dict:
    rank = {"rank": 0, "init": {"status": "ok", "detail": "path"}, "groups": [{"name": "tp:0", "pynccl": None}],
            "eagle": {"status": "n/a", "detail": "no draft_tp_context"}}
    base = {"flags": {"status": "ok", "detail": "flags"}, "resolution": {"status": "ok", "detail": "res"},
            "set_envs": {"status": "ok", "detail": "set", "start_method": "spawn"},
            "ranks": [rank, dict(rank, rank=1)], "ranks_seconds": 1.0}
    base.update(launcher)
    procs = [{"role": "launcher", "events": {"env_restored": 1}, "sglang_writes": []},
             {"role": "scheduler_TP0", "groups": ["tp"], "pynccl": []},
             {"role": "scheduler_TP1", "groups": ["tp"], "pynccl": []}]
    return {"launcher": base, "audit": {"verdict": "ok", "process_verdicts": [], "processes": procs}}


def test_a_clean_probe_is_ok_and_each_failure_names_its_step():
    steps = ran.summarize(_probe())
    assert {k: v["status"] for k, v in steps.items()} == {
        "args": "ok", "set_envs": "ok", "init": "ok", "groups": "ok", "eagle": "n/a", "audit": "ok"}
    assert ran.result_of(steps) == "ok"

    stopped = ran.summarize({"launcher": {"error": "ImportError: no vllm"}, "audit": {"verdict": None, "error": "x"}})
    assert stopped["args"] == {"status": "fail", "detail": "ImportError: no vllm"}
    assert ran.result_of(stopped) == "fail"

    probe = _probe()
    probe["audit"]["processes"][2]["groups"] = []  # one rank built tp without the hook seeing it
    assert ran.summarize(probe)["groups"]["status"] == "fail"
    probe = _probe()
    probe["audit"]["processes"][0]["events"] = {}  # the launcher's profile was never restored
    assert ran.summarize(probe)["set_envs"]["status"] == "fail"
    probe = _probe()
    probe["launcher"]["ranks"][1]["groups"] = [{"name": "tp:0", "pynccl": "PyNcclCommunicator"}]
    assert "PyNccl built without" in ran.summarize(probe)["groups"]["detail"]


def test_the_matrix_shows_a_ran_column_from_the_results(tmp_path):
    results = tmp_path / "ran.json"
    step = {"status": "ok", "detail": "d"}
    results.write_text(json.dumps({"releases": {"0.5.23": {
        "date": "2026-12-02 10:00 UTC", "result": "ok", "steps": {s: step for s in ran.STEPS}}}}))
    table = ["intro", "| SGLang | patch set | a |", "|---|---|---|", "| 0.5.23 | s | ✓ |", "| 0.5.22 | s | ✓ |"]
    out = matrix.with_ran(table, results)
    assert out[:5] == ["intro", "| SGLang | patch set | a | ran |", "|---|---|---|---|",
                       "| 0.5.23 | s | ✓ | ✓ 2026-12-02 |", "| 0.5.22 | s | ✓ | – |"]
    assert any(line.startswith("| 0.5.23 | 2026-12-02 10:00 UTC | ✓ |") for line in out[5:])
    assert matrix.with_ran(table, tmp_path / "none.json") == [
        "intro", "| SGLang | patch set | a | ran |", "|---|---|---|---|", "| 0.5.23 | s | ✓ | – |",
        "| 0.5.22 | s | ✓ | – |"]


@pytest.mark.parametrize(("text", "want"), [
    ("from 'x' (/work/c/venvs/base/lib/python3.11/site-packages/triton/cache.py)", "from 'x' (site-packages/triton/cache.py)"),
    ("audit: /tmp/ran-0.5.7-ab/w/audit/run-1\n", "audit: <tmp>\n"),
    ("/home/u/venv/sglang_eagle_nccl/native/x.so", "sglang_eagle_nccl/native/x.so"),
    ("no path here", "no path here"),
])
def test_local_paths_are_scrubbed_from_what_is_committed(text, want):
    assert ran.scrub({"a": [text]}) == {"a": [want]}


def test_the_committed_results_hold_no_path_of_this_machine():
    text = (REPO / "ci" / "ran_results.json").read_text("utf-8")
    assert not any(p in text for p in ("/work/", "/root/", "/tmp/", "/home/"))
