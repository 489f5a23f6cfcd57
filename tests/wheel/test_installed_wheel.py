"""The plugin as users install it: the built wheel in a fresh venv, real spawn children."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from support.jsonl import read_jsonl

PROBE = textwrap.dedent(
    """
    import json, multiprocessing as mp, os, sys

    def report():
        from importlib import util
        state = None
        if "sglang_eagle_nccl.inproc.boot.state" in sys.modules:
            s = sys.modules["sglang_eagle_nccl.inproc.boot.state"].STATE
            state = {"active": s.active, "origin": s.origin, "role": s.role}
        return {
            "pid": os.getpid(),
            "plugin_modules": sorted(m for m in sys.modules if m.startswith("sglang_eagle_nccl")),
            "wrapt_loaded": "wrapt" in sys.modules,
            "NCCL_PROTO": os.environ.get("NCCL_PROTO"),
            "NCCL_BUFFSIZE": os.environ.get("NCCL_BUFFSIZE"),
            "has_profile_var": "SGLANG_EAGLE_NCCL_PROFILE" in os.environ,
            "state": state,
        }

    def child(q):
        q.put(report())

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        kid = q.get(timeout=60)
        p.join()
        print(json.dumps({"parent": report(), "child": kid}))
    """
)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
    }
    env.update(extra)
    return env


def _probe(python: Path, tmp_path: Path, **env: str) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    proc = subprocess.run(
        [str(python), str(script)], capture_output=True, text=True, env=_env(**env), cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return {"out": json.loads(proc.stdout.strip().splitlines()[-1]), "stderr": proc.stderr}


def test_wheel_ships_pth_and_start_files(venv_python):
    site = subprocess.run(
        [str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pth = Path(site) / "sglang_eagle_nccl.pth"
    start = Path(site) / "sglang_eagle_nccl.start"
    assert pth.is_file() and start.is_file()
    line = pth.read_text().strip()
    # When the plugin is off, the line is one os.environ.get: nothing else is evaluated.
    assert line.startswith('import os; os.environ.get("SGLANG_EAGLE_NCCL") and ')
    assert line.count("os.environ.get") == 1 and "torch" not in line and "sglang." not in line
    assert start.read_text().strip() == "sglang_eagle_nccl._gate:start"


def test_gate_off_imports_nothing_in_parent_or_spawn_child(venv_python, tmp_path):
    res = _probe(venv_python, tmp_path)["out"]
    for who in ("parent", "child"):
        assert res[who]["plugin_modules"] == [], who
        assert res[who]["wrapt_loaded"] is False
        assert res[who]["NCCL_PROTO"] is None


def test_gate_off_importtime_shows_no_plugin_module(venv_python, tmp_path):
    proc = subprocess.run(
        [str(venv_python), "-X", "importtime", "-c", "pass"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert "sglang_eagle_nccl" not in proc.stderr and "wrapt" not in proc.stderr


def test_gate_on_activates_parent_and_spawn_child(venv_python, tmp_path):
    audit_root = tmp_path / "audit"
    res = _probe(
        venv_python, tmp_path, SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_AUDIT_DIR=str(audit_root)
    )
    out = res["out"]
    for who in ("parent", "child"):
        assert out[who]["NCCL_PROTO"] == "LL" and out[who]["NCCL_BUFFSIZE"] == "16777216", who
        assert out[who]["state"]["active"] is True
        assert out[who]["state"]["origin"] == "pth"
        assert out[who]["has_profile_var"]
    assert out["parent"]["state"]["role"] == "launcher"
    assert out["child"]["state"]["role"] == "child"
    # Nothing positive is said before SGLang opens a launch ("in force"): a later door could still refuse.
    assert "applied" not in res["stderr"]
    # A Python program that is not an SGLang launch opens no launch directory: there is nothing
    # for `audit` to pass (launches are launches).
    assert not audit_root.exists()


def test_processes_of_an_env_launch_join_its_directory(venv_python, tmp_path):
    """`env --audit-dir` opens one launch; every process started from that environment audits into it."""
    cli = venv_python.parent / "sglang-eagle-nccl"
    printed = subprocess.run(
        [
            str(cli),
            "env",
            "--profile",
            "pcie-8gpu",
            "--audit-dir",
            str(tmp_path / "audit"),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    env_vars = json.loads(printed.stdout)
    (launch,) = [d for d in (tmp_path / "audit").iterdir() if d.is_dir()]
    res = _probe(venv_python, tmp_path, **env_vars)
    out = res["out"]
    assert out["parent"]["state"]["role"] == "child" and out["child"]["state"]["role"] == "child"
    starts = {}
    for f in launch.glob("proc-*.jsonl"):
        first = read_jsonl(f)[0]
        assert first["event"] == "process_start"
        starts[first["pid"]] = first
    assert {out["parent"]["pid"], out["child"]["pid"]} <= set(starts)
    # Any other audited process is multiprocessing's own helper (resource tracker), which is a
    # Python process of the same environment too.
    for pid in set(starts) - {out["parent"]["pid"], out["child"]["pid"]}:
        assert starts[pid]["invocation"].endswith("<multiprocessing.resource_tracker>")
    assert starts[out["child"]["pid"]]["invocation"].endswith("<multiprocessing.spawn>")
    # Only helper processes ran (no SGLang rank, no communicator): audit does not call that a pass.
    verdict = subprocess.run(
        [str(cli), "audit", str(launch)], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert verdict.returncode == 1, verdict.stdout
    assert "nothing real was audited" in verdict.stdout


# What an SGLang child may import at interpreter start beyond a bare interpreter: the plugin's
# start-up modules and the two C modules of the digest check. Every other module is start-up cost
# in every process SGLang spawns (issue 11: activation <= 5 ms); these in particular cost it before.
BOOT = Path(__file__).resolve().parents[2] / "sglang_eagle_nccl" / "inproc" / "boot"
START_UP_EXTRA = {"_sha256", "_sha2", "_operator"}
NOT_AT_START = {
    "__future__",
    "binascii",
    "base64",
    "hashlib",
    "hmac",
    "errno",
    "dataclasses",
    "typing",
    "re",
    "json",
    "enum",
    "threading",
    "ctypes",
    "inspect",
    "packaging",
    "wrapt",
}


def _imported(python: Path, env: dict[str, str]) -> list[str]:
    proc = subprocess.run(
        [str(python), "-X", "importtime", "-c", "pass"], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return [ln.rsplit("|", 1)[1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")][
        1:
    ]


def test_child_start_imports_only_the_start_up_modules(venv_python, tmp_path):
    """A child of a launch (signed serialised profile inherited) imports nothing heavy at start."""
    cli = venv_python.parent / "sglang-eagle-nccl"
    inputs = {"SGLANG_EAGLE_NCCL_AUDIT_DIR": str(tmp_path / "audit")}
    printed = subprocess.run(
        [str(cli), "env", "--profile", "pcie-8gpu", "--format", "json"],
        capture_output=True,
        text=True,
        env=_env(**inputs),
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    # env prints the inputs the serialised profile records (the audit root among them): a child gets exactly that.
    child = _env(**json.loads(printed.stdout), SGLANG_EAGLE_NCCL_ROOT_PID="1")
    extra = set(_imported(venv_python, child)) - set(_imported(venv_python, _env(**inputs)))
    assert "sglang_eagle_nccl.inproc.boot.activation" in extra  # it did activate
    assert "sglang_eagle_nccl.profile.resolve" not in extra  # through the signed wire, not re-validation
    foreign = {m for m in extra if not m.startswith("sglang_eagle_nccl")} - START_UP_EXTRA
    assert not foreign, sorted(foreign)
    assert not extra & NOT_AT_START
    # The folder is the list: what a child imports at start is inproc/boot/ (all of it), contract/
    # modules, the gate and the decision's per-process part (decision/plan.py, decision/plugins.py: the
    # plan every process carries out); a module anywhere else is start-up cost someone forgot to account for.
    ours = {m for m in extra if m.startswith("sglang_eagle_nccl")}
    allowed = ("sglang_eagle_nccl.inproc.boot.", "sglang_eagle_nccl.contract.")
    outside = {m for m in ours if not m.startswith(allowed)} - {
        "sglang_eagle_nccl",
        "sglang_eagle_nccl._gate",
        "sglang_eagle_nccl.inproc",
        "sglang_eagle_nccl.inproc.boot",
        "sglang_eagle_nccl.contract",
        "sglang_eagle_nccl.decision",
        "sglang_eagle_nccl.decision.plan",
        "sglang_eagle_nccl.decision.plugins",
    }
    assert not outside, sorted(outside)
    boot = {f"sglang_eagle_nccl.inproc.boot.{f.stem}" for f in BOOT.glob("*.py") if f.stem != "__init__"}
    assert boot <= ours, f"in inproc/boot/ but not imported at start: {sorted(boot - ours)}"


def test_child_uses_serialised_profile_not_files(venv_python, tmp_path):
    """A spawned child rebuilds the profile from the one env var, even if the file is gone."""
    prof = tmp_path / "mine.toml"
    prof.write_text('[env]\nNCCL_PROTO = "Simple"\n')
    script = tmp_path / "remove_then_spawn.py"
    script.write_text(
        PROBE.replace(
            '    ctx = mp.get_context("spawn")',
            f'    os.remove({str(prof)!r})\n    ctx = mp.get_context("spawn")',
        )
    )
    proc = subprocess.run(
        [str(venv_python), str(script)],
        capture_output=True,
        text=True,
        env=_env(SGLANG_EAGLE_NCCL=str(prof), SGLANG_EAGLE_NCCL_AUDIT_DIR=str(tmp_path / "a")),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["child"]["NCCL_PROTO"] == "Simple" and out["child"]["state"]["active"]


def test_broken_profile_variable_with_gate_off_does_nothing(venv_python, tmp_path):
    res = _probe(
        venv_python, tmp_path, SGLANG_EAGLE_NCCL_PROFILE="{not json", SGLANG_EAGLE_NCCL_ENV="LD_PRELOAD=/x.so"
    )
    assert res["out"]["parent"]["plugin_modules"] == [] and res["out"]["child"]["plugin_modules"] == []
    assert res["stderr"] == ""


@pytest.mark.parametrize("value", ["0", "off", "false", ""])
def test_gate_disabled_words(venv_python, tmp_path, value):
    res = _probe(venv_python, tmp_path, SGLANG_EAGLE_NCCL=value)["out"]
    assert res["parent"]["NCCL_PROTO"] is None and res["parent"]["state"] is None


def test_bad_profile_with_gate_on_is_loud_but_other_programs_run(venv_python, tmp_path):
    proc = subprocess.run(
        [str(venv_python), "-c", "print('still works')"],
        capture_output=True,
        text=True,
        env=_env(SGLANG_EAGLE_NCCL="no-such-profile"),
        timeout=60,
    )
    assert proc.returncode == 0 and "still works" in proc.stdout
    assert "no built-in profile has this name" in proc.stderr
    assert "SGLang will refuse to start" in proc.stderr


def test_console_script_from_the_wheel(venv_python, tmp_path):
    exe = venv_python.parent / "sglang-eagle-nccl"
    proc = subprocess.run(
        [str(exe), "profiles", "list", "--json"], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    names = [p["name"] for p in json.loads(proc.stdout)]
    assert {"pcie-8gpu", "debug"} <= set(names)


def test_own_cli_runs_even_with_a_broken_profile_in_the_environment(venv_python):
    exe = venv_python.parent / "sglang-eagle-nccl"
    proc = subprocess.run(
        [str(exe), "validate"],
        capture_output=True,
        text=True,
        env=_env(SGLANG_EAGLE_NCCL="no-such-profile"),
        timeout=60,
    )
    assert proc.returncode == 1
    assert "refuse to start" not in proc.stderr  # the .pth gate stayed out of the way
    assert "no built-in profile has this name" in proc.stderr
