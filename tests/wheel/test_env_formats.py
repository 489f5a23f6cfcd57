"""Every `env` format round-trips: a fresh process given exactly the printed environment activates the profile.

The consumer of each format reads it back the way it really does: a shell ``eval`` for ``shell``, Ray's
``env_vars`` (a JSON object) for ``json``, ``env -i NAME=value ...`` (``docker --env-file`` and systemd
take the line verbatim) for ``dotenv``, and for ``k8s`` a YAML parser plus what the kubelet does to an
``env:`` list (``$(VAR)`` references to earlier entries; LeaderWorkerSet puts ``LWS_*`` first). The
process starts in another working directory with nothing else of the caller's environment (no HOME,
no XDG_CACHE_HOME: it does not hold the key that signed the profile, as on another machine).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from sglang_eagle_nccl.profile.resolve import resolve

PROBE = textwrap.dedent(
    """
    import json, os, sys
    mod = sys.modules.get("sglang_eagle_nccl.inproc.boot.state")
    s = mod.STATE if mod else None
    print(json.dumps({
        "active": bool(s and s.active),
        "refused": s.refused if s else None,
        "data": s.data if s else None,
        "node_rank": s.node_rank if s else None,
        "is_root": s.is_root if s else None,
        "run_dir": s.run_dir if s else None,
        "expected_env": s.expected_env if s else None,
        "environ": dict(os.environ),
    }))
    """
)

PROFILE = textwrap.dedent(
    """
    extends = "pcie-8gpu"
    [nodes.0.env]
    NCCL_SOCKET_IFNAME = "eth0"
    [nodes.1.env]
    NCCL_SOCKET_IFNAME = "ens5"
    """
)

# What the caller's shell holds when it runs `env`: plugin inputs (resolved into the profile and
# recorded in the hand-off), a relative audit root, and variables a child must never see.
CALLER = {
    "SGLANG_EAGLE_NCCL_ENV": "NCCL_NTHREADS=256",
    "SGLANG_EAGLE_NCCL_AUDIT_DIR": "audit-root",
    "SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT": "90",
    "CALLERS_OWN": "not for the child",
}


def _cli(venv_python: Path) -> Path:
    return venv_python.parent / "sglang-eagle-nccl"


def _printed(venv_python: Path, workdir: Path, profile: Path, fmt: str, *extra: str) -> str:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
    }
    env.update(CALLER)
    proc = subprocess.run(
        [str(_cli(venv_python)), "env", "--profile", str(profile), "--format", fmt, *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _probe_env(python: Path, env: dict[str, str], cwd: Path) -> dict:
    script = cwd / "probe.py"
    script.write_text(PROBE)
    proc = subprocess.run(
        [str(python), str(script)], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _expected(workdir: Path, profile: Path) -> dict:
    environ = {k: v for k, v in CALLER.items() if k.startswith("SGLANG_EAGLE_NCCL")}
    here = os.getcwd()
    os.chdir(workdir)  # a relative audit root is made absolute where `env` resolved it
    try:
        return resolve([str(profile)], environ=environ).profile.to_dict()
    finally:
        os.chdir(here)


def _same_profile(out: dict, expected: dict, node_rank: int | None) -> None:
    assert out["active"] and not out["refused"], out["refused"]
    for key in ("env", "groups", "nodes", "policy", "tuner_rules"):
        assert out["data"].get(key) == expected.get(key), key
    assert out["data"]["policy"]["audit_dir"] == expected["policy"]["audit_dir"]  # the same launch root
    assert os.path.isabs(out["data"]["policy"]["audit_dir"])
    assert out["node_rank"] == node_rank
    wanted = dict(
        expected["env"], **(expected["nodes"].get(str(node_rank), {}) if node_rank is not None else {})
    )
    assert {k: out["environ"].get(k) for k in wanted} == wanted
    assert "CALLERS_OWN" not in out["environ"]


def _shell(venv_python: Path, printed: str, cwd: Path, shell_env: dict[str, str] | None = None) -> dict:
    script = cwd / "start.sh"
    script.write_text(f'eval "$(cat {cwd / "printed.txt"})"\nexec {venv_python} {cwd / "probe.py"}\n')
    (cwd / "printed.txt").write_text(printed)
    (cwd / "probe.py").write_text(PROBE)
    proc = subprocess.run(
        ["/bin/sh", str(script)], capture_output=True, text=True, env=shell_env or {}, cwd=cwd, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _dotenv(venv_python: Path, printed: str, cwd: Path) -> dict:
    # docker --env-file and systemd take NAME=value verbatim for these values (dotenv_safe): env -i does too.
    (cwd / "probe.py").write_text(PROBE)
    lines = [ln for ln in printed.splitlines() if ln.strip()]
    proc = subprocess.run(
        ["env", "-i", *lines, str(venv_python), str(cwd / "probe.py")],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def kubelet_env(entries: list[dict], first: dict[str, str]) -> dict[str, str]:
    """A container's environment from its ``env:`` list as the kubelet builds it: ``first`` (what
    LeaderWorkerSet's webhook prepends) then each entry, ``$(NAME)`` replaced by an earlier variable's
    value (left as written when there is none), ``$$`` read as ``$``."""
    env = dict(first)

    def expand(value: str) -> str:
        def one(match: re.Match) -> str:
            if match.group(0) == "$$":
                return "$"
            return env.get(match.group(1), match.group(0))

        return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, value)

    for entry in entries:
        env[entry["name"]] = expand(entry["value"])
    return env


def check_envvar_shape(entries: object) -> list[dict]:
    """Kubernetes ``EnvVar``: a list of objects with a string ``name`` and a string ``value``, names unique."""
    assert isinstance(entries, list) and entries
    for entry in entries:
        assert isinstance(entry, dict) and set(entry) == {"name", "value"}, entry
        assert isinstance(entry["name"], str) and isinstance(entry["value"], str), entry
        assert re.fullmatch(r"[-._a-zA-Z][-._a-zA-Z0-9]*", entry["name"]), entry["name"]  # C_IDENTIFIER-ish
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), names
    return entries


@pytest.fixture
def dirs(tmp_path):
    gen, run = tmp_path / "gen", tmp_path / "elsewhere"
    gen.mkdir()
    run.mkdir()
    profile = gen / "cluster.toml"
    profile.write_text(PROFILE)
    return gen, run, profile


def test_shell_round_trips(venv_python, dirs):
    gen, run, profile = dirs
    printed = _printed(venv_python, gen, profile, "shell", "--node-rank", "1")
    _same_profile(_shell(venv_python, printed, run), _expected(gen, profile), 1)
    # Evaluated in a shell that still holds an earlier `env --audit-dir` launch's root marker: the output
    # removes it, so a launch from that shell is a root again (it opens its own launch: audited).
    out = _shell(venv_python, printed, run, shell_env={"SGLANG_EAGLE_NCCL_ROOT_PID": "external"})
    assert "unset SGLANG_EAGLE_NCCL_ROOT_PID" in printed.splitlines()
    assert out["active"] and out["is_root"]


def test_json_round_trips(venv_python, dirs):
    gen, run, profile = dirs
    printed = json.loads(_printed(venv_python, gen, profile, "json", "--node-rank", "0"))
    assert all(isinstance(v, str) for v in printed.values())
    _same_profile(_probe_env(venv_python, printed, run), _expected(gen, profile), 0)


def test_dotenv_round_trips(venv_python, dirs):
    gen, run, profile = dirs
    printed = _printed(venv_python, gen, profile, "dotenv")
    _same_profile(_dotenv(venv_python, printed, run), _expected(gen, profile), None)


def _yaml():
    """PyYAML, a real YAML parser: the test extra installs it; without it this is a failure, never a skip."""
    try:
        import yaml
    except ImportError:
        pytest.fail("PyYAML is missing: it is in the test extra (pip install -e '.[test]')")
    return yaml


def test_k8s_round_trips_with_the_node_rank_of_each_pod(venv_python, dirs):
    yaml = _yaml()
    gen, run, profile = dirs
    entries = check_envvar_shape(
        yaml.safe_load(_printed(venv_python, gen, profile, "k8s", "--node-rank-from", "LWS_WORKER_INDEX"))
    )
    expected = _expected(gen, profile)
    for index in ("0", "1"):
        pod = kubelet_env(
            entries, {"LWS_LEADER_ADDRESS": "lws-0.lws", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": index}
        )
        _same_profile(_probe_env(venv_python, pod, run), expected, int(index))


def test_env_audit_dir_launch_is_joined_from_every_format(venv_python, dirs):
    """With --audit-dir the printed environment names one launch; every format's process joins it."""
    gen, run, profile = dirs
    yaml = _yaml()
    seen = set()
    for fmt in ("shell", "json", "dotenv", "k8s"):
        audit = gen / f"launches-{fmt}"
        printed = _printed(venv_python, gen, profile, fmt, "--audit-dir", str(audit.name))
        (launch,) = [d for d in audit.iterdir() if d.is_dir()]
        if fmt == "shell":
            out = _shell(venv_python, printed, run)
        elif fmt == "json":
            out = _probe_env(venv_python, json.loads(printed), run)
        elif fmt == "dotenv":
            out = _dotenv(venv_python, printed, run)
        else:
            out = _probe_env(venv_python, kubelet_env(check_envvar_shape(yaml.safe_load(printed)), {}), run)
        assert out["active"] and not out["is_root"], fmt  # a child of that launch, not a root of its own
        assert out["run_dir"] == str(launch), fmt
        seen.add(fmt)
    assert seen == {"shell", "json", "dotenv", "k8s"}


