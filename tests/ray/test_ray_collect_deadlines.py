"""`audit --ray` against real Ray never waits forever and reads only the launch's own cluster (issue 24 item 4;
offline/ray_collect.py's docstring states the rules, tests/unit/offline/test_ray_collect_decisions.py tests the
decisions with fakes).

Real here: Ray's own ``ray.init`` against an address where nothing listens and against a port that accepts and
never answers (a hung head node: ``ray.init`` has no connect timeout of its own), each through the CLI in a
process of its own that must exit 2 within the deadline; and ``--ray auto`` against the session's two-node
cluster, with a launch directory that records that cluster and one that records none.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.audit_records import proc_file, rec, write_lines

REPO = Path(__file__).resolve().parents[2]
ENV = {"NCCL_PROTO": "LL"}
# A fresh interpreter importing Ray on a loaded 2-core machine: what the deadline does not cover.
START_SLACK_S = 25


def _audit(*args: str, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "sglang_eagle_nccl", "audit", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)
    return done, time.monotonic() - started


def _launch(tmp_path: Path, cluster: str | None) -> Path:
    run = tmp_path / "launch"
    run.mkdir(mode=0o700, parents=True)
    (run / "launch.json").write_text(json.dumps({"profile": {"name": "p", "env": ENV}}))
    lines = [rec("process_start", 100, expected_env=ENV, env=ENV, profile="p"),
             rec("process_role", 100, title="sglang::scheduler_TP0"),
             rec("group_created", 100, group="tp", ranks=[0, 1], env=ENV, torch_comm="lazy-nccl", group_overrides={})]
    if cluster is not None:
        lines.append(rec("ray_actor_env", 100, actor_role="scheduler", env=ENV, ray_cluster=cluster))
    write_lines(run / proc_file(100), lines)
    return run


def test_an_address_where_nothing_listens_is_exit_2_within_the_deadline(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    done, took = _audit("--ray", address, "--ray-timeout", "5", str(_launch(tmp_path, None)), timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert address in done.stderr + done.stdout and "within 5s (--ray-timeout)" in done.stderr + done.stdout
    assert took < 5 + START_SLACK_S


def test_a_head_that_accepts_and_never_answers_is_given_up_at_the_deadline(tmp_path):
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        address = f"127.0.0.1:{hung.getsockname()[1]}"
        done, took = _audit("--ray", address, "--ray-timeout", "6", str(_launch(tmp_path, None)), timeout=180)
    out = done.stderr + done.stdout
    assert done.returncode == 2, out
    assert address in out and "6s (--ray-timeout)" in out
    assert 6 <= took < 6 + START_SLACK_S  # Ray's own connection attempt was abandoned, and the process exited


def _gcs_address(address: str) -> str:
    """The cluster's own name for itself (what the driver's record holds), from a fresh driver."""
    code = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False);"
            "print(ray.get_runtime_context().gcs_address)")
    return subprocess.run([sys.executable, "-c", code, address], capture_output=True, text=True, check=True,
                          timeout=180).stdout.strip().splitlines()[-1]


def test_auto_reads_the_cluster_the_launch_recorded_and_refuses_without_one(cluster, tmp_path):
    gcs = _gcs_address(cluster.address)
    run = _launch(tmp_path / "recorded", gcs)
    done, _ = _audit("--ray", "auto", "--ray-timeout", "60", str(run), "--json", timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["collected"]["cluster"] == gcs and f"the Ray cluster at {gcs} " in data["collected"]["summary"]
    assert sorted(n["node_id"] for n in data["collected"]["nodes"]) == sorted(cluster.nodes.values())

    done, _ = _audit("--ray", "auto", str(_launch(tmp_path / "none", None)), timeout=120)
    assert done.returncode == 2 and "records name none" in done.stderr + done.stdout


@pytest.fixture(autouse=True)
def _no_ray_address(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
