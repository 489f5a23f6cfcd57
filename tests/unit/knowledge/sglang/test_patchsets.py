"""Patch manifests: selection by version, target checks against source, matrix failure."""

from __future__ import annotations

import re
import textwrap
import zipfile

import pytest

from sglang_eagle_nccl.inproc.hooks.handlers import HANDLERS
from sglang_eagle_nccl.knowledge.sglang import patchsets


@pytest.mark.parametrize(
    "version,set_id,status",
    [
        ("0.4.3", "sglang-0.4.3-0.5.4", "tested"),
        ("0.5.4.post3", "sglang-0.4.3-0.5.4", "tested"),
        ("0.5.5", "sglang-0.5.5-0.5.10", "tested"),
        ("0.5.10.post1", "sglang-0.5.5-0.5.10", "tested"),
        ("0.5.11", "sglang-0.5.11-0.5.20", "tested"),
        ("0.5.20.post1", "sglang-0.5.11-0.5.20", "untested_newer"),
        ("0.5.21", "sglang-0.5.21-latest", "tested"),
        ("0.5.23", "sglang-0.5.21-latest", "tested"),
        ("0.5.23+cu130", "sglang-0.5.21-latest", "tested"),
        # A pre-release's code may differ from its release: never "tested" by the matrix.
        ("0.5.23rc1", "sglang-0.5.21-latest", "untested_prerelease"),
        ("0.5.24rc1", "sglang-0.5.21-latest", "untested_newer"),
        ("0.5.24.dev3", "sglang-0.5.21-latest", "untested_newer"),
        ("0.6.0", "sglang-0.5.21-latest", "untested_newer"),
    ],
)
def test_selection(version, set_id, status):
    sel = patchsets.select(version)
    assert (sel.patch_set.id, sel.status) == (set_id, status)


@pytest.mark.parametrize("version", ["0.4.2", "0.3.6.post3", "not-a-version"])
def test_unsupported_versions_refused_with_reason(version):
    with pytest.raises(patchsets.PatchSetError) as info:
        patchsets.select(version)
    assert "SGLang" in str(info.value)


def test_every_manifest_handler_exists_and_sets_are_contiguous():
    sets = patchsets.load_manifests()
    assert len(sets) >= 4
    for ps in sets:
        for hook in ps.hooks:
            assert hook.handler in HANDLERS, hook.handler
            assert not hook.qualname.startswith(
                ("run_scheduler_process", "run_data_parallel_controller_process", "run_detokenizer_process")
            )
            assert "run_scheduler_process" not in hook.target and "run_detokenizer_process" not in hook.target


def test_native_plugin_sets_use_hook_registry():
    by_id = {ps.id: ps for ps in patchsets.load_manifests()}
    assert by_id["sglang-0.4.3-0.5.4"].mechanism == "wrapt"
    assert by_id["sglang-0.5.5-0.5.10"].mechanism == "wrapt"
    assert by_id["sglang-0.5.11-0.5.20"].mechanism == "hook_registry"
    assert by_id["sglang-0.5.21-latest"].mechanism == "hook_registry"


SOURCE = textwrap.dedent(
    """
    class GroupCoordinator:
        def __init__(self, group_ranks, local_rank, torch_distributed_backend, use_pynccl, group_name=None):
            pass

    class ServerArgs:
        @staticmethod
        def add_cli_args(parser):
            pass

    ServerArgs = make_struct(ServerArgs)

    def _set_envs_and_config(server_args):
        pass
    """
)


def test_check_source_finds_methods_and_params():
    c = patchsets.check_source(SOURCE, "m:GroupCoordinator.__init__", ["self", "group_name", "local_rank"])
    assert c.ok and c.line == 3


def test_check_source_reports_missing_param():
    c = patchsets.check_source(SOURCE, "m:GroupCoordinator.__init__", ["self", "gloo_timeout"])
    assert not c.ok and c.missing_params == ("gloo_timeout",)


