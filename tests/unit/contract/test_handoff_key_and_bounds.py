"""Decisions the mutation run found unguarded: the hand-off key's files and the wire-size bound,
the tuner-rule shadow check's budget, node names in consistency errors, and a few edges."""

from __future__ import annotations

import os
import signal
import stat

import pytest
from packaging.version import Version

from sglang_eagle_nccl.contract import handoff, names
from sglang_eagle_nccl.contract.findings import ProfileError
from sglang_eagle_nccl.contract.jsonlight import dumps
from sglang_eagle_nccl.inproc.evidence.consistency import Mismatch, compare, format_error, payload
from sglang_eagle_nccl.knowledge.nccl import tuner_rules
from sglang_eagle_nccl.knowledge.nccl.parsing import check_level
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import ShadowBudget, check_rules, rule_from_dict, rule_label
from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import normalize_version

# --- the hand-off key -----------------------------------------------------------------------------


@pytest.fixture
def key_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "sglang-eagle-nccl"


def test_ensure_key_makes_its_directory_0700_whatever_the_umask(key_dir):
    old = os.umask(0)
    try:
        key = handoff.ensure_key()
    finally:
        os.umask(old)
    assert key is not None and len(key) == handoff.KEY_BYTES
    assert stat.S_IMODE(os.lstat(key_dir).st_mode) == 0o700


def test_ensure_key_uses_an_existing_private_directory(key_dir):
    # 0711: only group/other *write* bits make a directory untrusted; others may traverse it.
    key_dir.mkdir(parents=True)
    key_dir.chmod(0o711)
    key = handoff.ensure_key()
    assert key is not None and len(key) == handoff.KEY_BYTES
    assert (key_dir / handoff.KEY_FILE).read_bytes() == key


@pytest.mark.parametrize("mode", [0o770, 0o702])
def test_ensure_key_writes_no_key_in_a_directory_others_can_write(key_dir, mode):
    key_dir.mkdir(parents=True)
    key_dir.chmod(mode)
    assert handoff.ensure_key() is None
    assert not (key_dir / handoff.KEY_FILE).exists()


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give the directory to another user")
def test_ensure_key_writes_no_key_in_another_users_directory(key_dir):
    key_dir.mkdir(parents=True)
    key_dir.chmod(0o700)
    os.chown(key_dir, 12345, -1)
    assert handoff.ensure_key() is None
    assert not (key_dir / handoff.KEY_FILE).exists()


def test_ensure_key_returns_an_existing_key_before_judging_the_directory(key_dir):
    first = handoff.ensure_key()
    assert first is not None
    key_dir.chmod(0o777)  # the private key file is trusted on its own; nothing new is written
    assert handoff.ensure_key() == first


def test_read_key_refuses_a_symlink_to_a_private_key(key_dir, tmp_path):
    real = tmp_path / "real.key"
    real.write_bytes(b"k" * handoff.KEY_BYTES)
    real.chmod(0o600)
    key_dir.mkdir(parents=True, mode=0o700)
    (key_dir / handoff.KEY_FILE).symlink_to(real)
    assert handoff.read_key() is None


def test_read_key_refuses_a_short_key(key_dir):
    key_dir.mkdir(parents=True, mode=0o700)
    path = key_dir / handoff.KEY_FILE
    path.write_bytes(b"k" * (handoff.KEY_BYTES - 1))
    path.chmod(0o600)
    assert handoff.read_key() is None
    path.write_bytes(b"k" * handoff.KEY_BYTES)
    assert handoff.read_key() == b"k" * handoff.KEY_BYTES


class _Blocked(Exception):
    """Raised from SIGALRM: not an OSError, so read_key cannot swallow it."""


def test_read_key_does_not_wait_on_a_fifo(key_dir):
    key_dir.mkdir(parents=True, mode=0o700)
    os.mkfifo(key_dir / handoff.KEY_FILE, 0o600)

    def alarm(signum, frame):
        raise _Blocked

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(5)
    try:
        assert handoff.read_key() is None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# --- the wire-size bound --------------------------------------------------------------------------


def _data_of_wire_length(chars):
    """Profile data whose signed hand-off is exactly ``chars`` characters (even: hex doubles)."""
    base = {"v": 2, "profile": {"name": ""}, "inputs": {}, "run_dir": None}
    json_bytes = (chars - len(handoff.WIRE_PREFIX) - 1 - 1 - 64) // 2
    return {"name": "a" * (json_bytes - len(dumps(base)))}


def test_the_longest_hand_off_is_written_and_one_more_byte_is_refused_naming_its_size():
    most = handoff.MAX_WIRE_CHARS - handoff.MAX_WIRE_CHARS % 2  # signed lengths are even
    data = _data_of_wire_length(most)
    text = handoff.encode(data, inputs={}, run_dir=None, key=b"k" * handoff.KEY_BYTES)
    assert len(text) == most <= handoff.MAX_WIRE_CHARS
    data["name"] += "a"
    with pytest.raises(ProfileError) as info:
        handoff.encode(data, inputs={}, run_dir=None, key=b"k" * handoff.KEY_BYTES)
    (f,) = info.value.findings
    chars = most + 2
    assert chars > handoff.MAX_WIRE_CHARS
    assert (f.severity, f.variable, f.value) == ("error", names.ENV_PROFILE, f"{chars} characters")
    entry = len(names.ENV_PROFILE) + 1 + chars + 1
    assert f"would take {entry} bytes as {names.ENV_PROFILE}=<value>" in f.rule
    assert f"(hex of {(chars - 70) // 2} bytes of JSON" in f.rule
    assert f"under about {handoff.MAX_WIRE_CHARS // 2 // 1024} KiB" in f.fix


