"""ci/gpu-check's pure parts (judging, requirements, helpers) and its argument handling: no torch,
no SGLang, milliseconds. The CPU rehearsal end to end and the GPU run are tier tests/gpu_check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.gpu_check_pkg import SCRIPT, gpu_check

common, environment, judging = gpu_check.common, gpu_check.environment, gpu_check.judging

PROFILE_ENV = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_BUFFSIZE": "16777216", "NCCL_DEBUG": "INFO"}


def _audit(
    *,
    verdict: str = "ok",
    disagreements: list[dict[str, Any]] = (),
    pids: dict[int, str] | None = None,
    problems: list[str] = (),
) -> dict[str, Any]:
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
        "pid": pid,
        "host": "h",
        "version": "2.27.7",
        "env": env,
        "warnings": [],
        "sources": [f"nccl.h.{pid}.log"],
        "comms": [{"completed": True, "nranks": 1, "channels": {"coll": 2}} for _ in range(comms)],
    }


def _dis(
    kind: str, severity: str, pid: int = 100, name: str | None = "NCCL_PROTO", **extra: Any
) -> dict[str, Any]:
    return {"kind": kind, "severity": severity, "pid": pid, "host": "h", "name": name, **extra}


# ------------------------------------------------------------------------------------------------
# pure judging
# ------------------------------------------------------------------------------------------------


def test_agreement_confirms_each_reported_profile_variable():
    audit = _audit(
        disagreements=[
            _dis("not_reported", "notice", name="NCCL_BUFFSIZE"),
            _dis("unverifiable", "info", name="NCCL_DEBUG"),
        ]
    )
    judged = judging.judge_nccl(
        audit,
        [_log(100, {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"})],
        PROFILE_ENV,
        required_pids={100: "preflight_TP0"},
        require_nccl=True,
        require_comm_inits=True,
    )
    assert judged["problems"] == []
    (proc,) = judged["processes"]
    assert proc["confirmed"] == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
    assert proc["not_reported"] == ["NCCL_BUFFSIZE"]
    assert proc["unverifiable"] == ["NCCL_DEBUG"]
    assert (proc["role"], proc["comm_inits_complete"]) == ("preflight_TP0", 1)


def test_a_value_nccl_read_differently_fails_and_is_not_confirmed():
    audit = _audit(
        disagreements=[_dis("different", "error", expected="LL", reported="Simple", detail="line 3")]
    )
    judged = judging.judge_nccl(
        audit, [_log(100, {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"})], PROFILE_ENV
    )
    assert len(judged["problems"]) == 1
    assert "different NCCL_PROTO" in judged["problems"][0] and "'Simple'" in judged["problems"][0]
    assert judged["processes"][0]["confirmed"] == {"NCCL_ALGO": "Ring"}


def test_nccl_in_a_process_the_plugin_never_saw_fails():
    audit = _audit(disagreements=[_dis("process_not_audited", "warning", pid=200, name=None)])
    judged = judging.judge_nccl(
        audit, [_log(100, {"NCCL_PROTO": "LL"}), _log(200, {"NCCL_PROTO": "LL"})], PROFILE_ENV
    )
    assert [p for p in judged["problems"] if "pid 200 (not audited): process_not_audited" in p]


def test_a_rank_without_nccl_file_or_without_any_confirmed_variable_fails():
    required = {100: "preflight_TP0", 101: "preflight_TP1"}
    judged = judging.judge_nccl(
        _audit(pids=required),
        [_log(100, {}, comms=0)],
        PROFILE_ENV,
        required_pids=required,
        require_nccl=True,
        require_comm_inits=True,
        nccl_dir="/d",
    )
    text = "\n".join(judged["problems"])
    assert "preflight_TP1 pid 101 left no NCCL debug file in /d" in text
    assert "pid 100 (preflight_TP0): NCCL logged no completed communicator init" in text
    assert "pid 100 (preflight_TP0): NCCL confirmed none of the profile's variables" in text


def test_no_nccl_file_at_all_fails_only_where_nccl_is_required():
    assert judging.judge_nccl(_audit(), [], PROFILE_ENV)["problems"] == []
    assert (
        "no NCCL debug file was written"
        in judging.judge_nccl(_audit(), [], PROFILE_ENV, require_nccl=True)["problems"][0]
    )


def test_a_failing_plugin_audit_fails_the_step():
    judged = judging.judge_nccl(
        _audit(verdict="fail", problems=["scheduler pid 7: NCCL_PROTO missing"]), [], PROFILE_ENV
    )
    assert judged["problems"] == ["plugin audit: scheduler pid 7: NCCL_PROTO missing"]
    assert judging.judge_nccl(None, [], PROFILE_ENV)["problems"] == ["the plugin's audit could not be read"]


def test_requirements_name_what_is_missing_and_the_fix():
    facts = {
        "python": "/x/python",
        "dists": {"sglang-eagle-nccl": None, "sglang": "0.5.17"},
        "torch": {"version": "2.13.0+cpu", "cuda_build": None},
        "imports": {
            "sglang_eagle_nccl": {
                "error": "ModuleNotFoundError: No module named 'sglang_eagle_nccl'",
                "missing": "sglang_eagle_nccl",
            },
            "sglang.srt.distributed.parallel_state": {
                "error": "ModuleNotFoundError: No module named 'zmq'",
                "missing": "zmq",
            },
        },
    }
    needs = environment.requirements(facts, mode="gpu", want_engine=True)
    text = "\n".join(needs["all"])
    assert "sglang-eagle-nccl) is not installed in /x/python" in text and "--wheels" in text
    assert "No module named 'zmq'; carry/install pyzmq" in text
    assert "CPU-only build" in text
    assert needs["engine"] == []  # nothing more is judged until the basics are there


def test_requirements_for_the_engine_on_a_gpu_name_sglang_kernel():
    facts = {
        "python": "/x/python",
        "dists": {"sglang-eagle-nccl": "0.1.0", "sglang": "0.5.17"},
        "torch": {"version": "2.11.0+cu130", "cuda_build": "13.0", "cuda_available": True, "devices": 1},
        "imports": {
            "sgl_kernel": {
                "error": "ModuleNotFoundError: No module named 'sgl_kernel'",
                "missing": "sgl_kernel",
            }
        },
    }
    needs = environment.requirements(facts, mode="gpu", want_engine=True)
    assert needs["all"] == []
    assert "carry/install sglang-kernel" in needs["engine"][0]
    assert environment.requirements(facts, mode="gpu", want_engine=False)["engine"] == []


def test_requirements_of_the_cpu_rehearsal_engine():
    facts = {
        "python": "p",
        "dists": {"sglang-eagle-nccl": "0.1.0", "sglang": "0.5.4"},
        "torch": {"version": "2.13"},
        "imports": {},
    }
    needs = environment.requirements(facts, mode="cpu-rehearsal", want_engine=True)
    assert needs["all"] == [] and "needs SGLang >= 0.5.23" in needs["engine"][0]


def test_helpers():
    assert environment.missing_module_hint(
        "ModuleNotFoundError: No module named 'sgl_kernel.allreduce'"
    ).startswith("sglang-kernel")
    assert environment.missing_module_hint("No module named 'msgspec'") == "msgspec"
    assert environment.missing_module_hint("ValueError: x") is None
    log = (
        "x\n[2026] Failed to execute general plugin: sglang_eagle_nccl\nTraceback (most recent call last):\n"
        "  File \"a.py\", line 1, in <module>\nImportError: cannot import name 'f' from 'm'\nrest\n"
    )
    assert judging.scan_plugin_failures(log) == [
        "Failed to execute general plugin: sglang_eagle_nccl (ImportError: cannot import name 'f' from 'm')"
    ]
    assert common.default_out_dir({"OUT": "/o"}) == Path("/o")
    assert common.default_out_dir({}) == Path.cwd() / "gpu-check-report"
    env, removed = common.scrubbed_environment(
        {"NCCL_PROTO": "LL", "SGLANG_EAGLE_NCCL": "p", "TORCH_NCCL_X": "1", "A": "b"}
    )
    assert (
        removed == ["NCCL_PROTO", "SGLANG_EAGLE_NCCL", "TORCH_NCCL_X"]
        and env["A"] == "b"
        and "NCCL_PROTO" not in env
    )
    steps = [common.Step("a", "a", status="ok"), common.Step("b", "b", status="missing")]
    assert judging.overall_exit(steps) == 2
    assert judging.overall_exit([*steps, common.Step("c", "c", status="fail")]) == 1
    assert (
        judging.overall_exit([common.Step("a", "a", status="ok"), common.Step("s", "s", status="skipped")])
        == 0
    )


def test_bad_arguments_exit_2_before_anything_runs(tmp_path):
    proc = subprocess.run(
        [str(SCRIPT), "--nccl-env", "NCCL_DEBUG=WARN", "--work-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "sets NCCL_DEBUG* itself" in proc.stderr


def test_missing_torch_and_plugin_are_named_with_exit_2(tmp_path):
    """A Python with neither torch nor the plugin: the report says what is missing, nothing runs."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            str(SCRIPT),
            "--python",
            sys.executable,
            "--check-only",
            "--out",
            str(out),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "OUT"},
    )
    report = json.loads((out / "gpu-check.json").read_text())
    if report["exit_code"] == 0:
        pytest.skip("this interpreter has torch with CUDA, SGLang and the plugin: nothing is missing")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert report["steps"][0]["status"] == "missing" and report["steps"][0]["problems"]
    assert "MISSING:" in proc.stdout and "INCOMPLETE" in (out / "gpu-check.txt").read_text()


