"""SGLang 0.5.23 on a real two-node Ray cluster (CPU, TP = 2: one scheduler actor per node), the plugin
enabled in each way a user enables it. From inside each actor, a probe independent of the plugin reads the
NCCL values at every process-group creation; the audit judges every actor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sglang_eagle_nccl.offline.audit.judge import Report, load_report
from sglang_eagle_nccl.offline.audit.read import read_launch
from sglang_eagle_nccl.profile.resolve import resolve
from support import sglang_cpu_run as run
from support.ray_job import driver_env, job_env_vars, probe_records

PYTHON = sys.executable
BIN = Path(sys.executable).parent
DRIVER = Path(__file__).resolve().parents[1] / "probes" / "ray_engine_driver.py"
START_TIMEOUT = 420
PROMPT = [1, 17, 33, 71]

# Node-local values per node, a per-group value, everything else from the seed profile.
CLUSTER_PROFILE = """\
extends = "pcie-8gpu"
[groups.tp.env]
NCCL_PROTO = "Simple"
[nodes.0.env]
NCCL_SOCKET_IFNAME = "lo"
[nodes.1.env]
NCCL_SOCKET_IFNAME = "eth0"
"""


@pytest.fixture
def profile(tmp_path) -> tuple[Path, dict]:
    path = tmp_path / "cluster.toml"
    path.write_text(CLUSTER_PROFILE)
    return path, resolve([str(path)], use_environ=False).profile.to_dict()


def _engine_args(models, algorithm: str) -> dict:
    return run.engine_kwargs(
        models["target"], tp_size=2, nnodes=2, draft_path=models[algorithm], speculative_algorithm=algorithm
    )


def check_actors(probe_dir: Path, cluster, data: dict) -> dict[int, str]:
    """From the probe alone: two scheduler actors on two Ray nodes of the cluster, and at every group
    creation each held the profile, its node's values (SGLang's node n holds rank n at TP 2 over 2 nodes) and
    the group's own values. Returns rank -> Ray node."""
    by_pid = probe_records(probe_dir)
    ranks: dict[int, str] = {}
    for pid, records in by_pid.items():
        init = [r for r in records if r["event"] == "init_process_group"]
        assert len(init) == 1, (pid, records)
        rank, node = init[0]["rank"], init[0]["ray_node"]
        ranks[rank] = node
        groups = [r for r in records if r["event"] == "new_group"]
        assert {r["group"] for r in groups} >= {"world", "tp"}, groups
        for record in init + groups:
            expected = {
                **data["env"],
                **data["nodes"][str(rank)],
                **data["groups"].get(record.get("group") or "", {}),
            }
            held = {k: record["nccl"].get(k) for k in expected}
            assert held == expected, (rank, record.get("group"), held)
    assert sorted(ranks) == [0, 1], ranks
    assert len(set(ranks.values())) == 2 and set(ranks.values()) <= set(cluster.nodes.values()), ranks
    return ranks


def check_audit(root: Path, *, eagle: bool) -> Report:
    """The audit of the launch: every actor judged, the exact verdict a CPU run gets (✓, nothing to check in
    NCCL itself: gloo groups and a PyNccl without its library are '–')."""
    report = load_report(root)
    assert report.verdict == "ok", report.problems
    assert report.unreadable == []
    schedulers = [p for p in report.processes if p.role.startswith("scheduler")]
    assert len(schedulers) == 2 and all(p.verdict == "ok" for p in schedulers), [
        (p.role, p.notes) for p in schedulers
    ]
    assert {c.verdict for c in report.communicators} == {"absent"}
    if eagle:
        assert {e["pid"] for e in report.eagle} == {p.pid for p in schedulers}
    _, procs = read_launch(report.run_dir)
    actors = [r for p in procs for r in p.events("ray_actor_env")]
    assert sorted(r["node_rank"] for r in actors) == [0, 1] and len({r["ray_node"] for r in actors}) == 2
    return report


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait(30)


