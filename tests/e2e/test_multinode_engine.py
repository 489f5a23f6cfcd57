"""A real two-launcher SGLang start on one machine: two `python -m sglang.launch_server` processes
as two nodes over loopback (--nnodes 2, TP=2, one scheduler each), with the launch flags."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.read import read_launch
from support import sglang_cpu_run as run


def _launchers(models, e2e_env, tmp_path, node_args: dict[int, list[str]], profile: str):
    target, _ = models
    dist_port, http_port = run.free_port(), run.free_port()
    procs, logs = {}, {}
    for node in (0, 1):
        cmd = run.server_cmd(target, port=http_port + node, tp_size=2)
        cmd += [
            "--nnodes",
            "2",
            "--node-rank",
            str(node),
            "--dist-init-addr",
            f"127.0.0.1:{dist_port}",
            "--nccl-profile",
            profile,
            "--nccl-audit-dir",
            str(tmp_path / f"audit{node}"),
            *node_args.get(node, []),
        ]
        # One binding entry per TP rank of the whole launch (SGLang <= 0.5.4 checks it against tp_size).
        env = dict(
            e2e_env,
            SGLANG_CPU_OMP_THREADS_BIND=run.omp_threads_bind(2),
            SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT="60",
        )
        if tuple(int(x) for x in run.installed_sglang_version().split(".")[:3] if x.isdigit()) < (0, 5, 11):
            env["SGLANG_EAGLE_NCCL"] = "1"  # no plugin loader before 0.5.11: the flags need the gate
        logs[node] = tmp_path / f"node{node}.log"
        with open(logs[node], "w") as out:
            procs[node] = subprocess.Popen(
                cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
    return procs, logs, http_port


def _stop(procs) -> None:
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    for p in procs.values():
        try:
            p.wait(max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs.values():
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


def test_two_launchers_node_local_values_pass(models, e2e_env, tmp_path):
    prof = tmp_path / "nodes.toml"
    prof.write_text(
        'extends = "pcie-8gpu"\n[nodes.0.env]\nNCCL_SOCKET_IFNAME = "lo"\n[nodes.1.env]\nNCCL_SOCKET_IFNAME = "eth0"\n'
    )
    procs, logs, port = _launchers(models, e2e_env, tmp_path, {}, str(prof))
    try:
        run.wait_http_ready(port, 300, proc=procs[0])
        answer = run.generate_http(port, [1, 17, 33, 71], max_new_tokens=4, timeout=180)
        assert len(answer["output_ids"]) == 4
    except BaseException:
        _stop(procs)
        raise AssertionError(logs[0].read_text()[-3000:] + logs[1].read_text()[-3000:]) from None
    _stop(procs)
    for node, iface in ((0, "lo"), (1, "eth0")):
        report = load_report(tmp_path / f"audit{node}")
        assert report.verdict == "ok", report.problems
        schedulers = [p for p in report.processes if p.role.startswith("scheduler")]
        assert len(schedulers) == 1  # one rank per node
        _, procs_records = read_launch(report.run_dir)
        envs = [r["env"] for p in procs_records for r in p.events("group_created")]
        assert envs and all(e["NCCL_SOCKET_IFNAME"] == iface and e["NCCL_PROTO"] == "LL" for e in envs)
        assert {c.group for c in report.communicators} >= {"world", "tp"}


@pytest.mark.newest_only
def test_two_launchers_must_match_difference_stops_both(models, e2e_env, tmp_path):
    procs, logs, _ = _launchers(models, e2e_env, tmp_path, {1: ["--nccl-env", "NCCL_ALGO=Tree"]}, "pcie-8gpu")
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and any(p.poll() is None for p in procs.values()):
            time.sleep(1)
        assert all(p.poll() is not None for p in procs.values()), (
            "launchers still running: the mismatch did not stop them"
        )
        assert all(p.returncode != 0 for p in procs.values())
    finally:
        _stop(procs)
    for node in (0, 1):
        text = logs[node].read_text()
        assert "NCCL settings differ between ranks of SGLang group 'world'" in text, text[-3000:]
        assert "NCCL_ALGO differs" in text and "'Ring'" in text and "'Tree'" in text
        report = load_report(tmp_path / f"audit{node}")
        assert report.verdict == "fail"