def test_check_source_follows_class_rebound_by_assignment():
    assert patchsets.check_source(SOURCE, "m:ServerArgs.add_cli_args", ["parser"]).ok


def test_check_source_missing_target():
    c = patchsets.check_source(SOURCE, "m:Scheduler.__init__", [])
    assert not c.found and "Scheduler" in c.reason


def test_required_target_missing_in_newer_release_is_refused(tmp_path):
    root = tmp_path / "site"
    mod = root / "sglang" / "srt" / "entrypoints"
    mod.mkdir(parents=True)
    (mod / "engine.py").write_text("def something_else():\n    pass\n")
    sel = patchsets.select("0.5.99")
    cov = patchsets.check_coverage(sel, root, cli=False)
    assert any(c.target.endswith("_set_envs_and_config") for c in cov.missing_required)
    with pytest.raises(patchsets.PatchSetError) as info:
        patchsets.require_coverage(cov, allow_partial=False)
    assert "_set_envs_and_config" in str(info.value) and "--allow-partial" in str(info.value)
    patchsets.require_coverage(cov, allow_partial=True)  # allowed: recorded, not raised


def test_matrix_fails_when_a_manifest_names_a_missing_target(tmp_path, monkeypatch):
    """The compatibility-matrix script exits 1 when a target does not exist in the wheel."""
    import importlib.util
    from pathlib import Path

    repo = Path(__file__).resolve().parents[4]
    spec = importlib.util.spec_from_file_location("matrix", repo / "ci" / "matrix.py")
    matrix = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(matrix)

    manifests = tmp_path / "patches"
    manifests.mkdir()
    (manifests / "x.toml").write_text(
        textwrap.dedent(
            """
            [patch_set]
            id = "fake"
            title = "fake"
            versions = ">=0.1"
            tested_through = "1.0.0"
            tested = ["1.0.0"]
            mechanism = "wrapt"
            [[hook]]
            target = "sglang.srt.entrypoints.engine:_set_envs_and_config"
            kind = "around"
            handler = "engine_env"
            required = true
            params = ["server_args"]
            relies_on = [{ writes = ["NCCL_CUMEM_ENABLE"], why = "the launcher writes it here" }]
            [[hook]]
            target = "sglang.srt.entrypoints.engine:does_not_exist"
            kind = "around"
            handler = "engine_env"
            required = true
            relies_on = [{ reaches = "sglang.srt.x:anything", why = "never checked: the target is missing" }]
            """
        )
    )
    wheels = tmp_path / "cache" / "wheels"
    wheels.mkdir(parents=True)
    with zipfile.ZipFile(wheels / "sglang-1.0.0-py3-none-any.whl", "w") as zf:
        zf.writestr(
            "sglang/srt/entrypoints/engine.py",
            "import os\ndef _set_envs_and_config(server_args):\n    os.environ['NCCL_CUMEM_ENABLE'] = '0'\n",
        )
    (tmp_path / "versions.toml").write_text('[[release]]\nversion = "1.0.0"\nwhy = "test"\n')
    monkeypatch.setenv("SGLANG_EAGLE_NCCL_CACHE", str(tmp_path / "cache"))
    patchsets.load_manifests.cache_clear()
    code = matrix.main(
        [
            "--versions",
            str(tmp_path / "versions.toml"),
            "--manifests",
            str(manifests),
            "--offline",
            "--out",
            str(tmp_path / "m.md"),
        ]
    )
    assert code == 1
    table = (tmp_path / "m.md").read_text()
    assert "✗" in table and "does_not_exist" in table
    # and passes once the bad hook is removed
    text = (manifests / "x.toml").read_text()
    (manifests / "x.toml").write_text(
        text.split('[[hook]]\ntarget = "sglang.srt.entrypoints.engine:does_not_exist"')[0]
    )
    patchsets.load_manifests.cache_clear()
    assert (
        matrix.main(
            [
                "--versions",
                str(tmp_path / "versions.toml"),
                "--manifests",
                str(manifests),
                "--offline",
                "--out",
                str(tmp_path / "m.md"),
            ]
        )
        == 0
    )
    patchsets.load_manifests.cache_clear()


