"""ci/gpu-check: the GPU verification script (NCCL's debug output against the plugin's audit).

Three tiers:
  * its pure judging code (``judge_nccl``, ``requirements``, ...), everywhere, in milliseconds;
  * ``ci/gpu-check --cpu-rehearsal`` end to end in the SGLang 0.5.23 CPU venv of ci/sglang_venv.py
    (skipped when that venv is not built), with this checkout's plugin wheel layered over it through
    ``--wheels`` -- the same install path the GPU machine uses;
  * ``ci/gpu-check`` in GPU mode, marked ``gpu``: it runs only where an NVIDIA GPU is visible.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
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

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "ci" / "gpu-check"


def _load_gpu_check() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "ci" / "gpu_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


gc = _load_gpu_check()

PROFILE_ENV = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_BUFFSIZE": "16777216", "NCCL_DEBUG": "INFO"}


def _audit(*, verdict: str = "ok", disagreements: list[dict[str, Any]] = (), pids: dict[int, str] | None = None,
           problems: list[str] = ()) -> dict[str, Any]:
    pids = {100: "preflight_TP0"} if pids is None else pids
    return {
        "verdict": verdict,
        "problems": list(problems),
        "processes": [{"pid": pid, "role": role, "verdict": "ok"} for pid, role in pids.items()],
        "communicators": [],
        "eagle": [],
        "nccl_debug": {"disagreements": list(disagreements)},
    }


def _log(pid: int, env: dict[str, str], *, comms: int = 1) -> dict[str, Any]:
    return {
        "pid": pid, "host": "h", "version": "2.27.7", "env": env, "warnings": [], "sources": [f"nccl.h.{pid}.log"],
        "comms": [{"completed": True, "nranks": 1, "channels": {"coll": 2}} for _ in range(comms)],
    }


def _dis(kind: str, severity: str, pid: int = 100, name: str | None = "NCCL_PROTO", **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "severity": severity, "pid": pid, "host": "h", "name": name, **extra}


# ------------------------------------------------------------------------------------------------
# pure judging
# ------------------------------------------------------------------------------------------------


def test_agreement_confirms_each_reported_profile_variable():
    audit = _audit(disagreements=[_dis("not_reported", "notice", name="NCCL_BUFFSIZE"),
                                  _dis("unverifiable", "info", name="NCCL_DEBUG")])
    judged = gc.judge_nccl(audit, [_log(100, {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"})], PROFILE_ENV,
                           required_pids={100: "preflight_TP0"}, require_nccl=True, require_comm_inits=True)
    assert judged["problems"] == []
    (proc,) = judged["processes"]
    assert proc["confirmed"] == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
    assert proc["not_reported"] == ["NCCL_BUFFSIZE"]
    assert proc["unverifiable"] == ["NCCL_DEBUG"]
    assert (proc["role"], proc["comm_inits_complete"]) == ("preflight_TP0", 1)


def test_a_value_nccl_read_differently_fails_and_is_not_confirmed():
    audit = _audit(disagreements=[_dis("different", "error", expected="LL", reported="Simple", detail="line 3")])
    judged = gc.judge_nccl(audit, [_log(100, {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"})], PROFILE_ENV)
    assert len(judged["problems"]) == 1
    assert "different NCCL_PROTO" in judged["problems"][0] and "'Simple'" in judged["problems"][0]
    assert judged["processes"][0]["confirmed"] == {"NCCL_ALGO": "Ring"}


def test_nccl_in_a_process_the_plugin_never_saw_fails():
    audit = _audit(disagreements=[_dis("process_not_audited", "warning", pid=200, name=None)])
    judged = gc.judge_nccl(audit, [_log(100, {"NCCL_PROTO": "LL"}), _log(200, {"NCCL_PROTO": "LL"})], PROFILE_ENV)
    assert [p for p in judged["problems"] if "pid 200 (not audited): process_not_audited" in p]


def test_a_rank_without_nccl_file_or_without_any_confirmed_variable_fails():
    required = {100: "preflight_TP0", 101: "preflight_TP1"}
    judged = gc.judge_nccl(_audit(pids=required), [_log(100, {}, comms=0)], PROFILE_ENV, required_pids=required,
                           require_nccl=True, require_comm_inits=True, nccl_dir="/d")
    text = "\n".join(judged["problems"])
    assert "preflight_TP1 pid 101 left no NCCL debug file in /d" in text
    assert "pid 100 (preflight_TP0): NCCL logged no completed communicator init" in text
    assert "pid 100 (preflight_TP0): NCCL confirmed none of the profile's variables" in text


def test_no_nccl_file_at_all_fails_only_where_nccl_is_required():
    assert gc.judge_nccl(_audit(), [], PROFILE_ENV)["problems"] == []
    assert "no NCCL debug file was written" in gc.judge_nccl(_audit(), [], PROFILE_ENV, require_nccl=True)["problems"][0]


def test_a_failing_plugin_audit_fails_the_step():
    judged = gc.judge_nccl(_audit(verdict="fail", problems=["scheduler pid 7: NCCL_PROTO missing"]), [], PROFILE_ENV)
    assert judged["problems"] == ["plugin audit: scheduler pid 7: NCCL_PROTO missing"]
    assert gc.judge_nccl(None, [], PROFILE_ENV)["problems"] == ["the plugin's audit could not be read"]


def test_requirements_name_what_is_missing_and_the_fix():
    facts = {
        "python": "/x/python", "dists": {"sglang-eagle-nccl": None, "sglang": "0.5.17"},
        "torch": {"version": "2.13.0+cpu", "cuda_build": None},
        "imports": {"sglang_eagle_nccl": {"error": "ModuleNotFoundError: No module named 'sglang_eagle_nccl'",
                                          "missing": "sglang_eagle_nccl"},
                    "sglang.srt.distributed.parallel_state": {"error": "ModuleNotFoundError: No module named 'zmq'",
                                                              "missing": "zmq"}},
    }
    needs = gc.requirements(facts, mode="gpu", want_engine=True)
    text = "\n".join(needs["all"])
    assert "sglang-eagle-nccl) is not installed in /x/python" in text and "--wheels" in text
    assert "No module named 'zmq'; carry/install pyzmq" in text
    assert "CPU-only build" in text
    assert needs["engine"] == []  # nothing more is judged until the basics are there


def test_requirements_for_the_engine_on_a_gpu_name_sglang_kernel():
    facts = {
        "python": "/x/python", "dists": {"sglang-eagle-nccl": "0.1.0", "sglang": "0.5.17"},
        "torch": {"version": "2.11.0+cu130", "cuda_build": "13.0", "cuda_available": True, "devices": 1},
        "imports": {"sgl_kernel": {"error": "ModuleNotFoundError: No module named 'sgl_kernel'", "missing": "sgl_kernel"}},
    }
    needs = gc.requirements(facts, mode="gpu", want_engine=True)
    assert needs["all"] == []
    assert "carry/install sglang-kernel" in needs["engine"][0]
    assert gc.requirements(facts, mode="gpu", want_engine=False)["engine"] == []


def test_requirements_of_the_cpu_rehearsal_engine():
    facts = {"python": "p", "dists": {"sglang-eagle-nccl": "0.1.0", "sglang": "0.5.4"}, "torch": {"version": "2.13"},
             "imports": {}}
    needs = gc.requirements(facts, mode="cpu-rehearsal", want_engine=True)
    assert needs["all"] == [] and "needs SGLang >= 0.5.23" in needs["engine"][0]


def test_helpers():
    assert gc.missing_module_hint("ModuleNotFoundError: No module named 'sgl_kernel.allreduce'").startswith("sglang-kernel")
    assert gc.missing_module_hint("No module named 'msgspec'") == "msgspec"
    assert gc.missing_module_hint("ValueError: x") is None
    log = ("x\n[2026] Failed to execute general plugin: sglang_eagle_nccl\nTraceback (most recent call last):\n"
           '  File "a.py", line 1, in <module>\nImportError: cannot import name \'f\' from \'m\'\nrest\n')
    assert gc.scan_plugin_failures(log) == [
        "Failed to execute general plugin: sglang_eagle_nccl (ImportError: cannot import name 'f' from 'm')"]
    assert gc.default_out_dir({"OUT": "/o"}) == Path("/o")
    assert gc.default_out_dir({}) == Path.cwd() / "gpu-check-report"
    env, removed = gc.scrubbed_environment({"NCCL_PROTO": "LL", "SGLANG_EAGLE_NCCL": "p", "TORCH_NCCL_X": "1", "A": "b"})
    assert removed == ["NCCL_PROTO", "SGLANG_EAGLE_NCCL", "TORCH_NCCL_X"] and env["A"] == "b" and "NCCL_PROTO" not in env
    steps = [gc.Step("a", "a", status="ok"), gc.Step("b", "b", status="missing")]
    assert gc.overall_exit(steps) == 2
    assert gc.overall_exit([*steps, gc.Step("c", "c", status="fail")]) == 1
    assert gc.overall_exit([gc.Step("a", "a", status="ok"), gc.Step("s", "s", status="skipped")]) == 0


def test_bad_arguments_exit_2_before_anything_runs(tmp_path):
    proc = subprocess.run([str(SCRIPT), "--nccl-env", "NCCL_DEBUG=WARN", "--work-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "sets NCCL_DEBUG* itself" in proc.stderr


def test_missing_torch_and_plugin_are_named_with_exit_2(tmp_path):
    """A Python with neither torch nor the plugin: the report says what is missing, nothing runs."""
    out = tmp_path / "out"
    proc = subprocess.run([str(SCRIPT), "--python", sys.executable, "--check-only", "--out", str(out),
                           "--work-dir", str(tmp_path / "work")], capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "OUT"})
    report = json.loads((out / "gpu-check.json").read_text())
    if report["exit_code"] == 0:
        pytest.skip("this interpreter has torch with CUDA, SGLang and the plugin: nothing is missing")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert report["steps"][0]["status"] == "missing" and report["steps"][0]["problems"]
    assert "MISSING:" in proc.stdout and "INCOMPLETE" in (out / "gpu-check.txt").read_text()


# ------------------------------------------------------------------------------------------------
# CPU rehearsal, end to end
# ------------------------------------------------------------------------------------------------


def _has_sglang_with_standins(python: str) -> bool:
    code = ("import importlib.metadata as m, importlib.util as u, sys; "
            "v = tuple(int(x) for x in m.version('sglang').split('.')[:3] if x.isdigit()); "
            "sys.exit(0 if v >= (0, 5, 23) and u.find_spec('sglang_cpu_standins') else 1)")
    return subprocess.run([python, "-c", code], capture_output=True, timeout=120).returncode == 0


def _rehearsal_python() -> str | None:
    """This interpreter if it is an SGLang >= 0.5.23 CPU venv, else the one ci/sglang_venv.py built."""
    if _has_sglang_with_standins(sys.executable):
        return sys.executable
    sys.path.insert(0, str(REPO / "ci"))
    try:
        import sglang_venv
    finally:
        sys.path.pop(0)
    python = sglang_venv.venv_dir("0.5.23") / "bin" / "python"
    return str(python) if python.exists() and _has_sglang_with_standins(str(python)) else None


def _libnccl_here() -> Path | None:
    try:
        lib = Path(str(importlib.metadata.distribution("nvidia-nccl-cu13").locate_file("nvidia/nccl/lib/libnccl.so.2")))
    except importlib.metadata.PackageNotFoundError:
        return None
    return lib if lib.is_file() else None


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory) -> dict[str, Any]:
    python = _rehearsal_python()
    if python is None:
        pytest.skip("no SGLang >= 0.5.23 CPU venv: python3 ci/sglang_venv.py build 0.5.23")
    from support.wheel_env import build_wheel

    base = tmp_path_factory.mktemp("gpu-check")
    wheels = base / "wheels"
    build_wheel(wheels)
    cmd = [str(SCRIPT), "--cpu-rehearsal", "--python", python, "--wheels", str(wheels),
           "--out", str(base / "out"), "--work-dir", str(base / "work")]
    lib = _libnccl_here()
    if lib is not None:  # else the script looks for the wheel in the checked Python itself
        cmd += ["--nccl-lib", str(lib)]
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    report_path = base / "out" / "gpu-check.json"
    assert report_path.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(report_path.read_text())
    return {"proc": proc, "report": report, "out": base / "out", "work": base / "work",
            "steps": {s["name"]: s for s in report["steps"]}}


@pytest.mark.sglang
@pytest.mark.e2e
def test_rehearsal_passes_and_writes_the_report(rehearsal):
    proc, report, out = rehearsal["proc"], rehearsal["report"], rehearsal["out"]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert (report["mode"], report["exit_code"], report["ok"]) == ("cpu-rehearsal", 0, True)
    assert list(rehearsal["steps"]) == ["environment", "profile", "preflight", "engine", "nccl-probe"]
    assert set(report["timings"]) == {"environment", "profile", "preflight", "engine", "nccl-probe"}
    # Checked with this checkout's plugin, installed from its wheel into the overlay venv.
    env_step = rehearsal["steps"]["environment"]
    assert env_step["details"]["python"].endswith("venv/bin/python") and env_step["details"]["wheels"]
    assert report["environment"]["plugin_pth"], "the overlay venv must process the plugin's .pth"
    assert report["profile"]["resolved_env"]["NCCL_PROTO"] == "LL"  # pcie-8gpu
    text = (out / "gpu-check.txt").read_text()
    assert text.startswith("gpu-check (cpu-rehearsal): PASS (exit 0)")
    for title in ("(a) preflight --tp 1, gloo", "(b) SGLang engine", "(c) real libnccl.so.2"):
        assert title in text
    # Progress with timings, one line per step.
    assert "[gpu-check" in proc.stdout and "(a) preflight --tp 1, gloo, one collective per group: OK in" in proc.stdout
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
    assert [p["role"] for p in audit["processes"] if p["role"].startswith("preflight_TP")] == ["preflight_TP0"]
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
    assert audit["verdict"] in ("ok", "warn") and "launcher" in roles and any(r.startswith("scheduler") for r in roles)
    assert audit["eagle"] and audit["eagle"][0]["worker"]


@pytest.mark.sglang
@pytest.mark.e2e
def test_rehearsal_real_nccl_output_agrees_with_the_audit(rehearsal):
    step = rehearsal["steps"]["nccl-probe"]
    if step["status"] == "skipped":
        assert "nvidia-nccl-cu13" in " ".join(step["notes"])
        pytest.skip("nvidia-nccl-cu13 is not installed: step (c) was skipped, as reported")
    assert step["status"] == "ok", step
    (proc,) = step["details"]["nccl_processes"]
    assert proc["pid"] == step["details"]["probe"]["pid"]
    assert proc["role"] == "launcher"  # the plugin activated in the probe process and audited it
    assert proc["confirmed"] == {"NCCL_SOCKET_IFNAME": "lo"}
    assert "NCCL_PROTO" in proc["not_reported"]
    assert step["details"]["nccl_version"].startswith("2.")


@pytest.mark.sglang
@pytest.mark.e2e
def test_rehearsal_report_code_fails_on_tampered_nccl_output(rehearsal, tmp_path):
    """Negative control: NCCL's real probe output, edited so NCCL 'read' another interface than the
    plugin applied, must fail through the same audit CLI and judging code."""
    step = rehearsal["steps"]["nccl-probe"]
    if step["status"] != "ok":
        pytest.skip("step (c) did not run")
    source = Path(step["details"]["nccl_dir"])
    tampered = tmp_path / "nccl"
    tampered.mkdir()
    for path in source.iterdir():
        (tampered / path.name).write_text(path.read_text().replace("set by environment to lo", "set by environment to eth9"))
    work = rehearsal["work"]
    opts = gc.Options(mode="cpu-rehearsal", python=None, wheels=None, out=tmp_path / "out", work=tmp_path,
                      profile="pcie-8gpu", nccl_env=[], skip_engine=False, check_only=True, nccl_lib=None, budget_s=300)
    env, _ = gc.scrubbed_environment()
    ctx = gc.Context(opts, str(work / "venv" / "bin" / "python"), env, gc.Progress())
    audit, logs, problem = gc.audit_and_parse(ctx, "tampered", work / "nccl-probe" / "audit", tampered)
    assert problem == "" and audit is not None and logs
    judged = gc.judge_nccl(audit, logs, {"NCCL_SOCKET_IFNAME": "lo"}, required_pids={logs[0]["pid"]: "probe"})
    text = "\n".join(judged["problems"])
    assert "NCCL_SOCKET_IFNAME" in text and "eth9" in text, judged
    assert "NCCL confirmed none of the profile's variables" in text


# ------------------------------------------------------------------------------------------------
# on a real GPU
# ------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_check_on_a_gpu(tmp_path):
    """The real thing: preflight over NCCL, the CUDA engine with EAGLE-3 and CUDA graphs, NCCL's own
    report per process. Python: $SGLANG_EAGLE_NCCL_GPU_PYTHON or this one; extra script arguments
    (e.g. --wheels .whl, --skip-engine) in $GPU_CHECK_ARGS."""
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA GPU here (nvidia-smi not found): run ci/gpu-check on a GPU machine")
    python = os.environ.get("SGLANG_EAGLE_NCCL_GPU_PYTHON", sys.executable)
    out = tmp_path / "out"
    cmd = [str(SCRIPT), "--python", python, "--out", str(out), "--work-dir", str(tmp_path / "work"),
           *shlex.split(os.environ.get("GPU_CHECK_ARGS", ""))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=560,
                          env={k: v for k, v in os.environ.items() if k != "OUT"})
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    report = json.loads((out / "gpu-check.json").read_text())
    steps = {s["name"]: s for s in report["steps"]}
    assert report["mode"] == "gpu" and report["environment"]["torch"]["cuda_available"]
    preflight = steps["preflight"]
    assert preflight["status"] == "ok" and preflight["details"]["backend"] == "nccl"
    ranks = [p for p in preflight["details"]["nccl_processes"] if p["role"].startswith("preflight_TP")]
    assert ranks and all(p["confirmed"] and p["comm_inits_complete"] for p in ranks)
    if steps["engine"]["status"] != "skipped":
        assert steps["engine"]["status"] == "ok" and steps["engine"]["details"]["cuda_graph"] is True