# --- tuner rules: the shadow check ----------------------------------------------------------------


def _rule(**kw):
    return rule_from_dict({"collective": "allreduce", "algorithm": "ring", "protocol": "LL", **kw})


def test_too_many_rules_is_one_error_and_no_shadow_verdicts():
    rules = [_rule(bytes=[0, 1024])] * (tuner_rules.MAX_RULES + 1)
    errors = [f for f in check_rules(rules, None, None) if f.severity == "error"]
    assert len(errors) == 1
    (f,) = errors
    assert f.variable == "tuner.rules" and f.value == f"{tuner_rules.MAX_RULES + 1} rules"
    assert f.fix.startswith("merge rules with the same choice")


def test_a_rule_whole_under_an_earlier_one_is_shadowed_without_spending_the_budget():
    wide = _rule(bytes=[0, 1048576])
    narrow = _rule(bytes=[0, 1024], nranks=[2, 2])
    target = _rule(bytes=[0, 65536], nranks=[2, 8])
    findings = check_rules([wide, narrow, target], None, None, budget=ShadowBudget(0))
    shadowed = {f.variable for f in findings if f.severity == "error" and "can never match" in f.rule}
    assert shadowed == {rule_label(1), rule_label(2)}
    assert not [f for f in findings if f.severity == "warning" and "not checked for shadowing" in f.rule]


def test_a_rule_the_sweep_cannot_decide_in_budget_is_named_in_a_warning():
    a = _rule(bytes=[0, 1024], nranks=[2, 4])
    b = _rule(bytes=[512, 4096], nranks=[3, 8])
    target = _rule(bytes=[0, 2048], nranks=[2, 8])
    findings = check_rules([a, b, target], None, None, budget=ShadowBudget(0))
    (w,) = [f for f in findings if "not checked for shadowing" in f.rule and f.value == target.describe()]
    assert (w.severity, w.variable) == ("warning", rule_label(2))
    assert w.fix == "order the rules from narrow to wide, or split them by collective or group"


def test_shadow_budget_spends_to_exactly_zero_then_stops():
    b = ShadowBudget(5)
    assert b.spend(2) is True and b.spend(3) is True  # the last unit is still work done
    assert (b.left, b.spent) == (0, 5)
    assert b.spend(1) is False
    assert (b.left, b.spent) == (-1, 6)
    assert b.spend(1) is False  # spent: stops at once, counting nothing more
    assert (b.left, b.spent) == (-1, 6)


# --- consistency: nodes in the error --------------------------------------------------------------


def test_error_orders_node_ranks_as_text_and_names_two_nodes_in_plural():
    ps = [
        payload({"NCCL_ALGO": "Ring"}, 0, node={"node_rank": 2}),
        payload({"NCCL_ALGO": "Ring"}, 1, node={"node_rank": 10}),
        payload({"NCCL_ALGO": "Tree"}, 2, node={"node_rank": 3}),
    ]
    (m,) = compare(ps)
    nodes = {0: 2, 1: 10, 2: 3}
    assert m.describe(nodes) == "NCCL_ALGO differs (ranks 0,1 (nodes 10,2): 'Ring'; rank 2 (node 3): 'Tree')"
    assert "(ranks 0, 1, 2 on nodes 10, 2, 3)" in format_error("tp", [m], ps)


def test_nodes_of_mixed_kinds_are_ordered_as_text():
    m = Mismatch("NCCL_PROTO", ((0, "LL"), (1, "LL"), (2, "Simple")))
    assert (
        m.describe({0: "b", 1: 1, 2: "a"})
        == "NCCL_PROTO differs (ranks 0,1 (nodes 1,b): 'LL'; rank 2 (node a): 'Simple')"
    )


# --- edges ----------------------------------------------------------------------------------------


def test_negative_legacy_level_error_names_the_variable_and_value():
    # 4294967295 wraps to -1 in NCCL's C int: a negative level.
    (f,) = check_level("NCCL_P2P_LEVEL", "4294967295", None)
    assert (f.severity, f.variable, f.value) == ("error", "NCCL_P2P_LEVEL", "4294967295")
    assert "undefined behaviour" in f.rule


class _VersionText:
    def __str__(self):
        return "0.5.24rc1"


def test_normalize_version_reads_anything_by_its_text():
    assert normalize_version(_VersionText()) == Version("0.5.24")
    assert (
        normalize_version("0.5.23+cu130") == normalize_version(Version("0.5.23+cu130")) == Version("0.5.23")
    )