def _drive(config: dict, env: dict, tmp_path: Path, timeout: float = START_TIMEOUT) -> dict:
    path = tmp_path / "driver.json"
    path.write_text(json.dumps(config))
    proc = subprocess.run(
        [PYTHON, str(DRIVER), str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )
    (tmp_path / "driver.log").write_text(proc.stdout + proc.stderr)
    results = [line[len("RESULT ") :] for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and results, proc.stderr[-4000:]
    return json.loads(results[-1])


def _serve(cmd: list[str], env: dict, port: int, log: Path) -> dict:
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            run.wait_http_ready(port, START_TIMEOUT, proc=proc)
            return run.generate_http(port, PROMPT, max_new_tokens=4, timeout=180)
        except BaseException:
            raise AssertionError(log.read_text()[-6000:]) from None
        finally:
            _stop(proc)


def _job_config(job_env: dict) -> str:
    """What `ray job submit --runtime-env-json` gives a job's entry point (Ray's job supervisor)."""
    return json.dumps({"runtime_env": {"env_vars": job_env}})


def test_ray_engine_enabled_in_the_driver_eagle3(cluster, models, profile, tmp_path):
    """`SGLANG_EAGLE_NCCL=<profile>` in the driver; the driver builds RayEngine; EAGLE-3. The user's runtime env
    stays (a profile variable in it loses to the profile, reported), SGLang's own writes in the driver reach the
    actors, the driver's node-local values do not."""
    path, data = profile
    probe = tmp_path / "probe"
    job = {**job_env_vars(probe), "NCCL_PROTO": "Simple", "NCCL_DEBUG": "WARN"}
    config = {
        "address": cluster.address,
        "job_env_vars": job,
        "engine": _engine_args(models, "EAGLE3"),
        "prompt": PROMPT,
    }
    env = driver_env(
        SGLANG_EAGLE_NCCL=str(path),
        SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "audit"),
        NCCL_IB_HCA="mlx5_driver_node",
    )
    out = _drive(config, env, tmp_path)
    assert "error" not in out, out.get("traceback")
    assert len(out["output_ids"]) == 4
    check_actors(probe, cluster, data)
    held = [r["nccl"] for recs in probe_records(probe).values() for r in recs]
    assert all(n["NCCL_DEBUG"] == "WARN" for n in held)  # the user's own value
    assert all("NCCL_IB_HCA" not in n for n in held)  # a node-local value of the driver's node stays there
    # SGLang's _set_envs_and_config writes in the driver (not in the profile) reach every actor.
    assert all(n.get("NCCL_CUMEM_ENABLE") == "0" and n.get("NCCL_NVLS_ENABLE") == "0" for n in held)
    report = check_audit(tmp_path / "audit", eagle=True)
    assert {(w["name"], w["after"]) for w in report.sglang_writes} >= {
        ("NCCL_CUMEM_ENABLE", "0"),
        ("NCCL_NVLS_ENABLE", "0"),
    }
    _, procs = read_launch(report.run_dir)
    replaced = [v for p in procs for r in p.events("ray_actor_env") for v in r["replaced_user_values"]]
    assert replaced == [{"name": "NCCL_PROTO", "user_value": "Simple", "value": "LL"}] * 2
    assert "the runtime_env's NCCL_PROTO='Simple' replaced by 'LL'" in (tmp_path / "driver.log").read_text()
    check_gathered_through_ray(cluster, report)


def check_gathered_through_ray(cluster, local: Report) -> None:
    """`audit --ray ADDRESS DIR`: one task per Ray node reads that node's launch directory; the verdict is
    judged only from what came back through Ray (copies in a directory of the driver's own), and matches."""
    done = subprocess.run(
        [str(BIN / "sglang-eagle-nccl"), "audit", "--ray", cluster.address, local.run_dir, "--json"],
        capture_output=True,
        text=True,
        env=driver_env(),
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(done.stdout)
    nodes = data["collected"]["nodes"]
    assert sorted(n["node_id"] for n in nodes) == sorted(
        cluster.nodes.values()
    )  # every node answered for itself
    assert all(n["files"] > 0 and not n["problems"] for n in nodes), nodes
    assert (
        all(d.startswith(data["collected"]["dest"]) for d in data["run_dirs"])
        and local.run_dir not in data["run_dirs"]
    )
    assert data["verdict"] == local.verdict
    assert sorted(p["process"] for p in data["processes"]) == sorted(p.process for p in local.processes)
    print(f"\n[tests/ray] {data['collected']['summary']}")
    # The driver recorded the cluster its actors went to: `--ray auto` reads that one, and says so (issue 24.4).
    _, procs = read_launch(local.run_dir)
    recorded = {r.get("ray_cluster") for p in procs for r in p.events("ray_actor_env")}
    assert len(recorded) == 1 and None not in recorded, recorded
    auto = subprocess.run([str(BIN / "sglang-eagle-nccl"), "audit", "--ray", "auto", local.run_dir, "--json"],
                          capture_output=True, text=True, env=driver_env(), timeout=180)
    assert auto.returncode == 0, auto.stdout[-3000:] + auto.stderr[-3000:]
    assert json.loads(auto.stdout)["collected"]["cluster"] == recorded.pop()


def test_offline_benchmark_on_ray_engine_actor_is_the_launcher(cluster, models, tmp_path):
    """SGLang's offline benchmark on Ray (`_create_ray_engine_backend`): RayEngine runs in an engine actor on a
    one-node placement group; the plugin in the benchmark's process enables that actor as the launch's root,
    and the plugin there gives both scheduler actors the profile."""
    cluster.add("wide", gpus=2)  # the benchmark packs every GPU of the engine on one node
    try:
        probe = tmp_path / "probe"
        config = {
            "address": cluster.address,
            "job_env_vars": job_env_vars(probe),
            "backend": "offline_throughput",
            "engine": run.engine_kwargs(models["target"], tp_size=2),
            "prompt": PROMPT,
        }
        out = _drive(
            config,
            driver_env(SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "audit")),
            tmp_path,
        )
    finally:
        cluster.remove("wide")
    assert "error" not in out, out.get("traceback")
    assert len(out["output_ids"]) == 4
    seed = resolve(["pcie-8gpu"], use_environ=False).profile.to_dict()
    inits = [r for recs in probe_records(probe).values() for r in recs if r["event"] == "init_process_group"]
    assert sorted(r["rank"] for r in inits) == [0, 1]
    assert all({k: r["nccl"].get(k) for k in seed["env"]} == seed["env"] for r in inits)
    report = load_report(tmp_path / "audit")
    assert report.verdict == "ok", report.problems
    schedulers = [p for p in report.processes if p.role.startswith("scheduler")]
    launcher = [p for p in report.processes if p.role == "launcher"]
    assert len(schedulers) == 2 and len(launcher) == 1
    _, procs = read_launch(report.run_dir)
    actors = [r for p in procs for r in p.events("ray_actor_env")]
    assert sorted(r["node_rank"] for r in actors) == [0, 0]  # one node


def test_launch_server_use_ray_with_launch_flags_eagle(cluster, models, profile, tmp_path):
    """`python -m sglang.launch_server --use-ray ... --nccl-profile P`, run as a Ray job; EAGLE."""
    path, data = profile
    probe = tmp_path / "probe"
    port = run.free_port()
    cmd = run.server_cmd(
        models["target"],
        port=port,
        python=PYTHON,
        tp_size=2,
        nnodes=2,
        use_ray=True,
        draft_path=models["EAGLE"],
        speculative_algorithm="EAGLE",
    )
    cmd += ["--nccl-profile", str(path), "--nccl-audit-dir", str(tmp_path / "audit")]
    env = driver_env(
        RAY_ADDRESS=cluster.address, RAY_JOB_CONFIG_JSON_ENV_VAR=_job_config(job_env_vars(probe))
    )
    answer = _serve(cmd, env, port, tmp_path / "server.log")
    assert len(answer["output_ids"]) == 4
    check_actors(probe, cluster, data)
    check_audit(tmp_path / "audit", eagle=True)


def test_wrapper_use_ray_eagle3(cluster, models, profile, tmp_path):
    """`sglang-eagle-nccl launch --profile P -- --use-ray ...`, run as a Ray job; EAGLE-3; the wrapper's verdict."""
    path, data = profile
    probe = tmp_path / "probe"
    port = run.free_port()
    server = run.server_cmd(
        models["target"],
        port=port,
        python=PYTHON,
        tp_size=2,
        nnodes=2,
        use_ray=True,
        draft_path=models["EAGLE3"],
        speculative_algorithm="EAGLE3",
    )
    cmd = [
        str(BIN / "sglang-eagle-nccl"),
        "launch",
        "--profile",
        str(path),
        "--audit-dir",
        str(tmp_path / "audit"),
        "--",
        *server[3:],
    ]
    env = driver_env(
        RAY_ADDRESS=cluster.address, RAY_JOB_CONFIG_JSON_ENV_VAR=_job_config(job_env_vars(probe))
    )
    answer = _serve(cmd, env, port, tmp_path / "server.log")
    assert len(answer["output_ids"]) == 4
    check_actors(probe, cluster, data)
    check_audit(tmp_path / "audit", eagle=True)
    assert "[sglang-eagle-nccl] audit" in (tmp_path / "server.log").read_text()


def test_readme_recipe_engine_in_own_placement_group(cluster, models, tmp_path):
    """The README's recipe, run as written: an engine actor on the user's placement group, enabled through
    `sglang-eagle-nccl env`; the plugin in it gives both scheduler actors the profile. EAGLE."""
    from support.readme import code_block

    lang, script = code_block(
        "tests/ray/test_ray_engine.py::test_readme_recipe_engine_in_own_placement_group"
    )
    assert lang == "python"
    (tmp_path / "ray_engine.py").write_text(script)
    probe = tmp_path / "probe"
    (tmp_path / "engine.json").write_text(json.dumps(_engine_args(models, "EAGLE")))
    (tmp_path / "my_env.json").write_text(json.dumps(job_env_vars(probe)))
    env = driver_env(
        RAY_ADDRESS=cluster.address,
        SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "audit"),
        PATH=f"{BIN}:{os.environ.get('PATH', '')}",
    )
    proc = subprocess.run(
        [PYTHON, "ray_engine.py", "pcie-8gpu", "engine.json", "my_env.json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("output_ids")]
    assert len(json.loads(line.split(" ", 1)[1])) == 8
    seed = resolve(["pcie-8gpu"], use_environ=False).profile.to_dict()
    check_actors(probe, cluster, {**seed, "nodes": {"0": {}, "1": {}}})
    report = check_audit(tmp_path / "audit", eagle=True)
    launcher = [p for p in report.processes if p.role == "launcher"]
    assert len(launcher) == 1  # the engine actor: the root of the launch (the driver script never enabled it)


def test_node_with_another_image_stops_both_actors(cluster, models, tmp_path):
    """A node whose raylet environment holds NCCL_ALGO=Tree (the profile does not set NCCL_ALGO): both actors
    stop at their first group with the consistency error naming the nodes; never a hang."""
    tree = cluster.add("tree", {"NCCL_ALGO": "Tree"})
    try:
        probe = tmp_path / "probe"
        config = {
            "address": cluster.address,
            "job_env_vars": job_env_vars(probe),
            "engine": run.engine_kwargs(models["target"], tp_size=2, nnodes=2),
            # Rank 0 on the head node, rank 1 on the node with the other image.
            "bundles": [{"CPU": 1, "GPU": 1, "node_head": 0.01}, {"CPU": 1, "GPU": 1, "node_tree": 0.01}],
        }
        env = driver_env(
            SGLANG_EAGLE_NCCL="pcie-8gpu-eagle",
            SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "audit"),
            SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT="60",
        )
        started = time.monotonic()
        out = _drive(config, env, tmp_path, timeout=300)
        elapsed = time.monotonic() - started
    finally:
        cluster.remove("tree")
    error = out.get("error", "")
    assert "Scheduler actor failed to initialize" in error, out
    assert "NCCL settings differ between ranks of SGLang group 'world' (ranks 0, 1 on nodes 0, 1)" in error, (
        error
    )
    assert "NCCL_ALGO differs (rank 0 (node 0): (unset); rank 1 (node 1): 'Tree')" in error, error
    assert elapsed < 240
    # The probe saw where each rank ran and what it held: NCCL_ALGO from the node's own environment.
    inits = {
        r["rank"]: r
        for recs in probe_records(probe).values()
        for r in recs
        if r["event"] == "init_process_group"
    }
    assert inits[0]["ray_node"] == cluster.nodes["head"] and inits[1]["ray_node"] == tree
    assert "NCCL_ALGO" not in inits[0]["nccl"] and inits[1]["nccl"]["NCCL_ALGO"] == "Tree"
    # Both actors stopped there, each with the mismatch on record.
    _, procs = read_launch(load_report(tmp_path / "audit").run_dir)
    stopped = {p.pid for p in procs if p.events("consistency_mismatch")}
    assert stopped == {r["pid"] for r in inits.values()}, [(p.pid, p.role) for p in procs]


def test_driver_refuses_before_starting_anything(cluster, models, tmp_path):
    """A job runtime env that would give every actor a plugin input the driver's profile was not resolved from:
    RayEngine raises, SGLang's CLI exits 2, and no scheduler actor ever starts."""
    probe = tmp_path / "probe"
    job = {**job_env_vars(probe), "SGLANG_EAGLE_NCCL_ENV": "NCCL_ALGO=Tree"}
    config = {
        "address": cluster.address,
        "job_env_vars": job,
        "engine": run.engine_kwargs(models["target"], tp_size=2, nnodes=2),
    }
    out = _drive(
        config,
        driver_env(SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "audit")),
        tmp_path,
    )
    assert (
        "RayEnvError" in out.get("error", "") and "SGLANG_EAGLE_NCCL_ENV='NCCL_ALGO=Tree'" in out["error"]
    ), out
    assert "Nothing was started" in out["error"]
    port = run.free_port()
    cmd = run.server_cmd(models["target"], port=port, python=PYTHON, tp_size=2, nnodes=2, use_ray=True)
    cmd += ["--nccl-profile", "pcie-8gpu", "--nccl-audit-dir", str(tmp_path / "audit-cli")]
    env = driver_env(RAY_ADDRESS=cluster.address, RAY_JOB_CONFIG_JSON_ENV_VAR=_job_config(job))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=START_TIMEOUT)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "SGLANG_EAGLE_NCCL_ENV='NCCL_ALGO=Tree'" in proc.stderr and "Traceback" not in proc.stderr[-2000:]
    assert not list(probe.glob("probe-*.jsonl"))  # no scheduler process ever created a group
    for root in (tmp_path / "audit", tmp_path / "audit-cli"):
        report = load_report(root)
        assert report.verdict == "fail" and not [
            p for p in report.processes if p.role.startswith("scheduler")
        ]
