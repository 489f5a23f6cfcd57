"""SGLang's own NCCL writes while it resolves its server arguments, on the real resolution code.

With ``--enable-deterministic-inference`` and TP > 1 SGLang sets ``NCCL_ALGO`` (and from 0.5.18
pins the channel count) for correctness. A profile that sets the same variables must never
override them silently: the launch is refused with a message offering ``sglang_wins`` (exit 2 from
SGLang's server CLI, ``CorrectnessConflict`` from a script), and accepted with it (SGLang's values
stay, and the audit says so: ⚠ with the note). No engine is started: the real argument parsing and
resolution of the installed SGLang run in a real process with the plugin enabled by environment.

Where resolution runs moved between releases (``ServerArgs.__post_init__`` up to 0.5.18,
``ServerArgs.resolve_once`` from 0.5.19), and the patch sets hook it per release; the compatibility
matrix proves statically that the hook reaches the write on every release, these tests prove it by
running on the releases with a CPU venv: 0.5.4 (set 0.4.3-0.5.4), 0.5.10 (0.5.5-0.5.10), 0.5.17 and
0.5.19 (0.5.11-0.5.20: the last release of ``__post_init__`` resolution in the light venvs, and the
first of ``resolve_once``), 0.5.23 (0.5.21-latest). ci/test runs this file in each of them.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sglang_eagle_nccl.offline.audit.judge import load_report
from sglang_eagle_nccl.offline.audit.read import read_launch

ARGS = [
    "--tp-size",
    "2",
    "--enable-deterministic-inference",
    "--device",
    "cpu",
    "--load-format",
    "dummy",
    "--skip-tokenizer-init",
    "--attention-backend",
    "triton",
]

SCRIPT = """
    import json, os, sys
    try:
        from sglang.srt.plugins import load_plugins  # what SGLang's own launchers do first (>= 0.5.11)
        load_plugins()
    except ImportError:
        pass
    from sglang.srt.server_args import prepare_server_args
    args = prepare_server_args(["--model-path", sys.argv[1]] + json.loads(sys.argv[2]))
    if hasattr(args, "resolve_once"):
        args.resolve_once()  # >= 0.5.19: resolution runs here, in the launcher
    print("RESOLVED " + json.dumps({k: os.environ.get(k) for k in ("NCCL_ALGO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")}),
          flush=True)
    if len(sys.argv) > 3:
        # The launcher's last step before it spawns: a launch, with its audit directory.
        from sglang.srt.entrypoints import engine
        engine._set_envs_and_config(args)
        print("LAUNCHED " + json.dumps({k: os.environ.get(k) for k in ("NCCL_ALGO", "NCCL_MAX_NCHANNELS")}))
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    from sglang_eagle_nccl.inproc.preflight_rank import write_tiny_config

    return write_tiny_config(str(tmp_path_factory.mktemp("model")))


def _resolve(env: dict, model: str, *, launch: bool = False) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-W", "ignore", "-c", textwrap.dedent(SCRIPT), model, json.dumps(ARGS)]
    return subprocess.run(
        argv + (["launch"] if launch else []), capture_output=True, text=True, env=env, timeout=300
    )


def _printed(proc: subprocess.CompletedProcess, tag: str) -> dict:
    assert f"{tag} " in proc.stdout, proc.stderr[-3000:]
    return json.loads(proc.stdout.split(f"{tag} ", 1)[1].splitlines()[0])


def _sglang_sets(plugin_env, model) -> dict:
    return _printed(_resolve(plugin_env, model), "RESOLVED")


