"""Edges of contract/versions.py, with packaging itself as the oracle.

The fast path (_contains_plain) must answer exactly what ``SpecifierSet.contains(v, prereleases=True)``
answers, and hand everything it cannot answer (None) to packaging; ``contains`` must agree with packaging
whichever path answers; the installed-version lookup reads the one dist-info beside the package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from sglang_eagle_nccl.contract import versions


def _oracle(spec, version):
    return SpecifierSet(spec).contains(Version(version), prereleases=True)


# --- the fast path: which ranges it answers, and that it answers as packaging ---------------------


@pytest.mark.parametrize(
    "spec,version",
    [
        (">=0.5.1,<0.6", "0.5.3"),
        (">=0.5.1, <0.6", "0.6"),
        (">=0.5.1", "0.5.1"),
        (">=0.5.1", "0.5.0"),
        ("<=0.5.1", "0.5.1"),
        ("<=0.5.1", "0.5.2"),
        (">0.5", "0.6"),
        (">0.5", "0.5"),
        ("<0.5", "0.4"),
        ("==0.5.1", "0.5.1"),
        ("== 0.5.1", "0.5.2"),
        ("!=0.5.1", "0.5.1"),
        ("!=0.5.1", "0.5.2"),
        (">=0.4.3,<0.5.5", "0.5.4.post3"),  # a post release against plain bounds other than '>'
        (">=0.5.5", "0.5.4.post3"),
    ],
)
def test_plain_ranges_are_answered_by_the_fast_path_as_packaging_answers(spec, version):
    assert versions._contains_plain(spec, Version(version)) is _oracle(spec, version)
    assert versions.contains(spec, version) is _oracle(spec, version)


@pytest.mark.parametrize(
    "spec",
    [
        "~=0.5.1",  # compatible release
        "===0.5.1",  # arbitrary equality
        "==0.5.*",  # wildcard
        ">=0.5.1,",  # an empty clause
        "x0.5.1",  # no operator
        ">=not-a-version",
        ">=0.5.1rc1",  # bounds that are not plain releases:
        ">=0.5.1.post1",
        ">=0.5.1.dev0",
        "==0.5.1+cu130",
        ">=1!0.5.1",
    ],
)
def test_what_the_fast_path_cannot_answer_goes_to_packaging(spec):
    assert versions._contains_plain(spec, Version("0.5.2")) is None


def test_greater_than_for_a_post_release_goes_to_packaging():
    # PEP 440: '>V' excludes V's post releases; the plain ordering would include them.
    assert versions._contains_plain(">0.5.4", Version("0.5.4.post1")) is None
    assert versions.contains(">0.5.4", "0.5.4.post1") is _oracle(">0.5.4", "0.5.4.post1") is False
    assert versions._contains_plain(">=0.5.4", Version("0.5.4.post1")) is True


def test_the_fast_path_answers_without_importing_packaging_specifiers():
    code = (
        "import sys\n"
        "from sglang_eagle_nccl.contract import versions\n"
        "print(versions.contains('>=0.5.1,<0.6', '0.5.3+cu130'), versions.contains('<=0.6', '0.5.1.post2'),\n"
        "      'packaging.specifiers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "True", "False"], out.stderr


@pytest.mark.parametrize(
    "spec,version",
    [
        ("<0.5.11", "0.5.11rc1"),  # PEP 440: '<V' excludes V's pre-releases
        (">=0.5.10", "0.5.11rc1"),
        ("<0.5.11", "0.5.11.dev0"),
        (">=0.5", "1!0.1"),
        ("<0.5", "1!0.1"),
        ("<=0.5.1", "0.5.1+local"),
        (">0.5.1", "0.5.1+local"),
    ],
)
def test_contains_agrees_with_packaging_for_pre_dev_local_and_epoch_versions(spec, version):
    assert versions.contains(spec, version) is _oracle(spec, version)


def test_a_range_that_is_no_range_is_refused_by_packaging():
    with pytest.raises(InvalidSpecifier):
        versions.contains("x0.5.1", "0.5.1")


# --- release_of and public --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given,release",
    [
        ("0.5.23", "0.5.23"),
        ("0.5.23+cu130", "0.5.23"),
        ("0.5.24rc1", None),
        ("0.5.4.post3", None),
        ("0.5.21.dev0", None),
        ("1!0.5.23", None),
    ],
)
def test_release_of_is_a_plain_release_or_none(given, release):
    expected = None if release is None else Version(release)
    assert versions.release_of(given) == expected
    assert versions.release_of(Version(given)) == expected


def test_public_drops_only_the_local_label():
    assert versions.public("0.5.23+cu130") == Version("0.5.23")
    assert versions.public("0.5.23rc1+cu130") == Version("0.5.23rc1")
    assert versions.public("0.5.23") == Version("0.5.23")


# --- parse ------------------------------------------------------------------------------------------


def _of_length(n):
    text = "1." + "0." * ((n - 3) // 2) + "1"
    text = text if len(text) == n else "1" + text
    assert len(text) == n
    return text


def test_the_longest_version_parsed_is_64_characters():
    assert versions.parse(_of_length(64)) == Version(_of_length(64))
    with pytest.raises(InvalidVersion) as err:
        versions.parse(_of_length(65))
    assert str(err.value) == _of_length(65)[:64]


@pytest.mark.parametrize("bad,said", [(None, "None"), (5, "5"), ("not-a-version", "not-a-version")])
def test_parse_refusals_name_the_input(bad, said):
    with pytest.raises(InvalidVersion) as err:
        versions.parse(bad)
    assert str(err.value) == said


# --- the installed version read beside the package -----------------------------------------------


def _package_beside(tmp_path, name, metadata: bytes | None, others=()):
    site = tmp_path / "site"
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("")
    if metadata is not None:
        dist = site / f"{name}-1.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_bytes(metadata)
    for other in others:
        (site / other).mkdir()
    return site


def _beside(monkeypatch, site, name):
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, name, raising=False)
    __import__(name)
    try:
        return versions._version_beside_package(name)
    finally:
        del sys.modules[name]


@pytest.mark.parametrize(
    "metadata,found",
    [
        (b"Metadata-Version: 2.1\nName: ldvrpkg\nVersion: 1.2.3\n\nbody\n", "1.2.3"),
        (b"Name: ldvrpkg\nVersion:1.2.3\n", "1.2.3"),  # no space after the colon
        (b"Name: ldvrpkg\nVersion: 1.2:3\n", "1.2:3"),  # everything after the first colon
        (b"Name: ldvrpkg\nSummary: caf\xe9 \xff\nVersion: 1.2.3\n", "1.2.3"),  # bytes that are not UTF-8
        (b"Name: ldvrpkg\n\nVersion: 1.2.3\n", None),  # after the headers
        (b"Name: ldvrpkg\nVersion:   \n", None),
    ],
)
def test_the_version_is_read_from_the_headers_of_the_dist_info_beside_the_package(
    tmp_path, monkeypatch, metadata, found
):
    site = _package_beside(tmp_path, "ldvrpkg", metadata)
    assert _beside(monkeypatch, site, "ldvrpkg") == found


def test_other_dist_infos_beside_the_package_do_not_count(tmp_path, monkeypatch):
    site = _package_beside(
        tmp_path,
        "ldvrpkg",
        b"Name: ldvrpkg\nVersion: 1.2.3\n",
        others=("other-9.0.dist-info", "ldvrpkg-notes", "ldvrpkgx.dist-info"),
    )
    assert _beside(monkeypatch, site, "ldvrpkg") == "1.2.3"


def test_two_dist_infos_of_the_package_answer_none(tmp_path, monkeypatch):
    site = _package_beside(tmp_path, "ldvrpkg", b"Version: 1.2.3\n", others=("ldvrpkg-2.0.dist-info",))
    assert _beside(monkeypatch, site, "ldvrpkg") is None


def test_a_source_checkout_of_sglang_without_metadata_answers_its_own_version(tmp_path):
    # No SGLang is installed in the plain tier; a checkout on the path (no dist-info) is imported in a child.
    assert versions.installed_version("sglang") is None
    src = tmp_path / "src"
    (src / "sglang").mkdir(parents=True)
    (src / "sglang" / "__init__.py").write_text('__version__ = "0.5.99"\n')
    code = textwrap.dedent(
        """
        import sglang
        from sglang_eagle_nccl.contract import versions
        print(versions.installed_sglang_version())
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.strip() == "0.5.99", out.stderr