# --- pre-releases, dev builds, post and local versions at patch-set boundaries -------------------


@pytest.mark.parametrize(
    "version,set_id,status",
    [
        # a pre-release / dev build precedes its release and carries its code: the release's set
        ("0.5.11rc1", "sglang-0.5.11-0.5.20", "untested_prerelease"),
        ("0.5.11.dev0", "sglang-0.5.11-0.5.20", "untested_prerelease"),
        ("0.5.21.dev0", "sglang-0.5.21-latest", "untested_prerelease"),
        ("0.5.21rc2+cu130", "sglang-0.5.21-latest", "untested_prerelease"),
        ("0.5.5rc0", "sglang-0.5.5-0.5.10", "untested_prerelease"),
        ("0.5.5a1", "sglang-0.5.5-0.5.10", "untested_prerelease"),
        ("0.5.13rc1", "sglang-0.5.11-0.5.20", "untested_prerelease"),
        # post and local versions stay with the release they follow
        ("0.5.4.post3", "sglang-0.4.3-0.5.4", "tested"),
        ("0.5.4.post4", "sglang-0.4.3-0.5.4", "untested_newer"),
        ("0.5.10.post1+cu126", "sglang-0.5.5-0.5.10", "tested"),
        ("0.5.20.post1.dev0", "sglang-0.5.11-0.5.20", "untested_newer"),
    ],
)
def test_selection_at_boundaries(version, set_id, status):
    sel = patchsets.select(version)
    assert (sel.patch_set.id, sel.status) == (set_id, status)
    if status == "tested":
        assert sel.tested and sel.why_untested == ""
    else:
        assert not sel.tested and version in sel.why_untested


@pytest.mark.parametrize("version", ["0.4.3rc1", "0.4.3.dev0", "0.4.3a1+local"])
def test_prerelease_of_the_oldest_release_is_refused_clearly(version):
    with pytest.raises(patchsets.PatchSetError) as info:
        patchsets.select(version)
    message = str(info.value)
    assert (
        f"SGLang {version}, a pre-release or development build of 0.4.3, is older than every supported release"
        in message
    )
    assert "upgrade SGLang to >= 0.4.3" in message


def test_untested_prerelease_with_missing_target_is_refused_with_its_reason(tmp_path):
    root = tmp_path / "site"
    (root / "sglang" / "srt" / "entrypoints").mkdir(parents=True)
    (root / "sglang" / "srt" / "entrypoints" / "engine.py").write_text("def other():\n    pass\n")
    cov = patchsets.check_coverage(patchsets.select("0.5.11rc1"), root, cli=False)
    with pytest.raises(patchsets.PatchSetError) as info:
        patchsets.require_coverage(cov, allow_partial=False)
    assert "0.5.11rc1 is a pre-release or development build of 0.5.11" in str(info.value)


def test_huge_version_string_is_refused_not_crashed():
    with pytest.raises(patchsets.PatchSetError):
        patchsets.select("0." + "9" * 5000)


@pytest.mark.parametrize(
    "version,expected",
    [
        ("0.5.11", True),
        ("0.5.11rc1", True),
        ("0.5.12.post1", True),
        ("0.5.13rc1", False),
        ("0.5.13", False),
        ("0.5.20", False),
    ],
)
def test_v1_multi_layer_eagle_worker_is_hooked_where_it_exists(version, expected):
    """0.5.11 and 0.5.12.post1 ship speculative/multi_layer_eagle_worker.py; 0.5.13 removed it."""
    from packaging.version import Version

    sel = patchsets.select(version)
    targets = {h.target for h in sel.patch_set.hooks_for(Version(version))}
    target = "sglang.srt.speculative.multi_layer_eagle_worker:MultiLayerEagleWorker.__init__"
    assert (target in targets) is expected