# ------------------------------------------------------------------------------------------------
# step (d): the native plugins in a one-rank communicator (pure judging)
# ------------------------------------------------------------------------------------------------

LIB = "/v/site-packages/sglang_eagle_nccl/native/libsglang_eagle_nccl_nccl.so"
ENV_LOADED = f"Successfully loaded external env plugin {LIB}"
TUNER_LOADED = f"Successfully loaded external tuner plugin {LIB}"
IFNAME_READ = {
    "name": "NCCL_SOCKET_IFNAME",
    "value": "lo",
    "source": "profile",
    "environment": "lo",
    "disagrees": False,
}


def _native_audit(
    pid: int = 7,
    reads: list[dict[str, Any]] | None = None,
    tuner_inits: list[dict[str, Any]] = (),
    verdict: str = "ok",
) -> dict[str, Any]:
    return {
        "verdict": "ok",
        "processes": [{"pid": pid, "role": "child", "verdict": "ok"}],
        "nccl_reads": {
            f"h/b/1/{pid}/9": {
                "pid": pid,
                "reads": [IFNAME_READ] if reads is None else reads,
                "tuner_inits": list(tuner_inits),
                "verdict": verdict,
                "notes": ["n"],
            }
        },
    }


def _child(**extra: Any) -> dict[str, Any]:
    return {
        "pid": 7,
        "plugin_env": {"NCCL_ENV_PLUGIN": LIB, "NCCL_TUNER_PLUGIN": LIB},
        "comm_ok": False,
        **extra,
    }


