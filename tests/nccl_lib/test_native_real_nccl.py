"""The env plugin loaded by the real libnccl of the pinned nvidia-nccl-cu13 wheel, on CPU.

A spawned child (tests/probes/env_plugin_probe.py) configures the library the way activation does,
then something in the process overwrites the profile's NCCL_SOCKET_IFNAME (os.environ, or libc
setenv behind Python's back), then ncclGetUniqueId loads the plugin and reads through it. NCCL's
own debug output and the plugin's reads log must both show the profile's value.

What cannot be tested without a GPU: NCCL loads a tuner plugin only inside communicator init,
which fails on CPU before that point (cudaGetDevice), and a one-rank communicator never calls
getCollInfo anyway. Here the tuner is checked as far as the CPU allows: the real libnccl looks
up exactly the symbol names the library exports; test_native_tuner.py drives every exported
tuner ABI the way NCCL does. ci/gpu-check loads both plugins into a real communicator.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_eagle_nccl.knowledge.nccl.debug_log import parse_dir
from sglang_eagle_nccl.native import build, library
from support.jsonl import read_jsonl

pytestmark = pytest.mark.nccl_lib

NCCL_WHEEL = "nvidia-nccl-cu13"
NCCL_VERSION = "2.32.3"  # the pinned wheel these facts were checked against
PROBE = Path(__file__).resolve().parent.parent / "probes" / "env_plugin_probe.py"


@pytest.fixture(scope="module")
def libnccl() -> Path:
    try:
        dist = importlib.metadata.distribution(NCCL_WHEEL)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{NCCL_WHEEL} is not installed (pip install {NCCL_WHEEL}=={NCCL_VERSION})")
    lib = Path(str(dist.locate_file("nvidia/nccl/lib/libnccl.so.2")))
    assert lib.is_file(), f"{NCCL_WHEEL} is installed but {lib} is missing"
    assert dist.version == NCCL_VERSION, (
        f"tests are pinned to {NCCL_WHEEL}=={NCCL_VERSION}, found {dist.version}"
    )
    return lib


@pytest.fixture(scope="module")
def v1_only_library(tmp_path_factory) -> Path:
    """The library built without ncclEnvPlugin_v2 (-DSEN_NO_ENV_V2): NCCL 2.32 must fall back to v1."""
    out = tmp_path_factory.mktemp("v1only") / build.LIBRARY_NAME
    info = build.compile_library(out, defines=["SEN_NO_ENV_V2"])
    if not info.built:
        pytest.skip(f"cannot build the v1-only variant: {info.reason}")
    assert library.load(out).exported_abis()["env"] == [1]
    return out


def run_probe(libnccl: Path, plugin: Path, tmp_path: Path, mode: str) -> tuple[dict, str, Path]:
    logs = tmp_path / "nccl"
    logs.mkdir()
    empty_conf = tmp_path / "empty.conf"  # keep ~/.nccl.conf out of the picture
    empty_conf.write_text("")
    reads_log = tmp_path / "nccl_reads.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SGLANG_EAGLE_NCCL"))}
    env.update(
        NCCL_DEBUG="INFO",
        NCCL_DEBUG_SUBSYS="INIT,ENV",
        NCCL_DEBUG_FILE=str(logs / "nccl.%h.%p.log"),
        NCCL_CONF_FILE=str(empty_conf),
    )
    proc = subprocess.run(
        [sys.executable, str(PROBE), str(libnccl), str(plugin), str(reads_log), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    text = "".join(p.read_text() for p in sorted(logs.iterdir()))
    (log,) = parse_dir(logs)
    assert log.pid == result["pid"]
    assert log.env["NCCL_SOCKET_IFNAME"] == "lo"  # NCCL: "NCCL_SOCKET_IFNAME set by environment to lo"
    return result, text, reads_log


def check_reads(reads_log: Path, abi: str) -> list[dict]:
    records = read_jsonl(reads_log)
    init = records[0]
    assert (init["event"], init["abi"], init["nccl_version"]) == ("env_init", abi, NCCL_VERSION)
    ifname = [r for r in records if r["event"] == "read" and r["name"] == "NCCL_SOCKET_IFNAME"]
    assert [(r["value"], r["source"], r["environment"], r["disagrees"]) for r in ifname] == [
        ("lo", "profile", "bogus0", True)
    ]
    names = {r["name"] for r in records if r["event"] == "read"}
    assert {"NCCL_COMM_ID", "NCCL_SOCKET_FAMILY", "NCCL_SOCKET_IFNAME"} <= names
    # Python's flush, then NCCL's finalize at exit: both cumulative, NCCL's is last.
    counts = [r for r in records if r["event"] == "counts"]
    assert len(counts) == 2 and all(r["pid"] == init["pid"] for r in records)
    return records


@pytest.mark.parametrize("mode", ["os.environ", "setenv"])
def test_real_nccl_reads_the_profile_through_the_v2_env_plugin(native_lib, libnccl, tmp_path, mode):
    plugin = native_lib.path
    result, text, reads_log = run_probe(libnccl, plugin, tmp_path, mode)
    assert result["unique_id_rc"] == 0 and result["log_error"] is None and result["flush_error"] is None
    assert f"Successfully loaded external env plugin {plugin}" in text
    assert "ENV/Plugin: Using sglang-eagle-nccl (v2)" in text
    assert (result["plugin_abi"], result["nccl_version"]) == ("v2", NCCL_VERSION)
    check_reads(reads_log, "v2")


@pytest.mark.parametrize("mode", ["os.environ", "setenv"])
def test_real_nccl_falls_back_to_the_v1_env_plugin(v1_only_library, libnccl, tmp_path, mode):
    result, text, reads_log = run_probe(libnccl, v1_only_library, tmp_path, mode)
    assert f"Successfully loaded external env plugin {v1_only_library}" in text
    assert "ENV/Plugin: Using sglang-eagle-nccl (v1)" in text
    assert result["plugin_abi"] == "v1"
    check_reads(reads_log, "v1")


def test_real_nccl_looks_up_exactly_the_symbols_the_library_exports(native_lib, libnccl):
    # NCCL finds plugins by dlsym of these names (src/plugin/env/env_v*.cc, src/plugin/tuner/tuner_v*.cc).
    binary = libnccl.read_bytes()
    exported = native_lib.exported_abis()
    wanted = [f"ncclEnvPlugin_v{v}" for v in exported["env"]] + [
        f"ncclTunerPlugin_v{v}" for v in exported["tuner"]
    ]
    assert len(wanted) == 7
    for symbol in wanted:
        assert symbol.encode() + b"\0" in binary, f"{NCCL_WHEEL} {NCCL_VERSION} does not look up {symbol}"
