"""Every door refuses through the door table (inproc/refusal.py), entered through its real entry function in a
real process, with a failure at every step after the first write.

Each case starts a fresh interpreter of this environment with the gate set *at start*, so the installed ``.pth``
line is what runs the plugin (interpreter start), and the program then imports ``ctypes`` where the case is the
first ``import ctypes`` door. The failure is the documented test-only fault point (``SGLANG_EAGLE_NCCL_TEST_FAULT``,
docs/fail-closed.md), or a real resource that fails (an audit file that may not grow). After each:

- the process's ``os.environ`` is byte for byte the environment it was started with;
- exactly one stderr line says "not applied", and no line says "applied";
- a ``refused`` record naming the door exists where the process has a launch directory (a hand-off of
  ``sglang-eagle-nccl env --audit-dir``);
- SGLang cannot start there: the refusal of ``import sglang`` is armed (the SGLang tier imports the real one:
  tests/sglang/test_doors_sglang.py, with SGLang's own plugin loader and argument parser).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_eagle_nccl.contract.names import is_enabled
from sglang_eagle_nccl.inproc.boot.state import ENV_TEST_FAULT
from sglang_eagle_nccl.inproc.refusal import DOORS, FAULT_STEPS
from support.jsonl import read_jsonl

PROBE = Path(__file__).resolve().parents[2] / "probes" / "import_order_probe.py"
CLI = Path(sys.executable).parent / "sglang-eagle-nccl"
CLEAN = {
    k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
}

# The doors a plain interpreter reaches (no SGLang here): the step, and the imports of the program after start.
PLAIN_CASES = [
    ("interpreter_start", step, ()) for step in FAULT_STEPS["interpreter_start"]
] + [("native_late", "native.late", ("ctypes",))]


def claims_applied(line: str) -> bool:
    """A line that says a profile was applied (the refusal's own wording is not that)."""
    for refusal in ("not applied", "nothing was applied", "cannot be applied"):
        line = line.replace(refusal, "")
    return "applied" in line


def applied_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if claims_applied(line)]


def run_probe(env: dict[str, str], order: tuple[str, ...], cwd: Path) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run(
        [sys.executable, str(PROBE), ",".join(order), "none"],
        capture_output=True, text=True, env=env, timeout=120, cwd=cwd,
    )
    assert done.returncode == 0, done.stderr  # the program itself keeps running
    return done, json.loads(done.stdout.splitlines()[-1])


