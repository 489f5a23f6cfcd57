"""The per-release all-reduce data, and the audit's lines for a description. The describer's promise
never to raise or run code is tests/unit/inproc/evidence/test_allreduce_readers_hostile.py."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from sglang_eagle_nccl.knowledge.sglang import allreduce_paths as ap

RELEASES = [
    "0.4.3",
    "0.4.6",
    "0.4.7",
    "0.4.10",
    "0.5.1",
    "0.5.2",
    "0.5.3",
    "0.5.3.post1",
    "0.5.4",
    "0.5.4.post1",
    "0.5.4.post3",
    "0.5.5",
    "0.5.6.post2",
    "0.5.7",
    "0.5.9",
    "0.5.10",
    "0.5.10.post1",
    "0.5.11",
    "0.5.12",
    "0.5.12.post1",
    "0.5.13",
    "0.5.15",
    "0.5.16",
    "0.5.17",
    "0.5.19",
    "0.5.20",
    "0.5.21",
    "0.5.22",
    "0.5.23",
    "0.5.30",
    "0.6.0",
]


def test_every_release_from_0_4_3_has_exactly_one_order():
    ranges = ap._dispatch_ranges()
    for release in RELEASES:
        v = Version(release)
        matching = [r for r in ranges if SpecifierSet(r.versions).contains(v, prereleases=True)]
        assert len(matching) == 1, (release, [r.versions for r in matching])
        assert ap.dispatch_for(release) is matching[0]
    assert ap.dispatch_for("0.4.2") is None


def test_each_checked_release_lies_in_its_own_range_and_every_step_is_a_known_path():
    for entry in ap._dispatch_ranges():
        assert entry.checked and entry.source
        for release in entry.checked:
            assert ap.dispatch_for(release) is entry, (release, entry.versions)
        names = [s.path for s in entry.order]
        assert names[-1] == "torch_pg" and len(set(names)) == len(names)
        for step in entry.order:
            assert ap.path_info(step.path).title
            assert set(step.unless) <= set(names)
            assert step.when


def test_limits_do_not_overlap_and_cite_sources():
    for name, rows in ap._data()["limits"].items():
        for release in RELEASES:
            hits = [
                r for r in rows if SpecifierSet(r["versions"]).contains(Version(release), prereleases=True)
            ]
            assert len(hits) <= 1, (name, release)
        for row in rows:
            assert row["source"] and row["checked"]
            for release in row["checked"]:
                assert SpecifierSet(row["versions"]).contains(Version(release), prereleases=True), (
                    name,
                    release,
                )


def _order(release: str) -> list[str]:
    return [s.path for s in ap.dispatch_for(release).order]


def test_order_changes_read_from_sglang_source():
    # 0.4.10-0.5.1 try quick all-reduce before custom all-reduce; from 0.5.3 after it.
    assert _order("0.4.10").index("quick_allreduce") < _order("0.4.10").index("custom_allreduce")
    assert _order("0.5.4").index("custom_allreduce") < _order("0.5.4").index("quick_allreduce")
    # --enable-symm-mem: whole-group PyNccl before custom all-reduce from 0.5.4.post3 ...
    post3 = ap.dispatch_for("0.5.4.post3").order
    assert post3[0].path == "pynccl_symm_mem" and post3[0].scope == "all" and not post3[0].unless
    assert ap.dispatch_for("0.5.4").order[0].scope == "tensor"
    # ... and yielding to custom all-reduce from 0.5.20
    assert ap.dispatch_for("0.5.23").order[0].unless == ("mscclpp", "custom_allreduce")
    # PCIe IPC from 0.5.21, right after custom all-reduce
    assert "pcie_ipc" not in _order("0.5.20")
    o = _order("0.5.21")
    assert o.index("pcie_ipc") == o.index("custom_allreduce") + 1
    assert "mscclpp" not in _order("0.4.6") and "mscclpp" in _order("0.4.7")


def test_limits_lookup():
    assert ap.limits_for("custom_allreduce_v1", "0.5.7")["compare"] == "<"
    assert ap.limits_for("custom_allreduce_v1", "0.5.10")["compare"] == "<="
    assert ap.limits_for("custom_allreduce_v2", "0.5.11")["default_on"] is False
    assert ap.limits_for("custom_allreduce_v2", "0.5.12.post1")["fallback_v1"] is False
    assert ap.limits_for("custom_allreduce_v2", "0.5.23")["max_bytes"] == 16 * 1024 * 1024
    assert ap.limits_for("custom_allreduce_v2", "0.5.7") is None
    assert ap.limits_for("pcie_ipc", "0.5.20") is None and ap.limits_for("pcie_ipc", "0.5.21")["groups"] == [
        "tp"
    ]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("0.5.23", "0.5.23"),
        ("0.5.24rc1", "0.5.24"),
        ("0.5.23+cu130", "0.5.23"),
        ("0.5.4.post3", "0.5.4.post3"),
        ("0.5.10.dev3", "0.5.10"),
    ],
)
def test_normalize_version(given, expected):
    assert ap.normalize_version(given) == Version(expected)


def test_format_paths_survives_a_malformed_description():
    assert ap.format_paths({"order": [{"bad": 1}], "world_size": 2})[-1].startswith(
        "all-reduce paths: cannot format"
    )


def test_fmt_bytes():
    assert ap.fmt_bytes(16 * 1024 * 1024) == "16777216 bytes (16 MiB)"
    assert ap.fmt_bytes(14336) == "14336 bytes (14 KiB)"
    assert ap.fmt_bytes(100) == "100 bytes"
    assert ap.fmt_bytes(None) == "unknown"
