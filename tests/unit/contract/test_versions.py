"""One PEP 440 helper and one installed-version lookup (contract/versions.py), and no second copy of either."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.version import InvalidVersion, Version

from sglang_eagle_nccl.contract import versions

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "given,release",
    [
        ("0.5.23", "0.5.23"),
        ("0.5.23+cu130", "0.5.23"),
        ("0.5.24rc1", "0.5.24"),
        ("0.5.21.dev0", "0.5.21"),
        ("0.5.4.post3", "0.5.4.post3"),
        ("0.5.4.post3+local", "0.5.4.post3"),
        ("0.5.20.post1.dev0", "0.5.20.post1"),
    ],
)
def test_what_a_version_stands_for(given, release):
    assert versions.stands_for(given) == Version(release)
    assert versions.stands_for(Version(given)) == Version(release)


@pytest.mark.parametrize(
    "spec,version,inside",
    [
        (">=0.5.11,<0.5.13", "0.5.11rc1", True),
        (">=0.5.11,<0.5.13", "0.5.13rc1", False),
        (">=0.4.3,<0.5.5", "0.5.4.post3", True),
        (">=0.5.5", "0.5.4.post3", False),
        ("<0.5.19", "0.5.19.dev0", False),
        (">=0.5.19", "0.5.19+cu130", True),
    ],
)
def test_ranges_are_judged_by_the_release_a_version_stands_for(spec, version, inside):
    assert versions.in_range(spec, version) is inside


@pytest.mark.parametrize("bad", ["not-a-version", "0." + "9" * 5000, "", "1.0 extra"])
def test_parse_refuses_what_is_not_a_version(bad):
    with pytest.raises(InvalidVersion):
        versions.parse(bad)


def test_installed_lookup_answers_none_for_a_missing_distribution():
    assert versions.installed_version("surely-not-installed-sglang-eagle-nccl-test") is None
    assert versions.installed_version("packaging") is not None


# Where each kind of answer may be computed. Anything else asks contract/versions.py.
_COPIES = {
    "a release normalised from its parts (base_version)": re.compile(r"\.base_version\b"),
    "an installed distribution's version read from package metadata": re.compile(
        r"metadata\.version\(|from importlib\.metadata import[^\n]*\bversion\b|importlib_metadata"
    ),
    "a dist-info directory read beside a package": re.compile(r"\.dist-info"),
    "a version range judged with packaging directly": re.compile(r"SpecifierSet\([^)]*\)\.contains\("),
}
# packaging is still how manifests and data tables are *validated* (a SpecifierSet built to reject a
# bad range); the gates themselves go through contract/versions.py.
_SCANNED = ("sglang_eagle_nccl", "ci", "bench")


def _python_files():
    for top in _SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            if path.name == "versions.py" and path.parent.name == "contract":
                continue
            yield path


def test_there_is_no_second_copy_of_the_version_helpers():
    found = []
    for path in _python_files():
        text = path.read_text("utf-8")
        for what, pattern in _COPIES.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}: {what}")
    allowed = {
        # SGLang's plugin entry point is looked up in the installed metadata, not a version.
        "sglang_eagle_nccl/offline/doctor.py": "entry_points",
        # The GPU check reports third-party versions on a machine it inspects (its own script).
        "ci/gpu_check/environment.py": "md.version",
        # ci/matrix.py checks wheels and validates manifests; it names no installed version.
    }
    unexpected = [f for f in found if not any(f.startswith(p) and allowed[p] in _line(f) for p in allowed)]
    assert not unexpected, "use sglang_eagle_nccl.contract.versions instead:\n" + "\n".join(unexpected)


def _line(finding: str) -> str:
    rel, line, _ = finding.split(":", 2)
    return (REPO / rel).read_text("utf-8").splitlines()[int(line) - 1]


def test_no_module_defines_its_own_version_helper():
    names = re.compile(
        r"^\s*def (stands_for|release_of|installed_sglang_version|_version_beside_package|"
        r"_installed_sglang|package_version|normalize_version)\b",
        re.M,
    )
    defined = {}
    for path in _python_files():
        for match in names.finditer(path.read_text("utf-8")):
            defined.setdefault(match.group(1), []).append(str(path.relative_to(REPO)))
    # Thin wrappers that only delegate to contract/versions.py, kept for their callers' names.
    delegating = {
        "normalize_version": ["sglang_eagle_nccl/knowledge/sglang/allreduce_paths.py"],
        "_installed_sglang": [
            "sglang_eagle_nccl/cli/sizes.py",
            "sglang_eagle_nccl/inproc/evidence/allreduce_readers.py",
        ],
        "package_version": ["sglang_eagle_nccl/offline/doctor.py"],
    }
    for name, paths in defined.items():
        assert sorted(paths) == sorted(delegating.get(name, [])), (name, paths)
        for rel in paths:
            body = (REPO / rel).read_text("utf-8").split(f"def {name}", 1)[1].split("\ndef ", 1)[0]
            assert "versions." in body or "installed_sglang_version" in body, f"{rel}: {name} must delegate"
