"""The behaviour proof on an installed SGLang (start-up on an untested release, doctor), and its cache.

A small site-packages folder written here stands for the installed SGLang: the package's source
and a dist-info whose RECORD keys the cache. Rules (installed_proof's docstring): a cached result
is keyed by the RECORD, the analysing code and the manifest; a multiprocessing child never proves
on a miss; a hook whose stated behaviour is not proven counts as not covered.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from sglang_eagle_nccl.knowledge.sglang import installed_proof, patchsets
from sglang_eagle_nccl.offline.doctor import format_behaviours

MANIFEST = """
[patch_set]
id = "test-set"
title = "T"
versions = ">=9.9,<10"
tested_through = "9.9.0"
tested = ["9.9.0"]
mechanism = "wrapt"

[[hook]]
target = "sglang.srt.engine:launch"
kind = "around"
handler = "engine_env"
required = true
params = ["server_args"]
relies_on = [
  { writes = ["NCCL_CUMEM_ENABLE"], why = "w" },
  { reaches = "multiprocessing.set_start_method", why = "w" },
]

[[hook]]
target = "sglang.srt.engine:other"
kind = "before"
handler = "h"
required = false
relies_on = [{ reaches = "sglang.srt.engine:launch", why = "w" }]
"""

ENGINE = """
import os
import multiprocessing as mp
def launch(server_args):
    os.environ["NCCL_CUMEM_ENABLE"] = "0"
    mp.set_start_method("spawn", force=True)
def other():
    if server_args_flag:
        launch(None)
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "sglang" / "srt").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (site / "sglang" / "srt" / "__init__.py").write_text("")
    (site / "sglang" / "srt" / "engine.py").write_text(textwrap.dedent(ENGINE))
    info = site / "sglang-9.9.1.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("sglang/srt/engine.py,sha256=abc,10\n")
    manifest = tmp_path / "m.toml"
    manifest.write_text(MANIFEST)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return site, patchsets.parse_manifest(MANIFEST, str(manifest))


def test_the_installed_source_is_proven_and_cached(installed):
    site, ps = installed
    proofs = installed_proof.prove_installed(ps, "9.9.1", site, compute=True)
    assert [p["ok"] for p in proofs["sglang.srt.engine:launch"]] == [True, True]
    assert installed_proof.unproven(proofs) == {
        "sglang.srt.engine:other": "reaches sglang.srt.engine:launch: sglang.srt.engine:launch is reached only under "
        "a condition the statement does not state: `server_args_flag` at sglang/srt/engine.py:8 (path other -> launch)"
    }
    cached = list((Path(installed_proof.cache_dir())).glob("*-cli.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text())["hooks"] == proofs
    # A child on a hit reads the launcher's result; the source is not read again.
    (site / "sglang" / "srt" / "engine.py").write_text("def launch(server_args):\n    pass\n")
    assert installed_proof.prove_installed(ps, "9.9.1", site, compute=False) == proofs


def test_a_changed_wheel_is_a_miss_and_a_child_does_not_prove(installed):
    site, ps = installed
    installed_proof.prove_installed(ps, "9.9.1", site, compute=True)
    (site / "sglang-9.9.1.dist-info" / "RECORD").write_text("sglang/srt/engine.py,sha256=def,12\n")
    assert installed_proof.prove_installed(ps, "9.9.1", site, compute=False) is None
    assert installed_proof.prove_installed(ps, "9.9.1", site) is not None  # this process is no child: it proves


def test_without_a_record_nothing_is_cached(installed):
    site, ps = installed
    (site / "sglang-9.9.1.dist-info" / "RECORD").unlink()
    assert installed_proof.cache_key(site, "x") is None
    assert installed_proof.prove_installed(ps, "9.9.1", site, compute=False) is None
    assert installed_proof.prove_installed(ps, "9.9.1", site, compute=True)["sglang.srt.engine:launch"][0]["ok"]


def test_an_unproven_behaviour_is_not_covered(installed):
    site, ps = installed
    (site / "sglang" / "srt" / "engine.py").write_text(textwrap.dedent(ENGINE).replace(
        '    os.environ["NCCL_CUMEM_ENABLE"] = "0"', '    if forged:\n        os.environ["NCCL_CUMEM_ENABLE"] = "0"'))
    selection = patchsets.Selection("9.9.1", ps, "untested_newer")
    names_only = patchsets.check_coverage(selection, site)
    assert names_only.missing_required == [] and names_only.proofs is None
    coverage = patchsets.check_coverage(selection, site, prove=True, compute=True)
    [missing] = coverage.missing_required
    assert missing.target == "sglang.srt.engine:launch" and missing.found and "`forged`" in missing.unproven
    assert missing.to_dict()["ok"] is False and "behaviour not proven" in missing.reason
    with pytest.raises(patchsets.PatchSetError, match="behaviour not proven"):
        patchsets.require_coverage(coverage, allow_partial=False)
    patchsets.require_coverage(coverage, allow_partial=True)
    assert [c.target for c in coverage.missing_optional] == ["sglang.srt.engine:other"]


def test_doctor_lists_each_behaviour_with_its_proof_or_reason():
    lines = format_behaviours([
        {"ok": True, "statement": "reaches x.y", "path": "a -> y", "conditions": ["`c` at f.py:3"]},
        {"ok": True, "statement": "writes NCCL_A", "proofs": [{"variable": "NCCL_A", "at": "f.py:4 (a)", "path": "a"}]},
        {"ok": False, "statement": "reaches x.z", "reason": "z is not called"},
    ])
    assert lines == [
        "      ✓ reaches x.y: a -> y [under `c` at f.py:3]",
        "      ✓ writes NCCL_A: NCCL_A at f.py:4 (a) via a",
        "      ✗ reaches x.z: z is not called",
    ]


def test_the_cache_key_covers_every_module_of_the_analysis():
    """A change to any part of the proof (the graph, its name resolution, its conditions walker, the checker)
    must miss the cache: the key hashes each of them."""
    here = Path(installed_proof.__file__).parent
    assert set(installed_proof.ANALYSIS_MODULES) == {p.stem for p in here.glob("callgraph*.py")} | {"proof"}
