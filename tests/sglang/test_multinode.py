"""Two launchers as two nodes over loopback (preflight --nnodes 2): the consistency guard spans
nodes through the world group; node-local variables may differ per node, must-match ones not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.rank_runner import free_port

EXE = str(Path(sys.executable).parent / "sglang-eagle-nccl")


def _two_nodes(plugin_env, tmp_path, node_args: dict[int, list[str]], profile: str):
    port = free_port()
    procs = {}
    for node in (0, 1):
        cmd = [
            EXE,
            "preflight",
            "--tp",
            "2",
            "--nnodes",
            "2",
            "--node-rank",
            str(node),
            "--dist-init-addr",
            f"127.0.0.1:{port}",
            "--profile",
            profile,
            "--audit-dir",
            str(tmp_path / f"node{node}"),
            "--timeout",
            "240",
            "--json",
            *node_args.get(node, []),
        ]
        env = dict(plugin_env, SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT="30")
        procs[node] = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
    out = {}
    for node, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        out[node] = (p.returncode, json.loads(stdout) if stdout.strip().startswith("{") else None, stderr)
    return out


def test_node_local_variables_may_differ_between_nodes(plugin_env, tmp_path):
    prof = tmp_path / "nodes.toml"
    prof.write_text(
        'extends = "pcie-8gpu"\n[nodes.0.env]\nNCCL_SOCKET_IFNAME = "lo"\n[nodes.1.env]\nNCCL_SOCKET_IFNAME = "eth0"\n'
    )
    out = _two_nodes(plugin_env, tmp_path, {}, str(prof))
    for node in (0, 1):
        code, data, err = out[node]
        assert code == 0, err[-3000:]
        assert data["ok"] and data["audit"]["verdict"] == "ok", data["audit"]["problems"]
        assert {"world", "tp"} <= {c["group"] for c in data["audit"]["communicators"]}
    # each node's ranks really ran with their own node-local value
    from sglang_eagle_nccl.offline.audit.read import read_launch

    for node, iface in ((0, "lo"), (1, "eth0")):
        run = Path(out[node][1]["run_dir"])
        _, procs = read_launch(run)
        envs = [r["env"] for p in procs for r in p.events("group_created")]
        assert envs and all(e["NCCL_SOCKET_IFNAME"] == iface for e in envs)


def test_must_match_variable_differing_between_nodes_fails_on_both(plugin_env, tmp_path):
    out = _two_nodes(plugin_env, tmp_path, {1: ["--nccl-env", "NCCL_ALGO=Tree"]}, "pcie-8gpu")
    for node in (0, 1):
        code, data, err = out[node]
        assert code == 1, err[-3000:]
        (rank,) = data["ranks"]
        assert rank["status"] == "error"
        assert (
            "NCCL_ALGO differs" in rank["message"]
            and "'Ring'" in rank["message"]
            and "'Tree'" in rank["message"]
        )
        assert data["audit"]["verdict"] == "fail"
