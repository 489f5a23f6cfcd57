"""SGLang's own NCCL writes while it resolves its server arguments, on the real resolution code.

With ``--enable-deterministic-inference`` and TP > 1 SGLang sets ``NCCL_ALGO`` (and from 0.5.18
pins the channel count) for correctness. A profile that sets the same variables must never
override them silently: the launch is refused with a message offering ``sglang_wins``, and
accepted with it (SGLang's values stay). No engine is started: the real argument parsing and
resolution of the installed SGLang run in a real process with the plugin enabled by environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = """
    import json, os, sys
    try:
        from sglang.srt.plugins import load_plugins  # what SGLang's own launchers do first (>= 0.5.11)
        load_plugins()
    except ImportError:
        pass
    from sglang.srt.server_args import prepare_server_args
    args = prepare_server_args([
        "--model-path", sys.argv[1], "--tp-size", "2", "--enable-deterministic-inference", "--device", "cpu",
        "--load-format", "dummy", "--skip-tokenizer-init", "--attention-backend", "triton",
    ])
    if hasattr(args, "resolve_once"):
        args.resolve_once()  # >= 0.5.20: resolution runs here, in the launcher
    print("RESOLVED " + json.dumps({k: os.environ.get(k) for k in ("NCCL_ALGO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")}))
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    from sglang_eagle_nccl.inproc.preflight_rank import write_tiny_config

    return write_tiny_config(str(tmp_path_factory.mktemp("model")))


def _resolve(env: dict, model: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "ignore", "-c", textwrap.dedent(SCRIPT), model], capture_output=True,
                          text=True, env=env, timeout=300)


def _sglang_sets(plugin_env, model) -> dict:
    proc = _resolve(plugin_env, model)
    assert "RESOLVED" in proc.stdout, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RESOLVED ", 1)[1].splitlines()[0])


def test_profile_overriding_deterministic_writes_is_refused(plugin_env, model_dir, tmp_path):
    sglang_sets = _sglang_sets(plugin_env, model_dir)  # what SGLang does without the plugin
    assert sglang_sets["NCCL_ALGO"] == "allreduce:tree"
    written = sorted(k for k, v in sglang_sets.items() if v is not None)
    proc = _resolve(dict(plugin_env, SGLANG_EAGLE_NCCL="pcie-8gpu"), model_dir)
    assert proc.returncode != 0 and "RESOLVED" not in proc.stdout
    err = proc.stderr
    assert "SGLang sets these NCCL variables for correctness" in err
    assert "NCCL_ALGO: SGLang sets 'allreduce:tree' for --enable-deterministic-inference; the profile sets 'Ring'" in err
    # The fix names every conflicting variable the seed profile sets, in each form a user can write it.
    conflicts = [k for k in written if k in ("NCCL_ALGO", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS") and k in
                 ("NCCL_ALGO", "NCCL_MAX_NCHANNELS")]
    assert f"SGLANG_EAGLE_NCCL_SGLANG_WINS={','.join(conflicts)}" in err
    assert "or drop" in err and "Nothing was started" in err


def test_sglang_wins_keeps_sglangs_values(plugin_env, model_dir):
    sglang_sets = _sglang_sets(plugin_env, model_dir)
    kept = ",".join(k for k in ("NCCL_ALGO", "NCCL_MAX_NCHANNELS") if sglang_sets.get(k) is not None)
    proc = _resolve(dict(plugin_env, SGLANG_EAGLE_NCCL="pcie-8gpu", SGLANG_EAGLE_NCCL_SGLANG_WINS=kept), model_dir)
    assert "RESOLVED" in proc.stdout, proc.stderr[-3000:]
    after = json.loads(proc.stdout.split("RESOLVED ", 1)[1].splitlines()[0])
    for name, sglang_value in sglang_sets.items():
        # SGLang's value wherever it wrote one (kept by sglang_wins); the profile's elsewhere
        # (SGLang < 0.5.18 does not pin the channel count).
        assert after[name] == (sglang_value if sglang_value is not None else {"NCCL_MAX_NCHANNELS": "16"}.get(name)), name
    # The write is reported as SGLang's, during argument resolution.
    assert "SGLang set NCCL_ALGO=allreduce:tree while resolving its server arguments" in proc.stderr


def test_profile_without_those_variables_is_untouched(plugin_env, model_dir):
    proc = _resolve(dict(plugin_env, SGLANG_EAGLE_NCCL="audit-only"), model_dir)
    assert "RESOLVED" in proc.stdout, proc.stderr[-3000:]
    assert json.loads(proc.stdout.split("RESOLVED ", 1)[1].splitlines()[0])["NCCL_ALGO"] == "allreduce:tree"
