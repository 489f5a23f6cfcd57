"""Applying a profile to the real os.environ, and catching others' writes over it."""

from __future__ import annotations

import os

import pytest

from sglang_eagle_nccl.inproc import env_writer as envmod


def test_apply_reports_added_changed_unchanged(clean_environ):
    os.environ["NCCL_PROTO"] = "Simple"
    os.environ["NCCL_ALGO"] = "Ring"
    report = envmod.apply({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_BUFFSIZE": "4194304"})
    assert [c.name for c in report.added] == ["NCCL_BUFFSIZE"]
    assert [(c.name, c.before, c.after) for c in report.changed] == [("NCCL_PROTO", "Simple", "LL")]
    assert [c.name for c in report.unchanged] == ["NCCL_ALGO"]
    assert os.environ["NCCL_PROTO"] == "LL" and os.environ["NCCL_BUFFSIZE"] == "4194304"


def test_restore_reports_each_overwrite_and_respects_keep(clean_environ):
    desired = {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "NCCL_PROTO": "LL"}
    envmod.apply(desired)
    # What SGLang <= 0.5.4 does in _set_envs_and_config:
    os.environ["NCCL_CUMEM_ENABLE"] = "0"
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    overwrites = envmod.restore(desired, keep={"NCCL_NVLS_ENABLE"})
    assert [(o.name, o.foreign_value, o.restored) for o in overwrites] == [
        ("NCCL_CUMEM_ENABLE", "0", True),
        ("NCCL_NVLS_ENABLE", "0", False),
    ]
    assert os.environ["NCCL_CUMEM_ENABLE"] == "1"
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"


def test_restore_puts_back_a_removed_variable(clean_environ):
    envmod.apply({"NCCL_PROTO": "LL"})
    del os.environ["NCCL_PROTO"]
    (o,) = envmod.restore({"NCCL_PROTO": "LL"})
    assert o.foreign_value is None and os.environ["NCCL_PROTO"] == "LL"


def test_diff_of_snapshots():
    changes = envmod.diff({"NCCL_A": "1", "NCCL_B": "2"}, {"NCCL_A": "1", "NCCL_B": "3", "NCCL_C": "4"})
    assert [(c.name, c.kind) for c in changes] == [("NCCL_B", "changed"), ("NCCL_C", "added")]


def test_snapshot_holds_only_nccl_variables(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("NCCL_PROTO", "LL")
    snap = envmod.nccl_snapshot()
    assert "NCCL_PROTO" in snap and all(k.startswith(("NCCL_", "TORCH_NCCL_")) for k in snap)


@pytest.mark.parametrize("name", ["LD_PRELOAD", "PATH", "nccl_proto", "NCCL-X"])
def test_writer_refuses_non_nccl_names(clean_environ, name, environ_guard):
    with pytest.raises(ValueError):
        envmod.apply({name: "x"})
    with pytest.raises(ValueError):
        envmod.restore({name: "x"})