# --- "tested" is "this exact release was checked by the matrix" -----------------------------------


@pytest.mark.parametrize("version", ["0.5.0", "0.5.0+cu130", "0.5.2.post1", "0.4.11"])
def test_a_release_the_matrix_never_checked_is_untested(version):
    """0.5.0 was never published; neither was 0.5.2.post1 nor 0.4.11: inside a set's range, but unchecked."""
    sel = patchsets.select(version)
    assert sel.status == "untested_unchecked" and not sel.tested
    assert "is not one of the" in sel.why_untested and "it may never have been published" in sel.why_untested


def test_the_tested_lists_are_exactly_the_matrix_releases():
    """The manifests' tested lists (shipped in the wheel) are written from ci/versions.toml: stale lists fail."""
    from pathlib import Path

    from sglang_eagle_nccl.knowledge._toml import loads

    repo = Path(__file__).resolve().parents[4]
    releases = [r["version"] for r in loads((repo / "ci" / "versions.toml").read_text("utf-8"))["release"]]
    sets = patchsets.load_manifests()
    assert sorted(t for s in sets for t in s.tested) == sorted(releases), "run `python ci/matrix.py --sync`"
    for ps in sets:
        assert ps.tested_through == ps.tested[-1]
        for release in ps.tested:
            sel = patchsets.select(release)
            assert (sel.patch_set.id, sel.status) == (ps.id, "tested"), release


