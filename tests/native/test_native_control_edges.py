"""The native library's control functions at their edges (issue 19), through ctypes exactly as the
binding calls them: a value set again replaces the first (process-wide and per group), a reset
forgets every value, and a group value is served only while its group is selected."""

from __future__ import annotations

import pytest

NAME = "NCCL_SOCKET_NTHREADS"


@pytest.mark.parametrize("abi", [1, 2])
def test_a_value_set_again_replaces_the_first(lib, abi):
    raw = lib._lib
    assert raw.sen_env_set(NAME.encode(), b"1") == 0
    assert raw.sen_env_set(NAME.encode(), b"2") == 0
    assert lib.plugin_get_env(NAME, abi)[0] == "2"
    assert raw.sen_env_set_group(b"tp", NAME.encode(), b"3") == 0
    assert raw.sen_env_set_group(b"tp", NAME.encode(), b"4") == 0
    lib.select_group("tp")
    assert lib.plugin_get_env(NAME, abi)[0] == "4"
    lib.select_group("pp")
    assert lib.plugin_get_env(NAME, abi)[0] == "2"


def test_reset_forgets_every_value(lib, monkeypatch):
    monkeypatch.delenv(NAME, raising=False)
    lib.configure_env({NAME: "3"}, {"tp": {NAME: "5"}})
    assert lib.plugin_get_env(NAME)[0] == "3"
    lib.configure_env({})
    lib.select_group("tp")
    assert lib.plugin_get_env(NAME) == (None, 0)


def test_bad_control_arguments_are_refused(lib):
    raw = lib._lib
    assert raw.sen_env_set(None, b"1") != 0 and raw.sen_env_set(NAME.encode(), None) != 0
    assert raw.sen_env_set_group(None, NAME.encode(), b"1") != 0
    assert raw.sen_env_set_group(b"", NAME.encode(), b"1") != 0
    assert raw.sen_env_environment_wins(None) != 0


def _add(raw, collective=4, lo=0, hi=100, algorithm=1, protocol=0, channels=0, group=None):
    return raw.sen_tuner_add_rule(collective, lo, hi, 1, 8, 1, 1, group, algorithm, protocol, channels)


def test_the_tuner_refuses_rules_python_would_never_send(lib):
    """The C side range-checks what it is handed (Python validates first; this is the second wall)."""
    raw = lib._lib
    assert _add(raw) == 0 and raw.sen_tuner_rule_count() == 1
    assert _add(raw, lo=100, hi=100) < 0  # an empty [min, max)
    assert _add(raw, lo=101, hi=100) < 0
    assert _add(raw, lo=99, hi=100) == 1  # one byte wide is fine
    assert _add(raw, algorithm=6) == 2 and _add(raw, algorithm=7) < 0  # PAT (6) is the highest id
    assert _add(raw, protocol=2) == 3 and _add(raw, protocol=3) < 0
    assert _add(raw, collective=5) < 0 and _add(raw, collective=-1) < 0 and _add(raw, algorithm=-1) < 0
    assert _add(raw, channels=-1) < 0 and _add(raw, group=b"") < 0
    assert raw.sen_tuner_rule_count() == 4