def handed_off(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The environment `env --audit-dir` prints, and the launch directory it opened (a real launch)."""
    printed = subprocess.run(
        [str(CLI), "env", "--profile", "pcie-8gpu", "--audit-dir", str(tmp_path / "audit"), "--format", "json"],
        capture_output=True, text=True, env=CLEAN, timeout=120,
    )
    assert printed.returncode == 0, printed.stderr
    (launch,) = [d for d in (tmp_path / "audit").iterdir() if d.is_dir()]
    return json.loads(printed.stdout), launch


def refused_records(launch: Path, pid: int) -> list[dict]:
    found = []
    for path in launch.glob(f"proc-*-{pid}.jsonl"):
        found += read_jsonl(path)
    return [r for r in found if r["event"] == "refused"]


@pytest.mark.parametrize("launch", ["root", "handed-off"])
@pytest.mark.parametrize("door,step,order", PLAIN_CASES)
def test_a_failure_at_every_step_is_refused_through_the_door(tmp_path, door, step, order, launch):
    assert CLI.exists(), "the plugin is not installed in this interpreter's environment (pip install -e .)"
    if launch == "root":
        env = dict(CLEAN, SGLANG_EAGLE_NCCL="pcie-8gpu", NCCL_PROTO="Simple")
        directory = None
    else:
        handed, directory = handed_off(tmp_path)
        env = dict(CLEAN, **handed)
    env[ENV_TEST_FAULT] = step
    done, out = run_probe(env, order, tmp_path)
    assert out["pth_ran"], "the .pth line did not run the plugin"
    assert out["environ"] == env  # byte for byte what the process was started with
    assert out["refused"] == f"internal error while applying the NCCL profile (InjectedFault('test fault injected at {step}')); nothing was applied"
    assert out["active"] is False and out["sglang_refusal_armed"]
    assert sum("not applied" in line for line in done.stderr.splitlines()) == 1, done.stderr
    assert applied_lines(done.stderr) == [], done.stderr
    if directory is not None:
        (record,) = refused_records(directory, out["pid"])
        assert record["door"] == door and step in record["message"]


def test_without_a_fault_the_same_processes_apply_the_profile(tmp_path):
    """The control: the same program and environments, no fault: the profile is in force, nothing refused."""
    for env in (dict(CLEAN, SGLANG_EAGLE_NCCL="pcie-8gpu"), dict(CLEAN, **handed_off(tmp_path)[0])):
        done, out = run_probe(env, ("ctypes",), tmp_path)
        assert out["active"] is True and out["refused"] is None and out["configured"] == 1
        assert out["environ"]["NCCL_PROTO"] == "LL" and "not applied" not in done.stderr


def test_the_fault_variable_is_read_only_where_the_plugin_is_enabled(tmp_path):
    """A fault point set without the gate does nothing: the plugin never runs."""
    env = dict(CLEAN, **{ENV_TEST_FAULT: "activation.written"})
    assert not is_enabled(env)
    done, out = run_probe(env, ("ctypes",), tmp_path)
    assert not out["pth_ran"] and out["environ"] == env and done.stderr == ""


def test_every_fault_step_belongs_to_a_door_of_the_table():
    assert set(FAULT_STEPS) <= set(DOORS)
    steps = [s for door in FAULT_STEPS.values() for s in door]
    assert len(steps) == len(set(steps))


def unsigned(wire: str, **changes) -> str:
    """The hand-off edited by hand: its body changed, its signature dropped (written here, not with the plugin's
    encoder: what someone editing the variable would do)."""
    head, payload, _mac = wire.split(".", 2)
    body = json.loads(bytes.fromhex(payload).decode("utf-8"))
    body.update(changes)
    return f"{head}.{json.dumps(body, separators=(',', ':'), sort_keys=True).encode('utf-8').hex()}.-"


@pytest.mark.parametrize("where", ["a directory of the user", "a missing chain", "a relative path"])
def test_an_unsigned_hand_off_naming_another_place_is_refused_and_creates_nothing(tmp_path, where):
    handed, launch = handed_off(tmp_path)
    other = {
        "a directory of the user": tmp_path / "mine",
        "a missing chain": tmp_path / "x" / "y" / "launch",
        "a relative path": Path("audit") / launch.name,
    }[where]
    if where == "a directory of the user":
        other.mkdir(mode=0o700)
    env = dict(CLEAN, **handed)
    env["SGLANG_EAGLE_NCCL_PROFILE"] = unsigned(handed["SGLANG_EAGLE_NCCL_PROFILE"], run_dir=str(other))
    before = sorted(p for p in tmp_path.rglob("*"))
    done, out = run_probe(env, ("ctypes",), tmp_path)
    assert out["environ"] == env and out["active"] is False and out["sglang_refusal_armed"]
    # A relative path is not even a hand-off (the decoder's own rule); the others are refused as a place no launch opened.
    reason = "malformed" if where == "a relative path" else "not one a launch opened"
    assert reason in out["refused"], out["refused"]
    assert sorted(p for p in tmp_path.rglob("*")) == before  # nothing created, no record written anywhere
    assert sum("not applied" in line for line in done.stderr.splitlines()) == 1


def test_an_unsigned_hand_off_naming_the_launch_a_launcher_opened_is_accepted(tmp_path):
    handed, launch = handed_off(tmp_path)
    env = dict(CLEAN, **handed)
    env["SGLANG_EAGLE_NCCL_PROFILE"] = unsigned(handed["SGLANG_EAGLE_NCCL_PROFILE"])
    done, out = run_probe(env, ("ctypes",), tmp_path)
    assert out["active"] is True and out["refused"] is None, done.stderr
    assert list(launch.glob(f"proc-*-{out['pid']}.jsonl"))


def test_a_ray_workers_start_is_its_own_door(tmp_path):
    """The program Ray starts for an actor (its ``default_worker.py``) refuses at the Ray actor's row of the
    table: the same action as interpreter start, recorded under its own door."""
    handed, directory = handed_off(tmp_path)
    worker = tmp_path / "ray" / "_private" / "workers" / "default_worker.py"
    worker.parent.mkdir(parents=True)
    worker.write_text(PROBE.read_text())
    env = dict(CLEAN, **handed, **{ENV_TEST_FAULT: "activation.written"})
    done = subprocess.run(
        [sys.executable, str(worker), "", "none"], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["environ"] == env and out["sglang_refusal_armed"]
    (record,) = refused_records(directory, out["pid"])
    assert record["door"] == "ray_actor"
