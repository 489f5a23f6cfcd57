"""A launch over several hosts (or containers): processes are told apart by their whole identity.

Pids repeat across hosts and containers, host names repeat across containers and cloned machines. Two
processes that share a pid -- in one shared audit directory, or in directories collected per node --
are two processes, each judged on its own; a ✗ on one is never hidden by a ✓ on the other. Tested
with synthetic records (exact identities) and, as root, with real Linux PID and UTS namespaces: two
"hosts" on one machine whose processes have the same pid and the same host name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.render import format_text
from support.audit_records import rec, write_lines

ENV = {"NCCL_PROTO": "LL"}
META = {"profile": {"name": "p", "env": ENV}}
NODE_A = {"host": "node", "pidns": "4026531111"}
NODE_B = {"host": "node", "pidns": "4026532222"}


def scheduler(pid: int, machine: dict, env: dict) -> list[dict]:
    m = {"pid": pid, "machine": machine}
    return [
        rec("process_start", **m, expected_env=ENV, env=env, profile="p"),
        rec("process_role", **m, title="sglang::scheduler_TP0"),
        rec("scheduler_start", **m, ranks={}, env=env),
        rec(
            "group_created",
            **m,
            group="tp",
            unique_name="tp:0",
            ranks=[0, 1],
            env=env,
            torch_comm="lazy-nccl",
        ),
    ]


def test_two_containers_with_the_same_pid_in_one_directory_are_two_processes(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "launch.json").write_text(json.dumps(META))
    # Both wrote proc-node-1.jsonl before file names carried the identity: one file, two processes.
    write_lines(
        run / "proc-node-1.jsonl", scheduler(1, NODE_A, ENV) + scheduler(1, NODE_B, {"NCCL_PROTO": "Simple"})
    )
    report = load_report(run)
    assert len(report.processes) == 2 and {p.pid for p in report.processes} == {1}
    assert sorted(p.verdict for p in report.processes) == ["fail", "ok"]
    assert report.verdict == "fail" and report.exit_code == 1
    text = format_text(report)
    assert "host node (boot 01234567, pid namespace 4026531111)" in text
    assert "host node (boot 01234567, pid namespace 4026532222)" in text
    assert "NCCL_PROTO=Simple (profile: LL)" in text


def test_directories_collected_per_node_are_judged_as_one_launch(tmp_path):
    paths = []
    for name, machine, env in (
        ("n0", {"host": "gpu-0", "boot_id": "a" * 32}, ENV),
        ("n1", {"host": "gpu-1", "boot_id": "b" * 32}, {"NCCL_PROTO": "Simple"}),
    ):
        run = tmp_path / name
        run.mkdir()
        (run / "launch.json").write_text(json.dumps(META))
        write_lines(run / "proc-x-7.jsonl", scheduler(7, machine, env))
        paths.append(str(run))
    alone = load_report(paths[0])
    assert alone.verdict == "ok"
    both = load_report(paths)
    assert both.verdict == "fail" and [p.host for p in both.processes if p.verdict == "fail"] == ["gpu-1"]
    result = CliRunner().invoke(main, ["audit", *paths, "--json"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert [h["host"] for h in data["hosts"]] == ["gpu-0", "gpu-1"] and data["run_dirs"] == paths


def test_the_same_directory_twice_counts_each_record_once(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "launch.json").write_text(json.dumps(META))
    write_lines(run / "proc-a.jsonl", scheduler(5, NODE_A, ENV))
    once, twice = load_report(run), load_report([run, run])
    assert len(twice.communicators) == len(once.communicators) == 1 and twice.verdict == once.verdict == "ok"


def test_launch_directories_of_different_profiles_are_not_one_launch(tmp_path):
    paths = []
    for name, env in (("a", ENV), ("b", {"NCCL_PROTO": "Simple"})):
        run = tmp_path / name
        run.mkdir()
        (run / "launch.json").write_text(json.dumps({"profile": {"name": "p", "env": env}}))
        write_lines(run / "proc-a.jsonl", scheduler(5, {**NODE_A, "host": name}, env))
        paths.append(run)
    report = load_report(paths)
    assert report.verdict == "fail" and any("different profiles" in p for p in report.problems)


# --- real namespaces ---------------------------------------------------------------------------

HOST_SCRIPT = textwrap.dedent("""
    import os, sys
    from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
    run, proto = sys.argv[1], sys.argv[2]
    assert os.getpid() == 1, os.getpid()
    env = {"NCCL_PROTO": proto}
    w = AuditWriter(run, role="scheduler")
    w.write("process_start", expected_env={"NCCL_PROTO": "LL"}, env=env, profile="p")
    w.write("process_role", title="sglang::scheduler_TP0")
    w.write("scheduler_start", ranks={}, env=env)
    w.write("group_created", group="tp", unique_name="tp:0", ranks=[0, 1], env=env, torch_comm="lazy-nccl")
    # Stay alive until the other "host" has written too: two live namespaces never share an inode (the
    # kernel may give a new namespace the inode of one that is gone).
    import time
    deadline = time.monotonic() + 60
    while len([n for n in os.listdir(run) if n.startswith("proc-")]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
""")


def _namespaces_usable() -> str | None:
    if os.getuid() != 0 or shutil.which("unshare") is None:
        return "unshare: PID/UTS namespaces need root and util-linux's unshare on this machine"
    probe = subprocess.run(
        ["unshare", "-p", "-f", "--mount-proc", "-u", "true"], capture_output=True, timeout=30
    )
    if probe.returncode != 0:
        return f"unshare: PID/UTS namespaces not permitted on this machine ({probe.stderr.decode().strip()})"
    return None


def test_two_hosts_with_colliding_pids_in_one_real_directory_cannot_hide_a_failure(tmp_path):
    why = _namespaces_usable()
    if why:
        pytest.skip(why)
    from sglang_eagle_nccl.contract.launch_dir import new_launch_dir

    run = new_launch_dir(tmp_path / "shared")
    (run / "launch.json").write_text(json.dumps(META))
    script = tmp_path / "host.py"
    script.write_text(HOST_SCRIPT)
    src = str(Path(__file__).resolve().parents[4])
    hosts = []
    for proto in ("LL", "Simple"):  # the second "host" ran without the profile's value
        cmd = f'hostname node && exec "{sys.executable}" "{script}" "{run}" {proto}'
        hosts.append(
            subprocess.Popen(
                ["unshare", "-p", "-f", "--mount-proc", "-u", "sh", "-c", cmd],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=dict(os.environ, PYTHONPATH=src),
            )
        )
    for host in hosts:
        _out, err = host.communicate(timeout=90)
        assert host.returncode == 0, err
    files = sorted(p.name for p in run.iterdir() if p.name.startswith("proc-"))
    assert len(files) == 2 and all(f.startswith("proc-node-") and f.endswith("-1.jsonl") for f in files), (
        files
    )
    report = load_report(run)
    assert [(p.host, p.pid) for p in report.processes] == [("node", 1), ("node", 1)]
    assert len({p.machine for p in report.processes}) == 2  # same host name and pid, two PID namespaces
    assert report.verdict == "fail"
    result = CliRunner().invoke(main, ["audit", str(run)])
    assert result.exit_code == 1 and "NCCL_PROTO=Simple (profile: LL)" in result.output, result.output
