"""The pure half of the cross-rank check: what is compared, what counts as a mismatch, and what the
error tells each rank (issue 19). The collective itself runs in tests/multiprocess."""

from __future__ import annotations

import hashlib
import json
import os
import socket

from sglang_eagle_nccl.inproc.evidence.consistency import (
    PER_INSTALLATION,
    CheckResult,
    Mismatch,
    compare,
    fingerprint,
    format_error,
    must_match_part,
    payload,
)


def test_must_match_part_keeps_only_must_match_nccl_variables_sorted():
    env = {
        "NCCL_PROTO": "LL",
        "NCCL_ALGO": "Ring",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_DEBUG": "INFO",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
        "PATH": "/bin",
        "SGLANG_EAGLE_NCCL": "1",
        "NCCL_ENV_PLUGIN": "/venv/a/lib.so",
        "NCCL_TUNER_PLUGIN": "/venv/a/lib.so",
    }
    part = must_match_part(env)
    assert list(part) == sorted(part)
    assert "NCCL_PROTO" in part and "NCCL_ALGO" in part
    assert not {
        "NCCL_SOCKET_IFNAME",
        "PATH",
        "SGLANG_EAGLE_NCCL",
        "NCCL_ENV_PLUGIN",
        "NCCL_TUNER_PLUGIN",
    } & set(part)
    assert PER_INSTALLATION == {"NCCL_ENV_PLUGIN", "NCCL_TUNER_PLUGIN"}


def test_plugin_library_paths_never_differ_between_ranks():
    a = payload({"NCCL_PROTO": "LL", "NCCL_ENV_PLUGIN": "/node1/venv/lib.so", "NCCL_TUNER_PLUGIN": "/x"}, 0)
    b = payload({"NCCL_PROTO": "LL", "NCCL_ENV_PLUGIN": "/node2/venv/lib.so", "NCCL_TUNER_PLUGIN": "/y"}, 1)
    assert compare([a, b]) == [] and a["fingerprint"] == b["fingerprint"]


def test_fingerprint_is_sha256_of_the_sorted_must_match_values_and_extras():
    env = {"NCCL_PROTO": "LL", "NCCL_SOCKET_IFNAME": "eth0"}
    extras = {"(native library)": "0.1.0+src.abc"}
    expected = hashlib.sha256(
        json.dumps({"NCCL_PROTO": "LL", **extras}, sort_keys=True).encode()
    ).hexdigest()[:16]
    assert fingerprint(env, extras) == expected and len(expected) == 16
    assert fingerprint(env) != fingerprint(env, extras)
    assert fingerprint(env, {"(native library)": "other"}) != fingerprint(env, extras)


def test_payload_carries_rank_host_pid_values_and_extras():
    p = payload({"NCCL_PROTO": "LL", "NCCL_SOCKET_IFNAME": "eth0"}, 3, {"(tuner rules)": "d1"})
    assert p == {
        "rank": 3,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "node": {},
        "fingerprint": fingerprint({"NCCL_PROTO": "LL"}, {"(tuner rules)": "d1"}),
        "values": {"NCCL_PROTO": "LL", "(tuner rules)": "d1"},
    }
    assert payload({}, 0)["values"] == {}
    # Where it runs: what the rank knows of its node; what it does not know is left out.
    assert payload({}, 0, node={"node_rank": 1, "ray_node": None})["node"] == {"node_rank": 1}


def test_compare_reports_each_differing_variable_once_sorted_with_every_rank():
    ps = [
        payload({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, 0),
        payload({"NCCL_PROTO": "LL", "NCCL_ALGO": "Tree"}, 1),
        payload({"NCCL_PROTO": "Simple"}, 2),
    ]
    got = compare(ps)
    assert [m.variable for m in got] == ["NCCL_ALGO", "NCCL_PROTO"]
    assert got[0].values_by_rank == ((0, "Ring"), (1, "Tree"), (2, None))
    assert got[1].values_by_rank == ((0, "LL"), (1, "LL"), (2, "Simple"))


def test_equal_values_are_no_mismatch_and_extras_are_compared_like_variables():
    same = [payload({"NCCL_PROTO": "LL"}, r, {"(tuner rules)": "d"}) for r in range(3)]
    assert compare(same) == [] and compare([]) == [] and compare(same[:1]) == []
    odd = [*same[:2], payload({"NCCL_PROTO": "LL"}, 2, {"(tuner rules)": "e"})]
    (m,) = compare(odd)
    assert m.variable == "(tuner rules)" and dict(m.values_by_rank) == {0: "d", 1: "d", 2: "e"}


def test_ranks_are_read_as_integers():
    (m,) = compare([{"rank": "0", "values": {"NCCL_PROTO": "LL"}}, {"rank": "1", "values": {}}])
    assert m.values_by_rank == ((0, "LL"), (1, None))


def test_describe_groups_ranks_by_value():
    m = Mismatch("NCCL_PROTO", ((0, "LL"), (1, "Simple"), (2, "LL"), (3, None)))
    assert m.describe() == "NCCL_PROTO differs (ranks 0,2: 'LL'; rank 1: 'Simple'; rank 3: (unset))"
    assert m.to_dict() == {
        "variable": "NCCL_PROTO",
        "values_by_rank": {"0": "LL", "1": "Simple", "2": "LL", "3": None},
    }


def test_format_error_names_group_ranks_variables_and_processes():
    ps = [
        {"rank": 1, "host": "b", "pid": 20, "values": {}},
        {"rank": 0, "host": "a", "pid": 10, "values": {}},
    ]
    m = Mismatch("NCCL_ALGO", ((0, "Ring"), (1, None)))
    text = format_error("tp", [m], ps)
    lines = text.splitlines()
    assert lines[0].startswith("NCCL settings differ between ranks of SGLang group 'tp' (ranks 0, 1);")
    assert lines[1] == "  - NCCL_ALGO differs (rank 0: 'Ring'; rank 1: (unset))"
    assert lines[2].startswith("  Fix: give every rank the same value")
    assert lines[2].endswith("Processes: rank 0=a:10, rank 1=b:20")
    assert len(lines) == 3


def test_check_result_is_ok_only_without_mismatches():
    base = dict(group="tp", ranks=(0, 1), fingerprint="f", payloads=())
    assert CheckResult(mismatches=(), **base).ok is True
    assert CheckResult(mismatches=(Mismatch("NCCL_PROTO", ((0, "LL"), (1, None))),), **base).ok is False