def test_native_rehearsal_passes_with_the_env_plugin_loaded_and_the_read_audited():
    judged = judging.judge_native(
        _native_audit(),
        _child(comm_init_error="CUDA driver"),
        [ENV_LOADED],
        gpu=False,
        expected={"NCCL_SOCKET_IFNAME": "lo"},
    )
    assert judged["problems"] == []
    assert any("only inside communicator init" in n and "CUDA driver" in n for n in judged["notes"])
    assert judged["reads"] == [IFNAME_READ]


def test_native_fails_without_nccls_load_line_or_the_profiles_read():
    judged = judging.judge_native(
        _native_audit(reads=[{**IFNAME_READ, "value": "eth0", "source": "environment"}]),
        _child(),
        ["ENV/Plugin: Using something else"],
        gpu=False,
        expected={"NCCL_SOCKET_IFNAME": "lo"},
    )
    text = "\n".join(judged["problems"])
    assert f"NCCL did not log loading the env plugin {LIB}" in text
    assert "did not read NCCL_SOCKET_IFNAME=lo from the profile" in text and "eth0" in text


def test_native_fails_when_the_plugin_did_not_activate_or_has_no_library():
    audit = {"verdict": "ok", "processes": [], "nccl_reads": {}}
    judged = judging.judge_native(audit, {"pid": 7, "plugin_env": {}}, [], gpu=False, expected={})
    text = "\n".join(judged["problems"])
    assert "set no NCCL_ENV_PLUGIN" in text and "built without a C compiler" in text
    assert "no record of pid 7" in text and "nccl_reads has nothing for pid 7" in text


def test_native_reads_judged_fail_by_the_audit_fail_here():
    judged = judging.judge_native(
        _native_audit(verdict="fail"), _child(), [ENV_LOADED], gpu=False, expected={}
    )
    assert judged["problems"] == ["nccl_reads pid 7: n"]


def test_native_on_a_gpu_needs_the_communicator_and_the_tuner_loaded_and_initialised():
    ok = judging.judge_native(
        _native_audit(tuner_inits=[{"nranks": 1, "abi": 5}]),
        _child(comm_ok=True),
        [ENV_LOADED, TUNER_LOADED],
        gpu=True,
        expected={"NCCL_SOCKET_IFNAME": "lo"},
    )
    assert ok["problems"] == []
    bad = judging.judge_native(_native_audit(), _child(comm_ok=False), [ENV_LOADED], gpu=True, expected={})
    text = "\n".join(bad["problems"])
    assert "did not complete an all-reduce" in text
    assert f"NCCL did not log loading the tuner plugin {LIB}" in text and "no tuner_init" in text
    no_rules = judging.judge_native(
        _native_audit(),
        _child(comm_ok=True, plugin_env={"NCCL_ENV_PLUGIN": LIB}),
        [ENV_LOADED],
        gpu=True,
        expected={},
    )
    assert any("no NCCL_TUNER_PLUGIN" in p and "[[tuner.rules]]" in p for p in no_rules["problems"])


def test_plugin_lines_come_from_every_debug_file_without_the_prefix(tmp_path):
    (tmp_path / "nccl.h.1.log").write_text(
        f"h:1:1 [0] NCCL INFO NCCL_ENV_PLUGIN set by environment to {LIB}\n"
        "h:1:1 [0] NCCL INFO ENV/Plugin: Using sglang-eagle-nccl (v2)\n"
        f"h:1:1 [0] NCCL INFO {ENV_LOADED}\nh:1:1 [0] NCCL INFO cudaDriverVersion 13000\n"
    )
    (tmp_path / "nccl.h.2.log").write_text(f"h:2:9 [0] NCCL INFO {TUNER_LOADED}\n")
    assert gpu_check.native_step.plugin_lines(tmp_path) == [
        f"NCCL_ENV_PLUGIN set by environment to {LIB}",
        "ENV/Plugin: Using sglang-eagle-nccl (v2)",
        ENV_LOADED,
        TUNER_LOADED,
    ]
