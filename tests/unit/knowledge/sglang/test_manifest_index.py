"""The manifests' JSON index (what SGLang's processes read) says exactly what patchsets parses from the TOML."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from sglang_eagle_nccl.contract import manifests as manifest_index
from sglang_eagle_nccl.contract import versions
from sglang_eagle_nccl.knowledge._toml import loads as toml_loads
from sglang_eagle_nccl.knowledge.sglang import manifest_index as index_writer
from sglang_eagle_nccl.knowledge.sglang import patchsets

REPO = Path(__file__).resolve().parents[4]
MANIFESTS = REPO / "patches"


def _releases() -> list[str]:
    doc = toml_loads((REPO / "ci" / "versions.toml").read_text())
    return [r["version"] for r in doc["release"]]


def _variants(version: str) -> list[str]:
    v = Version(version)
    base = ".".join(map(str, v.release))
    return [version, f"{base}rc1", f"{base}.dev0", f"{base}.post1", f"{base}+cu130", f"{base}.post1+cu130"]


def test_committed_index_is_current():
    text = (MANIFESTS / manifest_index.INDEX_NAME).read_text(encoding="utf-8")
    assert text == index_writer.expected_text(str(MANIFESTS)), (
        "patches/index.json is stale: run `python -m sglang_eagle_nccl.knowledge.sglang.manifest_index`"
    )
    assert index_writer.main(["--check", str(MANIFESTS)]) == 0


@pytest.mark.parametrize(
    "version",
    [v for r in _releases() for v in _variants(r)]
    + ["0.5.24", "0.6.0", "0.4.2", "0.5.5rc1", "0.5.0", "0.5.0+cu130"],
)
def test_index_selects_what_patchsets_selects(version):
    fast = manifest_index.select(version, str(MANIFESTS))
    if Version(version).is_prerelease or Version(version).is_devrelease:
        assert fast is None  # pre-releases and dev builds: patchsets' policy decides (untested)
        return
    try:
        slow = patchsets.select(version, patchsets.load_manifests(str(MANIFESTS)))
    except patchsets.PatchSetError:
        assert fast is None  # patchsets owns the error message
        return
    if not slow.tested:
        assert fast is None  # the caller checks the targets in SGLang's source with patchsets
        return
    assert fast is not None and fast.tested and fast.version == slow.version
    assert fast.patch_set.id == slow.patch_set.id
    for field in manifest_index.SET_FIELDS:
        assert getattr(fast.patch_set, field) == getattr(slow.patch_set, field), field
    v = Version(version)
    for cli in (None, False, True):
        got = fast.patch_set.hooks_for(v, cli=cli)
        want = slow.patch_set.hooks_for(v, cli=cli)
        assert [(h.to_dict(), h.process, fast.patch_set.mechanism_of(h)) for h in got] == [
            (h.to_dict(), h.process, slow.patch_set.mechanism_of(h)) for h in want
        ]
        assert [(h.module, h.qualname, h.dotted, h.is_sglang) for h in got] == [
            (h.module, h.qualname, h.dotted, h.is_sglang) for h in want
        ]


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "patches"
    shutil.copytree(MANIFESTS, folder)
    return folder


def test_an_edited_manifest_makes_the_index_unusable(tmp_path):
    folder = _copy(tmp_path)
    assert manifest_index.load(str(folder)) is not None
    manifest = folder / "sglang-0.5.21-latest.toml"
    manifest.write_text(manifest.read_text().replace('handler = "scheduler_env"', 'handler = "engine_env"'))
    assert manifest_index._read(str(folder)) is None
    assert index_writer.main(["--check", str(folder)]) == 1
    assert index_writer.main([str(folder)]) == 0  # regenerated: usable again, with the edit
    fresh = manifest_index._read(str(folder))
    assert fresh is not None
    hook = next(h for h in fresh[-1].hooks if h.target.endswith("Scheduler.__init__"))
    assert hook.handler == "engine_env"


@pytest.mark.parametrize("change", ["add", "remove", "garbage"])
def test_index_missing_a_manifest_or_unreadable_is_not_used(tmp_path, change):
    folder = _copy(tmp_path)
    if change == "add":
        shutil.copy(folder / "sglang-0.5.21-latest.toml", folder / "sglang-0.6-latest.toml")
    elif change == "remove":
        (folder / "sglang-0.4.3-0.5.4.toml").unlink()
    else:
        (folder / manifest_index.INDEX_NAME).write_text("{not json")
    assert manifest_index._read(str(folder)) is None
    assert manifest_index.select("0.5.23", str(folder)) is None


# --- the version-range shortcut is packaging's answer -------------------------------------------------

_release = st.lists(st.integers(0, 12), min_size=1, max_size=4).map(lambda r: ".".join(map(str, r)))
_suffix = st.sampled_from(["", "", "", "rc1", "a2", ".post1", ".dev0", "+cu130", ".post2+local.7"])
_versions = st.builds(lambda r, s: r + s, _release, _suffix)
_ops = st.sampled_from([">=", "<=", "<", ">", "==", "!=", "~=", "==="])
_clause = st.builds(
    lambda op, r, s, star: f"{op}{r}{s}{'.*' if star and op in ('==', '!=') and not s else ''}",
    _ops,
    _release,
    st.sampled_from(["", "", "", "rc1", ".post1", ".dev0"]),
    st.booleans(),
)


@settings(max_examples=600, deadline=None)
@given(version=_versions, clauses=st.lists(_clause, min_size=1, max_size=3))
def test_contains_matches_packaging(version, clauses):
    spec = ",".join(clauses)
    try:
        expected = SpecifierSet(spec).contains(Version(version), prereleases=True)
    except Exception:  # noqa: BLE001 - a specifier packaging rejects (e.g. ~=1): not a manifest range
        return
    assert versions.contains(spec, Version(version)) is expected


def test_contains_answers_plain_releases_without_packaging_specifiers():
    # Post releases too: 0.5.4.post3 against ">=0.4.3,<0.5.5" is plain ordering (only ">V" differs for V.postN).
    import subprocess

    code = (
        "import sys; from packaging.version import Version; from sglang_eagle_nccl.contract.versions import contains;"
        "assert contains('>=0.5.11,<0.5.21', Version('0.5.17')) and not contains('>=0.5.21', Version('0.5.17'));"
        "assert contains('>=0.4.3,<0.5.5', Version('0.5.4.post3')) and not contains('>=0.5.5', Version('0.5.4.post3'));"
        "print('packaging.specifiers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


# --- the installed version, read beside the package ---------------------------------------------


def _fake_site(tmp_path: Path, *dist_infos: tuple[str, str]) -> Path:
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("__version__ = '9.9.9'\n")
    for name, metadata in dist_infos:
        (site / name).mkdir()
        (site / name / "METADATA").write_text(metadata)
    return site


def test_version_is_read_from_the_dist_info_beside_the_package(tmp_path, monkeypatch):
    site = _fake_site(
        tmp_path,
        (
            "sglang-0.5.23+cu130.dist-info",
            "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23+cu130\n\nVersion: 1.0\n",
        ),
    )
    module = type(sys)("sglang")
    module.__file__ = str(site / "sglang" / "__init__.py")
    monkeypatch.setitem(sys.modules, "sglang", module)
    assert versions._version_beside_package("sglang") == "0.5.23+cu130"
    assert versions.installed_sglang_version() == "0.5.23+cu130"


@pytest.mark.parametrize("layout", ["none", "two", "no-version-header"])
def test_version_lookup_falls_back_when_the_dist_info_is_ambiguous(tmp_path, monkeypatch, layout):
    infos = {
        "none": [],
        "two": [
            ("sglang-0.5.22.dist-info", "Version: 0.5.22\n"),
            ("sglang-0.5.23.dist-info", "Version: 0.5.23\n"),
        ],
        "no-version-header": [("sglang-0.5.23.dist-info", "Name: sglang\n\nVersion: 0.5.23\n")],
    }[layout]
    site = _fake_site(tmp_path, *infos)
    module = type(sys)("sglang")
    module.__file__ = str(site / "sglang" / "__init__.py")
    module.__version__ = "9.9.9"
    monkeypatch.setitem(sys.modules, "sglang", module)
    assert versions._version_beside_package("sglang") is None
