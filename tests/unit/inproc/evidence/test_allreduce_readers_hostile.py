"""The describer's promise never to raise or run code.

The describer is exercised on SGLang's real groups in tests/sglang/test_allreduce_paths.py; here it
only gets hostile input (no SGLang needed): objects that are not GroupCoordinators at all, and
attributes whose reading would run code.
"""

from __future__ import annotations

import json

import pytest

from sglang_eagle_nccl.inproc.evidence import allreduce_readers as rd
from sglang_eagle_nccl.knowledge.sglang import allreduce_paths as ap


class Exploding:
    """Every attribute read runs code that fails: the describer must not trigger any of it."""

    calls: list[str] = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)  # let pytest and copy probe dunders as usual
        Exploding.calls.append(name)
        raise RuntimeError(f"read {name}")


class WithProperties:
    """A group-shaped object whose communicators are properties: reading one would run code."""

    ran: list[str] = []
    unique_name = "tp:0"
    world_size = 2

    @property
    def ca_comm(self):
        WithProperties.ran.append("ca_comm")
        raise RuntimeError("a property ran")

    @property
    def pynccl_comm(self):
        WithProperties.ran.append("pynccl_comm")
        return object()


@pytest.mark.parametrize(
    "obj",
    [None, 42, "tp", object(), Exploding(), WithProperties()],
    ids=["none", "int", "str", "object", "exploding", "properties"],
)
def test_describe_group_never_raises_and_runs_no_attribute_code(obj):
    Exploding.calls.clear()
    WithProperties.ran.clear()
    d = rd.describe_group(obj, sglang_version="0.5.23")
    json.dumps(d)  # JSON-safe for the audit record
    assert Exploding.calls == [] and WithProperties.ran == []
    assert set(d) >= {"implementations", "order", "error", "world_size", "device_group_is_nccl"}
    lines = ap.format_paths(d)
    assert lines and lines[0].startswith("all-reduce paths of group")


def test_describe_group_reports_unreadable_version_instead_of_raising():
    d = rd.describe_group(object(), sglang_version="not a version")
    assert "not a PEP 440 version" in d["error"] and d["order"] == []
    d = rd.describe_group(object(), sglang_version="0.4.2")
    assert "older than every release" in d["error"]
