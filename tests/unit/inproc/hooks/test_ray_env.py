"""What SGLang's Ray actors get: the decisions of inproc/hooks/hook_ray.py, without Ray (the tests/ray tier
runs them on a real two-node cluster)."""

from __future__ import annotations

import pytest

from sglang_eagle_nccl.contract.handoff import current_inputs
from sglang_eagle_nccl.decision.child_env import child_environment
from sglang_eagle_nccl.decision.ray_env import foreign_inputs, merge_env_vars, number_nodes
from sglang_eagle_nccl.inproc.hooks.hook_ray import actor_nccl_values
from sglang_eagle_nccl.profile.resolve import decode_handoff, resolve

DATA = {
    "name": "p",
    "env": {"NCCL_PROTO": "LL", "NCCL_CUMEM_ENABLE": "1"},
    "groups": {},
    "nodes": {"0": {"NCCL_SOCKET_IFNAME": "eth0"}, "1": {"NCCL_SOCKET_IFNAME": "ens5"}},
    "policy": {},
    "sources": [],
}


def test_node_zero_is_the_first_actors_node_then_bundle_order():
    # SGLang's automatic placement group: node 0 is the driver's bundle (here bundle 2), then the
    # other bundles in order -- SGLang's own bundle_for_node.
    assert number_nodes({0: "n-a", 1: "n-b", 2: "n-c"}, first_bundle=2) == {"n-c": 0, "n-a": 1, "n-b": 2}
    # Several bundles on one Ray node (SPREAD is best effort; a custom group with one GPU per bundle):
    # a node is numbered once, at its lowest bundle.
    assert number_nodes({0: "n-a", 1: "n-a", 2: "n-b", 3: "n-b"}, first_bundle=0) == {"n-a": 0, "n-b": 1}
    assert number_nodes({0: "n-a", 1: "n-b", 2: "n-a"}, first_bundle=1) == {"n-b": 0, "n-a": 1}


def test_actor_values_are_the_nodes_profile_plus_sglangs_driver_writes_after_the_policy():
    written = {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0", "NCCL_GRAPH_REGISTER": None}
    node1 = actor_nccl_values(DATA, 1, None, written, keep=set())
    # The profile's values for node 1 (not the driver's node-0 interface); SGLang's write of a profile
    # variable was restored; its other writes travel; a variable it removed does not.
    assert node1 == {
        "NCCL_PROTO": "LL",
        "NCCL_CUMEM_ENABLE": "1",
        "NCCL_SOCKET_IFNAME": "ens5",
        "NCCL_NVLS_ENABLE": "0",
    }
    kept = actor_nccl_values(DATA, 0, None, written, keep={"NCCL_CUMEM_ENABLE"})
    assert (
        kept["NCCL_CUMEM_ENABLE"] == "0" and kept["NCCL_SOCKET_IFNAME"] == "eth0"
    )  # sglang_wins: SGLang's value
    assert "NCCL_SOCKET_IFNAME" not in actor_nccl_values(DATA, None, None, {}, keep=set())


def test_user_values_stay_ours_win_on_our_names_and_are_reported():
    ours = {
        "NCCL_PROTO": "LL",
        "SGLANG_EAGLE_NCCL": "1",
        "SGLANG_EAGLE_NCCL_PROFILE": "sen3.x.y",
        "SGLANG_EAGLE_NCCL_NODE_RANK": "1",
    }
    theirs = {
        "NCCL_PROTO": "Simple",
        "NCCL_DEBUG": "INFO",
        "HF_TOKEN": "t",
        "SGLANG_EAGLE_NCCL_PROFILE": "old",
        "SGLANG_EAGLE_NCCL_NODE_RANK": "0",
    }
    merged, replaced = merge_env_vars(ours, theirs)
    assert merged["NCCL_DEBUG"] == "INFO" and merged["HF_TOKEN"] == "t"  # the user's own values are kept
    assert merged["NCCL_PROTO"] == "LL" and merged["SGLANG_EAGLE_NCCL_PROFILE"] == "sen3.x.y"
    # A profile variable a user set otherwise is reported; the per-actor hand-off and node rank are not.
    assert replaced == [{"name": "NCCL_PROTO", "user_value": "Simple", "value": "LL"}]


def test_job_inputs_the_hand_off_was_not_resolved_from_are_refused_in_the_driver():
    ours = {"SGLANG_EAGLE_NCCL": "1", "SGLANG_EAGLE_NCCL_AUDIT_DIR": "/a"}
    assert foreign_inputs(
        {
            "SGLANG_EAGLE_NCCL_ENV": "NCCL_ALGO=Tree",
            "SGLANG_EAGLE_NCCL_AUDIT_DIR": "/b",
            "SGLANG_EAGLE_NCCL_NODE_RANK": "3",
            "NCCL_ALGO": "Tree",
        },
        ours,
    ) == ["SGLANG_EAGLE_NCCL_ENV"]


@pytest.mark.parametrize("node_rank", [0, 1])
def test_an_actor_environment_is_standalone_and_verifies_where_it_lands(node_rank, clean_environ):
    """Exactly what the actor gets (nothing of the driver's environment): the hand-off decodes there, with
    the node's values and the launch directory, as a child of the driver's launch."""
    profile = resolve(["pcie-8gpu"], use_environ=False).profile
    driver = {
        "SGLANG_EAGLE_NCCL": "pcie-8gpu",
        "SGLANG_EAGLE_NCCL_ENV": "NCCL_NTHREADS=256",
        "PATH": "/bin",
        "NCCL_SOCKET_IFNAME": "eth-driver",
    }
    values = {"NCCL_PROTO": "LL", "NCCL_SOCKET_IFNAME": f"if{node_rank}"}
    env = {
        k: v
        for k, v in child_environment(
            profile,
            run_dir="/srv/audit/launch",
            node_rank=node_rank,
            environ=driver,
            root_pid="4242",
            standalone=True,
            nccl_values=values,
        ).items()
        if v is not None
    }
    assert (
        "PATH" not in env and env["NCCL_SOCKET_IFNAME"] == f"if{node_rank}"
    )  # never the driver's node-local value
    assert env["SGLANG_EAGLE_NCCL_ENV"] == "NCCL_NTHREADS=256" and env["SGLANG_EAGLE_NCCL_ROOT_PID"] == "4242"
    assert env["SGLANG_EAGLE_NCCL_NODE_RANK"] == str(node_rank)
    decoded = decode_handoff(env["SGLANG_EAGLE_NCCL_PROFILE"], env)
    assert decoded.run_dir == "/srv/audit/launch" and decoded.inputs == current_inputs(env)
    with pytest.raises(ValueError, match="non-NCCL"):
        child_environment(
            profile,
            run_dir=None,
            node_rank=None,
            environ={},
            root_pid=None,
            standalone=True,
            nccl_values={"LD_PRELOAD": "x"},
        )
