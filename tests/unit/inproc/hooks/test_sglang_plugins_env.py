"""SGLANG_PLUGINS read exactly as SGLang 0.5.11-0.5.23 reads it (sglang/srt/plugins/__init__.py):
unset or empty allows every plugin; otherwise the comma-separated names, stripped, empty ones
dropped, compared case-sensitively -- so a value of only spaces or commas allows none."""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.knowledge.sglang.plugin_loader import entry_point_allowed, sglang_plugins_allowlist


@pytest.mark.parametrize(
    "value,allowlist,allowed",
    [
        (None, None, True),
        ("", None, True),
        (" ", frozenset(), False),
        (",", frozenset(), False),
        (" , ,", frozenset(), False),
        ("sglang_eagle_nccl", frozenset({"sglang_eagle_nccl"}), True),
        (" sglang_eagle_nccl ", frozenset({"sglang_eagle_nccl"}), True),
        ("other,, sglang_eagle_nccl\t,", frozenset({"other", "sglang_eagle_nccl"}), True),
        ("SGLANG_EAGLE_NCCL", frozenset({"SGLANG_EAGLE_NCCL"}), False),
        ("sglang-eagle-nccl", frozenset({"sglang-eagle-nccl"}), False),
        ("other", frozenset({"other"}), False),
        ("sglang_eagle_nccl;other", frozenset({"sglang_eagle_nccl;other"}), False),
    ],
)
def test_sglang_plugins_parsing(value, allowlist, allowed):
    env = {} if value is None else {"SGLANG_PLUGINS": value}
    assert sglang_plugins_allowlist(env) == allowlist
    assert entry_point_allowed(env) is allowed


def test_doctor_uses_the_same_parsing(monkeypatch):
    from sglang_eagle_nccl.offline.doctor import run_doctor

    monkeypatch.setenv("SGLANG_PLUGINS", " ")
    assert any("does not list sglang_eagle_nccl" in p for p in run_doctor().problems)
    monkeypatch.setenv("SGLANG_PLUGINS", "x, sglang_eagle_nccl ")
    assert not any("SGLANG_PLUGINS" in p for p in run_doctor().problems)


@pytest.mark.parametrize(
    "text,rank",
    [
        ("0", 0),
        ("7", 7),
        ("007", 7),
        ("123456789", 123456789),
        ("1234567890", None),
        ("٣", None),
        ("³", None),
        ("", None),
        ("-1", None),
        (" 1", None),
        ("1 ", None),
        ("9" * 5000, None),
    ],
)
def test_parse_node_rank_is_ascii_only_and_bounded(text, rank):
    from sglang_eagle_nccl.contract.names import parse_node_rank

    assert parse_node_rank(text) == rank