def test_profile_overriding_deterministic_writes_is_refused(plugin_env, model_dir, tmp_path):
    sglang_sets = _sglang_sets(plugin_env, model_dir)  # what SGLang does without the plugin
    assert sglang_sets["NCCL_ALGO"] == "allreduce:tree"
    written = sorted(k for k, v in sglang_sets.items() if v is not None)
    proc = _resolve(dict(plugin_env, SGLANG_EAGLE_NCCL="pcie-8gpu"), model_dir)
    assert proc.returncode != 0 and "RESOLVED" not in proc.stdout
    err = proc.stderr
    assert "CorrectnessConflict" in err  # raised to the script that resolved the arguments
    assert "SGLang sets these NCCL variables for correctness" in err
    assert (
        "NCCL_ALGO: SGLang sets 'allreduce:tree' for --enable-deterministic-inference; the profile sets 'Ring'"
        in err
    )
    # The fix names every conflicting variable the seed profile sets, in each form a user can write it.
    conflicts = [k for k in written if k in ("NCCL_ALGO", "NCCL_MAX_NCHANNELS")]
    assert f"SGLANG_EAGLE_NCCL_SGLANG_WINS={','.join(conflicts)}" in err
    assert "or drop" in err and "Nothing was started" in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sglang_server_cli_refuses_with_exit_2(plugin_env, model_dir):
    """SGLang's own launcher with the same arguments: exit 2 before anything starts, the conflict on stderr."""
    argv = [
        sys.executable,
        "-W",
        "ignore",
        "-m",
        "sglang.launch_server",
        "--model-path",
        model_dir,
        *ARGS,
        "--host",
        "127.0.0.1",
        "--port",
        str(_free_port()),
    ]
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=dict(plugin_env, SGLANG_EAGLE_NCCL="pcie-8gpu"), timeout=300
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "NCCL_ALGO: SGLang sets 'allreduce:tree' for --enable-deterministic-inference" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_sglang_wins_keeps_sglangs_values_and_the_audit_says_so(plugin_env, model_dir):
    sglang_sets = _sglang_sets(plugin_env, model_dir)
    kept = [k for k in ("NCCL_ALGO", "NCCL_MAX_NCHANNELS") if sglang_sets.get(k) is not None]
    env = dict(plugin_env, SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_SGLANG_WINS=",".join(kept))
    proc = _resolve(env, model_dir, launch=True)
    after = _printed(proc, "RESOLVED")
    for name, sglang_value in sglang_sets.items():
        # SGLang's value wherever it wrote one (kept by sglang_wins); the profile's elsewhere
        # (SGLang < 0.5.18 does not pin the channel count).
        assert after[name] == (
            sglang_value if sglang_value is not None else {"NCCL_MAX_NCHANNELS": "16"}.get(name)
        ), name
    # The write is reported as SGLang's, during argument resolution.
    assert "SGLang set NCCL_ALGO=allreduce:tree while resolving its server arguments" in proc.stderr
    # ... and SGLang's launcher keeps it: the children inherit SGLang's value, not the profile's.
    assert _printed(proc, "LAUNCHED")["NCCL_ALGO"] == "allreduce:tree"

    report = load_report(Path(env["SGLANG_EAGLE_NCCL_AUDIT_DIR"]))
    _, procs = read_launch(report.run_dir)
    (launcher,) = [p for p in procs if p.first("env_restored")]
    (resolution,) = [r for r in launcher.events("sglang_env_writes") if r["where"] == "server_args"]
    writes = {w["name"]: w for w in resolution["writes"]}
    assert writes["NCCL_ALGO"]["after"] == "allreduce:tree"
    assert writes["NCCL_ALGO"]["for_correctness"] == "enable_deterministic_inference"
    judged = next(p for p in report.processes if p.pid == launcher.pid)
    assert judged.verdict == "warn", (judged.verdict, judged.notes)  # ⚠: in force, with SGLang's value kept
    assert "kept SGLang's NCCL_ALGO=allreduce:tree (policy sglang_wins; profile Ring)" in judged.notes


def test_profile_without_those_variables_is_untouched(plugin_env, model_dir):
    proc = _resolve(dict(plugin_env, SGLANG_EAGLE_NCCL="audit-only"), model_dir)
    assert _printed(proc, "RESOLVED")["NCCL_ALGO"] == "allreduce:tree"