def test_readme_lws_recipe(venv_python, tmp_path):
    """The README's LeaderWorkerSet recipe, run as written: one generated env: list in both templates."""
    yaml = _yaml()
    from support.readme import code_block

    lang, script = code_block("tests/wheel/test_env_formats.py::test_readme_lws_recipe")
    assert lang == "bash"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
    }
    env["PATH"] = f"{venv_python.parent}:{env.get('PATH', '/usr/bin:/bin')}"
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lws = yaml.safe_load((tmp_path / "lws.yaml").read_text())
    assert lws["kind"] == "LeaderWorkerSet"
    template = lws["spec"]["leaderWorkerTemplate"]
    (leader,) = template["leaderTemplate"]["spec"]["containers"]
    (worker,) = template["workerTemplate"]["spec"]["containers"]
    # One source: the worker's list is the leader's (the anchor), entry for entry.
    assert leader["env"] == worker["env"]
    entries = check_envvar_shape(leader["env"])
    expected = resolve(
        ["pcie-8gpu"], environ={"SGLANG_EAGLE_NCCL_AUDIT_DIR": "/var/log/nccl-audit"}
    ).profile.to_dict()
    run = tmp_path / "pod"
    run.mkdir()
    for index, container in (("0", leader), ("1", worker)):
        lws_vars = {"LWS_LEADER_ADDRESS": "sglang-0.sglang", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": index}
        pod = kubelet_env(container["env"], lws_vars)
        out = _probe_env(venv_python, pod, run)
        _same_profile(out, expected, int(index))
        assert out["data"]["policy"]["audit_dir"] == "/var/log/nccl-audit"
        # What the container runs: SGLang's own launcher with the node rank LeaderWorkerSet gives it.
        command = [kubelet_env([{"name": "_", "value": arg}], lws_vars)["_"] for arg in container["command"]]
        assert command[command.index("--node-rank") + 1] == index
    assert {e["name"] for e in entries} >= {"SGLANG_EAGLE_NCCL", "SGLANG_EAGLE_NCCL_PROFILE", "NCCL_PROTO"}