def _matrix_module():
    import importlib.util
    from pathlib import Path

    repo = Path(__file__).resolve().parents[4]
    spec = importlib.util.spec_from_file_location("matrix_under_test", repo / "ci" / "matrix.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RESOLUTION_MANIFEST = """
[patch_set]
id = "fake"
title = "fake"
versions = ">=1.0"
tested_through = "1.1.0"
tested = ["1.0.0", "1.1.0"]
mechanism = "wrapt"
[patch_set.correctness_writes]
enable_deterministic_inference = ["NCCL_ALGO"]
[[hook]]
target = "sglang.srt.server_args:ServerArgs.__post_init__"
kind = "around"
handler = "server_args_resolution"
required = true
params = ["self"]
relies_on = [{ writes = ["NCCL_ALGO"], why = "deterministic inference writes it while resolving" }]
"""


def _wheel(folder, version: str, server_args: str) -> None:
    with zipfile.ZipFile(folder / f"sglang-{version}-py3-none-any.whl", "w") as zf:
        zf.writestr("sglang/__init__.py", "")
        zf.writestr("sglang/srt/__init__.py", "")
        zf.writestr("sglang/srt/server_args.py", textwrap.dedent(server_args))


def test_matrix_fails_when_a_target_exists_but_its_behaviour_moved(tmp_path, monkeypatch, capsys):
    """The issue's case: the hooked method still exists, the write moved to a method hooked from a later release."""
    matrix = _matrix_module()
    manifests = tmp_path / "patches"
    manifests.mkdir()
    (manifests / "fake.toml").write_text(RESOLUTION_MANIFEST)
    wheels = tmp_path / "cache" / "wheels"
    wheels.mkdir(parents=True)
    _wheel(
        wheels,
        "1.0.0",
        """
        import os
        class ServerArgs:
            def __post_init__(self):
                self._deterministic()
            def _deterministic(self):
                os.environ["NCCL_ALGO"] = "allreduce:tree"
    """,
    )
    _wheel(
        wheels,
        "1.1.0",
        """
        import os
        class ServerArgs:
            def __post_init__(self):
                pass
            def resolve_once(self):
                self._deterministic()
            def _deterministic(self):
                os.environ["NCCL_ALGO"] = "allreduce:tree"
    """,
    )
    (tmp_path / "versions.toml").write_text(
        '[[release]]\nversion = "1.0.0"\n[[release]]\nversion = "1.1.0"\n'
    )
    monkeypatch.setenv("SGLANG_EAGLE_NCCL_CACHE", str(tmp_path / "cache"))
    patchsets.load_manifests.cache_clear()
    try:
        code = matrix.main(
            [
                "--versions",
                str(tmp_path / "versions.toml"),
                "--manifests",
                str(manifests),
                "--offline",
                "--out",
                str(tmp_path / "m.md"),
            ]
        )
    finally:
        patchsets.load_manifests.cache_clear()
    out = capsys.readouterr().out
    assert code == 1
    assert re.search(r"1/2 sglang 1.0.0 +fake +ok", out) and "✗ sglang 1.0.0" not in out
    # Release, hook, and what moved: the write now sits in a function __post_init__ no longer calls.
    assert (
        "✗ sglang 1.1.0: hook sglang.srt.server_args:ServerArgs.__post_init__ relies on SGLang: it writes NCCL_ALGO "
        "(deterministic inference writes it while resolving), but no write of NCCL_ALGO reachable from "
        "sglang.srt.server_args:ServerArgs.__post_init__ within"
    ) in out
    assert "NCCL_ALGO is written at sglang/srt/server_args.py:9 (ServerArgs._deterministic)" in out
    assert (
        "correctness write NCCL_ALGO at sglang/srt/server_args.py:9 (ServerArgs._deterministic) is not reachable"
        in out
    )
    table = (tmp_path / "m.md").read_text()
    assert "| 1.0.0 | fake | wrapt | ✓ |" in table and "| 1.1.0 | fake | wrapt | ✗ |" in table


def test_matrix_add_puts_a_release_in_the_matrix_and_the_tested_lists(tmp_path, monkeypatch):
    """`ci/matrix.py --add VERSION`: one command from a new release to its row (and to "tested")."""
    matrix = _matrix_module()
    manifests = tmp_path / "patches"
    manifests.mkdir()
    (manifests / "fake.toml").write_text(
        RESOLUTION_MANIFEST.replace('tested = ["1.0.0", "1.1.0"]', 'tested = ["1.0.0"]').replace(
            'tested_through = "1.1.0"', 'tested_through = "1.0.0"'
        )
    )
    wheels = tmp_path / "cache" / "wheels"
    wheels.mkdir(parents=True)
    source = """
        import os
        class ServerArgs:
            def __post_init__(self):
                os.environ["NCCL_ALGO"] = "allreduce:tree"
    """
    _wheel(wheels, "1.0.0", source)
    _wheel(wheels, "1.2.0", source)
    versions = tmp_path / "versions.toml"
    versions.write_text('# header\n[[release]]\nversion = "1.0.0"\n')
    monkeypatch.setenv("SGLANG_EAGLE_NCCL_CACHE", str(tmp_path / "cache"))
    patchsets.load_manifests.cache_clear()
    try:
        code = matrix.main(
            [
                "--versions",
                str(versions),
                "--manifests",
                str(manifests),
                "--offline",
                "--out",
                str(tmp_path / "m.md"),
                "--add",
                "1.2.0",
                "--why",
                "new release",
            ]
        )
        assert code == 0
        assert versions.read_text().endswith('[[release]]\nversion = "1.2.0"\nwhy = "new release"\n')
        text = (manifests / "fake.toml").read_text()
        assert 'tested = ["1.0.0", "1.2.0"]' in text and 'tested_through = "1.2.0"' in text
        assert (manifests / "index.json").is_file()
        assert patchsets.select("1.2.0", patchsets.load_manifests(str(manifests))).status == "tested"
        assert "| 1.2.0 | fake |" in (tmp_path / "m.md").read_text()
        with pytest.raises(SystemExit, match="only published releases"):
            matrix.main(
                ["--versions", str(versions), "--manifests", str(manifests), "--offline", "--add", "1.3.0rc1"]
            )
    finally:
        patchsets.load_manifests.cache_clear()


def test_doctor_reports_an_unchecked_release_as_untested_and_checks_its_source(
    tmp_path, monkeypatch, clean_environ
):
    """An SGLang 0.5.0 (never published) installed: doctor says untested and checks every target in its source."""
    import json
    import sys

    from click.testing import CliRunner

    from sglang_eagle_nccl.cli.main import main

    site = tmp_path / "site"
    engine = site / "sglang" / "srt" / "entrypoints"
    engine.mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    # The launcher's env function as 0.5.1 - 0.5.4.post1 write it: the behaviour its hook states holds.
    (engine / "engine.py").write_text(
        "import os\nimport multiprocessing as mp\n"
        "def _set_envs_and_config(server_args):\n"
        "    os.environ['NCCL_CUMEM_ENABLE'] = '0'\n"
        "    if not server_args.enable_symm_mem:\n"
        "        os.environ['NCCL_NVLS_ENABLE'] = '0'\n"
        "    mp.set_start_method('spawn', force=True)\n"
    )
    info = site / "sglang-0.5.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.0\n\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "sglang", raising=False)
    data = json.loads(CliRunner().invoke(main, ["doctor", "--json"]).output)
    assert data["packages"]["sglang"] == "0.5.0"
    assert data["selection"]["status"] == "untested_unchecked"
    assert "0.5.0 is not one of the" in data["selection"]["why_untested"]
    found = {t["target"]: t["ok"] for t in data["targets"]}
    assert found["sglang.srt.entrypoints.engine:_set_envs_and_config"] is True, data["targets"]
    assert found["sglang.srt.managers.scheduler:Scheduler.__init__"] is False
    behaviours = next(t["behaviours"] for t in data["targets"] if t["target"].endswith(":_set_envs_and_config"))
    assert [b["ok"] for b in behaviours] == [True, True, True]
    text = CliRunner().invoke(main, ["doctor"]).output
    assert "(untested_unchecked, via wrapt)" in text and "untested: SGLang 0.5.0 is not one of the" in text
    assert "      ✓ reaches multiprocessing.set_start_method: _set_envs_and_config -> set_start_method" in text
    # The same target doing nothing: it exists, but its stated behaviour is not proven (✗ with the reason).
    (engine / "engine.py").write_text("def _set_envs_and_config(server_args):\n    pass\n")
    data = json.loads(CliRunner().invoke(main, ["doctor", "--json"]).output)
    target = next(t for t in data["targets"] if t["target"].endswith(":_set_envs_and_config"))
    assert target["found"] is True and target["ok"] is False and "multiprocessing.set_start_method" in target["unproven"]


def test_a_ledger_observation_hook_must_state_what_it_relies_on_too():
    """No exception for the phase ledger's opt-in hooks (when = "ledger", required = false): a hook whose
    behaviour the matrix does not prove would count nothing, silently, on a release where it moved."""
    ledger_hook = """
[[hook]]
target = "sglang.srt.distributed.parallel_state:GroupCoordinator.broadcast"
kind = "around"
handler = "ledger_broadcast"
required = false
params = ["self", "input_"]
when = "ledger"
"""
    stated = '\nrelies_on = [{ reaches = "torch.distributed.broadcast", why = "the broadcast is issued here" }]\n'
    base = RESOLUTION_MANIFEST
    with pytest.raises(patchsets.ManifestError, match="must state relies_on"):
        patchsets.parse_manifest(base + ledger_hook, "fake.toml")
    parsed = patchsets.parse_manifest(base + ledger_hook + stated, "fake.toml")
    hook = next(h for h in parsed.hooks if h.when == "ledger")
    assert [r.subject for r in hook.relies_on] == [("torch.distributed.broadcast",)]


def test_every_ledger_hook_of_the_manifests_states_its_behaviour():
    hooks = [h for s in patchsets.load_manifests() for h in s.hooks if h.when == "ledger"]
    assert hooks and all(h.relies_on for h in hooks), [h.target for h in hooks if not h.relies_on]
