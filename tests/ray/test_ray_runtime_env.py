"""The runtime_env decisions of decision/ray_env.py on the real cluster: what a real worker holds.

The plain tier proves them against references (tests/unit/inproc/hooks/test_ray_merge_generated.py); here
Ray itself merges the job's ``env_vars`` under the actor's and rewrites ``$`` references when it starts the
worker, so the references are checked against Ray: the user's values stay, the plugin's win, the values the
``$`` rule passes arrive unchanged and the ones it refuses are rewritten (``support.ray_reference``). Then a
driver whose audit directory holds a ``$`` is refused before any actor starts, with the reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from sglang_eagle_nccl.decision.ray_env import actor_runtime_env, ray_rewrites
from support import ray_reference
from support import sglang_cpu_run as run
from support.ray_job import driver_env, job_env_vars, probe_records

DRIVER = Path(__file__).resolve().parents[1] / "probes" / "ray_engine_driver.py"

WORKER_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import ray
    from sglang_eagle_nccl.decision.ray_env import actor_runtime_env

    config = json.load(open(sys.argv[1]))
    ray.init(address=config["address"], runtime_env={"env_vars": config["job"]}, log_to_driver=False)

    @ray.remote(num_cpus=0)
    class Probe:
        def environ(self):
            return dict(os.environ)

    out = []
    for case in config["cases"]:
        runtime_env, replaced = actor_runtime_env(case["given"], config["job"], case["ours"])
        actor = Probe.options(runtime_env=runtime_env).remote()
        out.append({"environ": ray.get(actor.environ.remote(), timeout=300), "replaced": replaced})
        ray.kill(actor)
    print("RESULT " + json.dumps(out))
    """
)

JOB = {"NCCL_PROTO": "Simple", "NCCL_DEBUG": "WARN", "SEN_JOB_ONLY": "job"}
DOLLARS = ["/data/$PATH/x", "a${SEN_UNSET_UPPER}b", "${PATH}", "cost$ 5", "a$-b", "$", "${unset lower}", "{x}$"]
CASES = [
    {  # no runtime_env of the caller's: the job's values stay, ours win on our names
        "given": None,
        "ours": {"NCCL_PROTO": "LL", "SGLANG_EAGLE_NCCL": "1", "SGLANG_EAGLE_NCCL_NODE_RANK": "1"},
    },
    {  # the caller's own env_vars and other keys stay; the per-actor variables are not reported
        "given": {"env_vars": {"HF_HOME": "/h", "NCCL_DEBUG": "INFO", "SGLANG_EAGLE_NCCL_NODE_RANK": "0"},
                  "config": {"setup_timeout_seconds": 300}},
        "ours": {"NCCL_PROTO": "LL", "SGLANG_EAGLE_NCCL_NODE_RANK": "1"},
    },
    {  # what Ray does to '$': exactly the values the rule refuses are rewritten
        "given": {},
        "ours": {f"SEN_DOLLAR_{i}": v for i, v in enumerate(DOLLARS)},
    },
]


def test_real_workers_hold_what_the_merge_decides(cluster, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"address": cluster.address, "job": JOB, "cases": CASES}))
    script = tmp_path / "workers.py"
    script.write_text(WORKER_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(config)], env=driver_env(), capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    results = [line[len("RESULT "):] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, done.stderr[-4000:]
    seen = json.loads(results[-1])
    for case, got in zip(CASES, seen, strict=True):
        runtime_env, replaced = actor_runtime_env(case["given"], JOB, case["ours"])
        assert got["replaced"] == replaced
        environ = got["environ"]
        user = {**JOB, **((case["given"] or {}).get("env_vars") or {})}
        for name, value in {**user, **case["ours"]}.items():
            if name in case["ours"] and ray_rewrites(value):
                # Ray rewrote it the way the reference says, over the worker's own environment.
                assert environ[name] == ray_reference.worker_value(value, {"PATH": environ["PATH"]}), (name, value)
                assert value in ("${unset lower}",) or environ[name] != value, (name, value)
            else:
                assert environ.get(name) == value, (name, value, environ.get(name))
    assert seen[0]["replaced"] == [{"name": "NCCL_PROTO", "user_value": "Simple", "value": "LL"}]
    assert seen[1]["replaced"] == [{"name": "NCCL_PROTO", "user_value": "Simple", "value": "LL"}]
    assert seen[1]["environ"]["NCCL_DEBUG"] == "INFO" and seen[1]["environ"]["SEN_JOB_ONLY"] == "job"


def test_a_dollar_in_the_audit_dir_is_refused_before_any_actor(cluster, models, tmp_path):
    """Ray would give every actor another audit directory (and another hand-off input) than the driver's: the
    driver refuses in SGLang's call that creates the actors, says why, and no scheduler ever starts."""
    probe = tmp_path / "probe"
    audit = tmp_path / "runs$LAUNCH" / "audit"
    config = {
        "address": cluster.address,
        "job_env_vars": job_env_vars(probe),
        "engine": run.engine_kwargs(models["target"], tp_size=2, nnodes=2),
    }
    path = tmp_path / "driver.json"
    path.write_text(json.dumps(config))
    env = driver_env(SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_AUDIT_DIR=str(audit))
    done = subprocess.run([sys.executable, str(DRIVER), str(path)], env=env, capture_output=True, text=True,
                          timeout=420, cwd=tmp_path)
    results = [line[len("RESULT "):] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, done.stderr[-4000:]
    out = json.loads(results[-1])
    error = out.get("error", "")
    assert "RayEnvError" in error and "Ray rewrites '$NAME'" in error and "Nothing was started" in error, out
    assert "SGLANG_EAGLE_NCCL_AUDIT_DIR=" in error and "Fix: remove the '$'" in error, error
    assert not probe_records(probe)  # no scheduler process ever created a group
