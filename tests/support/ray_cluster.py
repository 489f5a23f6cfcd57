"""A Ray cluster of logical nodes on one machine, started with Ray's own tooling, for the tests/ray tier.

Ray's ``ray.cluster_utils.Cluster`` runs in a helper process (``python -m support.ray_cluster``) whose
environment holds no plugin and no NCCL variable, as a real cluster's nodes would: every raylet it
starts inherits that environment, and so does every worker the raylet starts (plus the job's and
the actor's ``runtime_env``). A node "with another image" is added with variables of its own (the
helper sets them only while that raylet starts). Each node has one CPU, one logical GPU (Ray sets
``CUDA_VISIBLE_DEVICES`` in the actor; nothing checks a GPU exists) and a custom resource naming it,
so a placement group can pick nodes.

The test process talks to the helper over its stdin/stdout (one JSON line each way): ``add``,
``remove``, ``nodes``, ``quit``. Everything the helper started dies with it (``Cluster.shutdown``,
and Ray's reaper if the helper is killed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PLUGIN_PREFIXES = ("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")
# Ray's own start-up reads these; a test machine's shell must not steer the cluster.
RAY_PREFIXES = ("RAY_",)


def clean_environ(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) without plugin, NCCL or Ray variables."""
    env = dict(os.environ if base is None else base)
    return {k: v for k, v in env.items() if not k.startswith(PLUGIN_PREFIXES + RAY_PREFIXES)}


class RayCluster:
    """Handle on the helper process (see the module docstring)."""

    def __init__(self, temp_dir: Path, python: str | None = None, timeout: float = 120.0) -> None:
        self.temp_dir = temp_dir
        env = clean_environ()
        env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)  # tests/ (support.*)
        # Ray's files (sessions, sockets, its "current cluster" address file) in a directory of this
        # test run, not in the machine-wide /tmp/ray another user's Ray may share.
        (temp_dir / "ray").mkdir(
            parents=True, exist_ok=True
        )  # Ray's default <RAY_TMPDIR>/ray, which it expects
        env["RAY_TMPDIR"] = str(temp_dir)
        self.proc = subprocess.Popen(
            [python or sys.executable, "-m", "support.ray_cluster", str(temp_dir / "ray")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            stderr=open(temp_dir.parent / "ray-cluster.log", "a"),  # noqa: SIM115 - lives as long as the helper
        )
        self.timeout = timeout
        hello = self._read()
        self.address: str = hello["address"]
        self.nodes: dict[str, str] = hello["nodes"]  # name -> Ray node id

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(
                f"the Ray cluster helper exited (code {self.proc.poll()}); see ray-cluster.log"
            )
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"Ray cluster helper: {answer['error']}")
        return answer

    def _ask(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def add(self, name: str, env: dict[str, str] | None = None, gpus: int = 1) -> str:
        """Add node ``name`` (``gpus`` logical GPUs) whose raylet starts with ``env`` on top of the clean
        environment."""
        node_id = self._ask(cmd="add", name=name, env=env or {}, gpus=gpus)["node_id"]
        self.nodes[name] = node_id
        return node_id

    def remove(self, name: str) -> None:
        self._ask(cmd="remove", name=name)
        self.nodes.pop(name, None)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._ask(cmd="quit")
            except (RuntimeError, OSError, ValueError):
                pass
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


# --- the helper process -------------------------------------------------------------------------


def _node_args(name: str, temp_dir: str, gpus: int = 1) -> dict[str, Any]:
    return {
        "num_cpus": 1,
        "num_gpus": gpus,
        "resources": {f"node_{name}": 1},
        "temp_dir": temp_dir,
        "object_store_memory": 100 * 1024 * 1024,
    }


def _serve(temp_dir: str) -> None:
    from ray.cluster_utils import Cluster

    started = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args=_node_args("head", temp_dir))
    nodes = {"head": cluster.head_node}
    nodes["worker"] = cluster.add_node(**_node_args("worker", temp_dir))

    def ids() -> dict[str, str]:
        return {name: node.node_id for name, node in nodes.items()}

    print(
        json.dumps({"address": cluster.address, "nodes": ids(), "started_s": time.monotonic() - started}),
        flush=True,
    )
    try:
        while True:
            line = sys.stdin.readline()
            if not line:
                break
            command = json.loads(line)
            try:
                if command["cmd"] == "add":
                    saved = {k: os.environ.get(k) for k in command["env"]}
                    os.environ.update(command["env"])  # the new raylet (and its workers) inherit it
                    try:
                        nodes[command["name"]] = cluster.add_node(
                            **_node_args(command["name"], temp_dir, command.get("gpus", 1))
                        )
                    finally:
                        for k, v in saved.items():
                            if v is None:
                                os.environ.pop(k, None)
                            else:
                                os.environ[k] = v
                    answer: dict[str, Any] = {"node_id": nodes[command["name"]].node_id}
                elif command["cmd"] == "remove":
                    cluster.remove_node(nodes.pop(command["name"]))
                    answer = {"removed": command["name"]}
                elif command["cmd"] == "nodes":
                    answer = {"nodes": ids()}
                elif command["cmd"] == "quit":
                    break
                else:
                    answer = {"error": f"unknown command {command['cmd']!r}"}
            except Exception as exc:  # noqa: BLE001 - reported to the test, the helper keeps serving
                answer = {"error": repr(exc)}
            print(json.dumps(answer), flush=True)
    finally:
        cluster.shutdown()
        print(json.dumps({"bye": True}), flush=True)


if __name__ == "__main__":
    _serve(sys.argv[1])
