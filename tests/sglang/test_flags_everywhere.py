"""The launch flags wherever SGLang's server arguments are parsed, once SGLANG_EAGLE_NCCL is set:
a custom script calling ``prepare_server_args`` and SGLang's benchmark scripts, which never call
SGLang's plugin loader. Without the variable they give SGLang's own argparse error (README)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.metadata import version

import pytest
from packaging.version import Version

SGLANG = Version(version("sglang"))
# 0.5.23 moved the benchmark scripts into sglang.benchmark (the old module names are thin stubs).
# offline_throughput builds its parser the same way, but importing it needs Hugging Face `datasets`,
# which the CPU test venvs do not carry; one_batch is the one run here.
BENCH = ["sglang.benchmark.one_batch"] if SGLANG.release >= (0, 5, 23) else ["sglang.bench_one_batch"]

CUSTOM = """
    import json, os, sys
    from sglang.srt.server_args import prepare_server_args
    args = prepare_server_args(["--model-path", sys.argv[1], "--nccl-profile", "pcie-8gpu",
                                "--nccl-env", "NCCL_ALGO=Tree", "--device", "cpu"])
    from sglang_eagle_nccl.inproc.boot.state import STATE
    print("PARSED " + json.dumps({"NCCL_ALGO": os.environ.get("NCCL_ALGO"), "NCCL_PROTO": os.environ.get("NCCL_PROTO"),
                                  "active": STATE.active, "profile": (STATE.data or {}).get("name")}))
"""


def test_custom_script_gets_the_flags_with_the_gate(plugin_env, tmp_path):
    from sglang_eagle_nccl.inproc.preflight_rank import write_tiny_config

    model = write_tiny_config(str(tmp_path / "model"))
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(CUSTOM), model],
        capture_output=True,
        text=True,
        env=dict(plugin_env, SGLANG_EAGLE_NCCL="1"),
        timeout=300,
    )
    assert "PARSED" in proc.stdout, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("PARSED ", 1)[1].splitlines()[0])
    assert out == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL", "active": True, "profile": "pcie-8gpu+flags"}


def test_custom_script_without_the_gate_gets_sglangs_argparse_error(plugin_env, tmp_path):
    from sglang_eagle_nccl.inproc.preflight_rank import write_tiny_config

    model = write_tiny_config(str(tmp_path / "model"))
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(CUSTOM), model],
        capture_output=True,
        text=True,
        env=plugin_env,
        timeout=300,
    )
    assert proc.returncode == 2 and "unrecognized arguments: --nccl-profile" in proc.stderr


@pytest.mark.parametrize("module", BENCH)
def test_benchmark_scripts_list_the_flags_with_the_gate(plugin_env, module):
    cmd = [sys.executable, "-W", "ignore", "-m", module, "--help"]
    gated = subprocess.run(
        cmd, capture_output=True, text=True, env=dict(plugin_env, SGLANG_EAGLE_NCCL="1"), timeout=300
    )
    assert gated.returncode == 0, gated.stderr[-2000:]
    assert "--nccl-profile" in gated.stdout and "--nccl-env" in gated.stdout
    plain = subprocess.run(cmd, capture_output=True, text=True, env=plugin_env, timeout=300)
    assert "--nccl-profile" not in plain.stdout  # they never call SGLang's plugin loader
