"""ci/gpu-check end to end, without a GPU (the CPU rehearsal) and with one (marked ``gpu``).

The rehearsal runs in the SGLang >= 0.5.23 CPU venv of ci/sglang_venv.py, with this checkout's plugin
wheel layered over it through ``--wheels`` -- the same install path the GPU machine uses -- and the
real libnccl.so.2 of nvidia-nccl-cu13 for steps (c) and (d). The venv is this interpreter when it is
one, else ``$SGLANG_EAGLE_NCCL_REHEARSAL_PYTHON`` (set by ci/test: then its absence fails), else the
one ci/sglang_venv.py built (skipped, naming the build command, when there is none).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from support.gpu_check_pkg import REPO, SCRIPT, gpu_check

common, context, judging = gpu_check.common, gpu_check.context, gpu_check.judging
REHEARSAL_PYTHON_VAR = "SGLANG_EAGLE_NCCL_REHEARSAL_PYTHON"


def _has_sglang_with_standins(python: str) -> bool:
    code = (
        "import importlib.metadata as m, importlib.util as u, sys; "
        "v = tuple(int(x) for x in m.version('sglang').split('.')[:3] if x.isdigit()); "
        "sys.exit(0 if v >= (0, 5, 23) and u.find_spec('sglang_cpu_standins') else 1)"
    )
    return subprocess.run([python, "-c", code], capture_output=True, timeout=120).returncode == 0


def _rehearsal_python() -> str | None:
    """This interpreter if it is an SGLang >= 0.5.23 CPU venv, else the one named or built."""
    if _has_sglang_with_standins(sys.executable):
        return sys.executable
    named = os.environ.get(REHEARSAL_PYTHON_VAR)
    if named:
        assert _has_sglang_with_standins(named), (
            f"${REHEARSAL_PYTHON_VAR}={named} is no SGLang >= 0.5.23 CPU venv"
        )
        return named
    python = _VENV_023 / "bin" / "python"
    return str(python) if python.exists() and _has_sglang_with_standins(str(python)) else None


def _venv_023() -> Path:
    sys.path.insert(0, str(REPO / "ci"))
    try:
        import sglang_venv
    finally:
        sys.path.pop(0)
    return sglang_venv.venv_dir("0.5.23")


# Found at collection, before tests/conftest.py points XDG_CACHE_HOME at a temporary folder (part of
# the CI scripts' cache rule, ci/cache_root.py): the venv is in the user's cache.
_VENV_023 = _venv_023()


def _has_module(python: str, module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    return subprocess.run([python, "-c", code], capture_output=True, timeout=120).returncode == 0


def _libnccl_here() -> Path | None:
    try:
        lib = Path(
            str(
                importlib.metadata.distribution("nvidia-nccl-cu13").locate_file(
                    "nvidia/nccl/lib/libnccl.so.2"
                )
            )
        )
    except importlib.metadata.PackageNotFoundError:
        return None
    return lib if lib.is_file() else None


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory) -> dict[str, Any]:
    python = _rehearsal_python()
    if python is None:
        # Asked for by folder: a missing venv is a missing install, so it fails with the fix.
        pytest.fail("no SGLang >= 0.5.23 CPU venv: python3 ci/sglang_venv.py build 0.5.23")
    from support.wheel_env import build_wheel

    base = tmp_path_factory.mktemp("gpu-check")
    wheels = base / "wheels"
    build_wheel(wheels)
    cmd = [
        str(SCRIPT),
        "--cpu-rehearsal",
        "--python",
        python,
        "--wheels",
        str(wheels),
        "--out",
        str(base / "out"),
        "--work-dir",
        str(base / "work"),
    ]
    lib = _libnccl_here()
    if lib is not None:  # else the script looks for the wheel in the checked Python itself
        cmd += ["--nccl-lib", str(lib)]
    elif not _has_module(python, "nvidia.nccl"):
        pytest.fail(
            'step (d) needs the real libnccl: pip install "nvidia-nccl-cu13==2.32.3" (here or in the venv)'
        )
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    report_path = base / "out" / "gpu-check.json"
    assert report_path.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(report_path.read_text())
    return {
        "proc": proc,
        "report": report,
        "out": base / "out",
        "work": base / "work",
        "steps": {s["name"]: s for s in report["steps"]},
    }


@pytest.mark.sglang
@pytest.mark.e2e
def test_rehearsal_passes_and_writes_the_report(rehearsal):
    proc, report, out = rehearsal["proc"], rehearsal["report"], rehearsal["out"]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert (report["mode"], report["exit_code"], report["ok"]) == ("cpu-rehearsal", 0, True)
    assert list(rehearsal["steps"]) == ["environment", "profile", "preflight", "native-plugins", "engine"]
    assert set(report["timings"]) == {"environment", "profile", "preflight", "native-plugins", "engine"}
    # Checked with this checkout's plugin, installed from its wheel into the overlay venv.
    env_step = rehearsal["steps"]["environment"]
    assert env_step["details"]["python"].endswith("venv/bin/python") and env_step["details"]["wheels"]
    assert report["environment"]["plugin_pth"], "the overlay venv must process the plugin's .pth"
    assert report["profile"]["resolved_env"]["NCCL_PROTO"] == "LL"  # pcie-8gpu
    text = (out / "gpu-check.txt").read_text()
    assert text.startswith("gpu-check (cpu-rehearsal): PASS (exit 0)")
    for title in (
        "(a) preflight --tp 1, gloo",
        "(b) SGLang engine",
        "(d) one-rank NCCL communicator, real libnccl.so.2",
    ):
        assert title in text
    # Progress with timings, one line per step.
    assert (
        "[gpu-check" in proc.stdout
        and "(a) preflight --tp 1, gloo, one collective per group: OK in" in proc.stdout
    )
    with tarfile.open(out / "gpu-check-logs.tar.gz") as tar:
        names = tar.getnames()
    assert "logs/engine.log" in names and "logs/preflight.log" in names
    assert any(n.startswith("preflight/audit/") and n.endswith(".jsonl") for n in names)
    assert not any(n.startswith("venv/") for n in names)


@pytest.mark.sglang
@pytest.mark.e2e
def test_rehearsal_preflight_audits_the_rank_with_every_group(rehearsal):
    step = rehearsal["steps"]["preflight"]
    assert step["status"] == "ok", step
    assert step["details"]["backend"] == "gloo"
    (rank,) = step["details"]["ranks"]
    assert rank["status"] == "ok" and {"world:0", "tp:0"} <= set(rank["exercised"])
    audit = step["details"]["audit"]
    assert audit["verdict"] == "ok"
    assert [p["role"] for p in audit["processes"] if p["role"].startswith("preflight_TP")] == [
        "preflight_TP0"
    ]
    assert {c["group"] for c in audit["communicators"]} >= {"world", "tp"}


@pytest.mark.sglang
@pytest.mark.e2e
def test_rehearsal_engine_ran_eagle3_with_the_plugin(rehearsal):
    step = rehearsal["steps"]["engine"]
    assert step["status"] == "ok", step
    details = step["details"]
    assert details["sglang"].startswith("0.5.") and "EAGLE3" in details["speculative_algorithm"]
    assert len(details["outputs"]) == 4 and all(details["outputs"])  # 2 single requests + a batch of 2
    assert details["leftover_processes"] == []
    audit = details["audit"]
    roles = {p["role"] for p in audit["processes"]}
    assert audit["verdict"] == "ok" and "launcher" in roles and any(r.startswith("scheduler") for r in roles)
    assert audit["eagle"] and audit["eagle"][0]["worker"]
    # The phase ledger (the engine ran with SGLANG_EAGLE_NCCL_LEDGER=1): SGLang 0.5.23's EAGLE-3 steps;
    # TP = 1, so SGLang skips every collective of its one-rank groups and the ledger has no line.
    assert {"extend", "target verify", "draft extend"} <= set(details["ledger_phases"]), details["ledger_phases"]
    assert details["ledger_processes"] == 1 and details["ledger_lines"] == [] and details["ledger_replays"] == 0


@pytest.mark.sglang
@pytest.mark.e2e
def test_rehearsal_native_plugins_env_plugin_loaded_and_reads_audited(rehearsal):
    """(d): a process set up only by `sglang-eagle-nccl env --audit-dir` (profile pcie-8gpu-eagle,
    which has tuner rules) loads the real libnccl; NCCL says it loaded our env plugin, and the
    audit's nccl_reads hold the profile's NCCL_SOCKET_IFNAME, served by the plugin."""
    step = rehearsal["steps"]["native-plugins"]
    assert step["status"] == "ok", step
    details = step["details"]
    child = details["child"]
    assert child["mode"] == "ctypes" and child["unique_id_rc"] == 0 and child["nccl_version"] == "2.32.3"
    library = child["plugin_env"]["NCCL_ENV_PLUGIN"]
    assert library.endswith("/sglang_eagle_nccl/native/libsglang_eagle_nccl_nccl.so")
    assert child["plugin_env"]["NCCL_TUNER_PLUGIN"] == library  # the profile's [[tuner.rules]] set it too
    assert f"Successfully loaded external env plugin {library}" in details["nccl_plugin_lines"]
    assert "ENV/Plugin: Using sglang-eagle-nccl (v2)" in details["nccl_plugin_lines"]
    # No GPU: the communicator init fails before NCCL loads the tuner; the report says so.
    assert child["comm_ok"] is False and "CUDA" in child["comm_init_error"]
    assert not any("tuner plugin" in line for line in details["nccl_plugin_lines"])
    assert any("loads a tuner plugin only inside communicator init" in n for n in step["notes"])
    ifname = [
        {k: v for k, v in r.items() if k != "count"}
        for r in details["nccl_reads"]
        if r["name"] == "NCCL_SOCKET_IFNAME"
    ]
    assert ifname == [
        {
            "name": "NCCL_SOCKET_IFNAME",
            "value": "lo",
            "source": "profile",
            "environment": "lo",
            "disagrees": False,
        }
    ]
    # NCCL's own debug output of the same pid agrees with the audit (the (c) cross-check).
    (proc,) = details["nccl_processes"]
    assert proc["pid"] == child["pid"] and proc["confirmed"] == {"NCCL_SOCKET_IFNAME": "lo"}
    assert proc["role"] != "not audited" and details["audit"]["verdict"] == "ok"


@pytest.mark.sglang
@pytest.mark.e2e
def test_rehearsal_native_step_audit_is_the_plugins_own_cli(rehearsal):
    """The nccl_reads in the report are what `sglang-eagle-nccl audit --json` of that launch says."""
    work = rehearsal["work"]
    python = str(work / "venv" / "bin" / "python")
    audit_root = work / "native-plugins" / "audit"
    (launch,) = [p for p in audit_root.iterdir() if p.is_dir()]
    out = subprocess.run(
        [python, "-m", "sglang_eagle_nccl.cli.main", "audit", str(launch), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=common.scrubbed_environment()[0],
    )
    assert out.returncode == 0, out.stderr
    audit = json.loads(out.stdout)
    pid = rehearsal["steps"]["native-plugins"]["details"]["child"]["pid"]
    (reads,) = [r for r in audit["nccl_reads"].values() if r["pid"] == pid]
    assert reads["env_plugin_abi"] == "v2" and reads["verdict"] == "ok"
    assert {
        "name": "NCCL_SOCKET_IFNAME",
        "value": "lo",
        "source": "profile",
        "environment": "lo",
        "disagrees": False,
    } in [{k: v for k, v in r.items() if k != "count"} for r in reads["reads"]]


@pytest.mark.sglang
@pytest.mark.e2e
def test_rehearsal_report_code_fails_on_tampered_nccl_output(rehearsal, tmp_path):
    """Negative control: NCCL's real output from (d), edited so NCCL 'read' another interface than
    the plugin applied, must fail through the same audit CLI and judging code."""
    step = rehearsal["steps"]["native-plugins"]
    if step["status"] != "ok":
        pytest.fail(f"step (d) did not pass: {step['problems']}")
    source = Path(step["details"]["nccl_dir"])
    tampered = tmp_path / "nccl"
    tampered.mkdir()
    for path in source.iterdir():
        (tampered / path.name).write_text(
            path.read_text().replace("set by environment to lo", "set by environment to eth9")
        )
    work = rehearsal["work"]
    opts = common.Options(
        mode="cpu-rehearsal",
        python=None,
        wheels=None,
        out=tmp_path / "out",
        work=tmp_path,
        profile="pcie-8gpu",
        nccl_env=[],
        skip_engine=False,
        check_only=True,
        nccl_lib=None,
        budget_s=300,
    )
    env, _ = common.scrubbed_environment()
    ctx = context.Context(opts, str(work / "venv" / "bin" / "python"), env, common.Progress())
    audit, logs, problem = context.audit_and_parse(
        ctx, "tampered", work / "native-plugins" / "audit", tampered
    )
    assert problem == "" and audit is not None and logs
    judged = judging.judge_nccl(
        audit, logs, {"NCCL_SOCKET_IFNAME": "lo"}, required_pids={logs[0]["pid"]: "probe"}
    )
    text = "\n".join(judged["problems"])
    assert "NCCL_SOCKET_IFNAME" in text and "eth9" in text, judged
    assert "NCCL confirmed none of the profile's variables" in text


# ------------------------------------------------------------------------------------------------
# on a real GPU
# ------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_check_on_a_gpu(tmp_path):
    """The real thing: preflight over NCCL, both native plugins loaded into a one-rank communicator,
    the CUDA engine with EAGLE-3 and CUDA graphs, NCCL's own report per process. Python: $SGLANG_EAGLE_NCCL_GPU_PYTHON or this one; extra script arguments
    (e.g. --wheels .whl, --skip-engine) in $GPU_CHECK_ARGS."""
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA GPU here (nvidia-smi not found): run ci/gpu-check on a GPU machine")
    python = os.environ.get("SGLANG_EAGLE_NCCL_GPU_PYTHON", sys.executable)
    out = tmp_path / "out"
    cmd = [
        str(SCRIPT),
        "--python",
        python,
        "--out",
        str(out),
        "--work-dir",
        str(tmp_path / "work"),
        *shlex.split(os.environ.get("GPU_CHECK_ARGS", "")),
    ]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=560,
        env={k: v for k, v in os.environ.items() if k != "OUT"},
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    report = json.loads((out / "gpu-check.json").read_text())
    steps = {s["name"]: s for s in report["steps"]}
    assert report["mode"] == "gpu" and report["environment"]["torch"]["cuda_available"]
    preflight = steps["preflight"]
    assert preflight["status"] == "ok" and preflight["details"]["backend"] == "nccl"
    ranks = [p for p in preflight["details"]["nccl_processes"] if p["role"].startswith("preflight_TP")]
    assert ranks and all(p["confirmed"] and p["comm_inits_complete"] for p in ranks)
    native = steps["native-plugins"]
    assert native["status"] == "ok", native
    lines = native["details"]["nccl_plugin_lines"]
    assert any(line.startswith("Successfully loaded external env plugin") for line in lines)
    assert any(line.startswith("Successfully loaded external tuner plugin") for line in lines)
    assert any(t["nranks"] == 1 for t in native["details"]["tuner_inits"])
    if steps["engine"]["status"] != "skipped":
        assert steps["engine"]["status"] == "ok" and steps["engine"]["details"]["cuda_graph"] is True
