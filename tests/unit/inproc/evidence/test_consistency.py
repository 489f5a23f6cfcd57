"""Cross-rank comparison logic (pure)."""

from __future__ import annotations

from sglang_eagle_nccl.inproc.evidence.consistency import (
    compare,
    fingerprint,
    format_error,
    must_match_part,
    payload,
)


def test_node_local_and_free_variables_are_not_compared():
    env = {
        "NCCL_PROTO": "LL",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_HCA": "=mlx5_0",
        "PATH": "/x",
    }
    assert must_match_part(env) == {"NCCL_PROTO": "LL"}


def test_fingerprint_ignores_node_local_differences():
    a = {"NCCL_PROTO": "LL", "NCCL_SOCKET_IFNAME": "eth0"}
    b = {"NCCL_PROTO": "LL", "NCCL_SOCKET_IFNAME": "ib0"}
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint({"NCCL_PROTO": "Simple"})


def test_compare_names_variable_ranks_and_values():
    p = [
        payload({"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "4194304"}, 0),
        payload({"NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": "4194304"}, 1),
        payload({"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "4194304"}, 2),
    ]
    (m,) = compare(p)
    assert m.variable == "NCCL_PROTO"
    assert dict(m.values_by_rank) == {0: "LL", 1: "Simple", 2: "LL"}
    text = format_error("tp", [m], p)
    assert "ranks 0,2: 'LL'" in text and "rank 1: 'Simple'" in text and "'tp'" in text


def test_set_on_one_rank_only_is_a_mismatch():
    (m,) = compare([payload({"NCCL_ALGO": "Ring"}, 0), payload({}, 1)])
    assert m.variable == "NCCL_ALGO" and dict(m.values_by_rank)[1] is None
    assert "(unset)" in m.describe()


def test_unknown_nccl_variables_must_match_by_default():
    assert must_match_part({"NCCL_SOMETHING_NEW": "1"}) == {"NCCL_SOMETHING_NEW": "1"}


def test_error_names_the_nodes_of_ranks_that_share_a_hostname():
    """Two Ray nodes of one machine (or two containers) share a hostname: the node ranks tell them apart."""
    a = payload({}, 0, node={"node_rank": 0, "ray_node": "a" * 56})
    b = payload({"NCCL_ALGO": "Tree"}, 1, node={"node_rank": 1, "ray_node": "b" * 56})
    assert a["host"] == b["host"]
    (m,) = compare([a, b])
    text = format_error("world", [m], [a, b])
    assert "(ranks 0, 1 on nodes 0, 1)" in text
    assert "rank 0 (node 0): (unset)" in text and "rank 1 (node 1): 'Tree'" in text
    assert f"(node 1, Ray node {'b' * 12})" in text
    # One node (or no node rank known): nothing about nodes is added.
    one = [payload({}, 0, node={"node_rank": 0}), payload({"NCCL_ALGO": "Tree"}, 1, node={"node_rank": 0})]
    assert "node" not in compare(one)[0].describe() and " on nodes" not in format_error(
        "tp", compare(one), one
    )
