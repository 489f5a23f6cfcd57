"""Real libnccl.so.2 (nvidia-nccl-cu13 wheel) on a CPU machine, parsed by nccl_debug.

A spawned probe process (tests/probes/nccl_real_probe.py) loads the library with ctypes and
calls ncclGetVersion + ncclGetUniqueId with NCCL_DEBUG=INFO and
NCCL_DEBUG_FILE=<tmp>/nccl.%h.%p.log; the files NCCL writes are parsed with
sglang_eagle_nccl.knowledge.nccl.debug_log. Skipped only when nvidia-nccl-cu13 is not installed.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sglang_eagle_nccl.knowledge.nccl.debug_log import NcclProcessLog, parse_dir
from sglang_eagle_nccl.knowledge.nccl.debug_log_check import compare

pytestmark = pytest.mark.nccl_lib

PROBE = Path(__file__).resolve().parent.parent / "probes" / "nccl_real_probe.py"


@pytest.fixture(scope="module")
def libnccl() -> Path:
    try:
        dist = importlib.metadata.distribution("nvidia-nccl-cu13")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("nvidia-nccl-cu13 is not installed (pip install nvidia-nccl-cu13)")
    lib = Path(str(dist.locate_file("nvidia/nccl/lib/libnccl.so.2")))
    assert lib.is_file(), f"nvidia-nccl-cu13 is installed but {lib} is missing"
    return lib


def nccl_hostname() -> str:
    """What NCCL puts in the prefix and in %h: gethostname() cut at the first '.', '%' and '/' -> '-'."""
    return socket.gethostname().split(".")[0].replace("%", "-").replace("/", "-")


def run_probe(
    lib: Path, tmp_path: Path, **extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], list[NcclProcessLog]]:
    logs_dir = tmp_path / "nccl"
    logs_dir.mkdir()
    empty_conf = tmp_path / "empty.conf"  # keep ~/.nccl.conf out (/etc/nccl.conf is always read)
    empty_conf.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env.update(
        NCCL_DEBUG="INFO",
        NCCL_DEBUG_SUBSYS="INIT,ENV,TUNING",
        NCCL_DEBUG_FILE=str(logs_dir / "nccl.%h.%p.log"),
        NCCL_SOCKET_IFNAME="lo",
        NCCL_CONF_FILE=str(empty_conf),
    )
    env.update(extra)
    proc = subprocess.run(
        [sys.executable, str(PROBE), str(lib)], env=env, capture_output=True, text=True, timeout=120
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return proc, result, parse_dir(logs_dir)


def test_real_libnccl_reports_socket_ifname_for_the_probe_pid(libnccl: Path, tmp_path: Path) -> None:
    proc, result, logs = run_probe(libnccl, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert result["version_code"] > 20000
    (log,) = logs
    assert (log.host, log.pid) == (nccl_hostname(), result["pid"])
    assert Path(log.sources[0]).name == f"nccl.{nccl_hostname()}.{result['pid']}.log"
    assert log.env["NCCL_SOCKET_IFNAME"] == "lo"
    assert compare(logs, {"NCCL_SOCKET_IFNAME": "lo"}) == []


def test_real_libnccl_reports_conf_file_values_as_environment(libnccl: Path, tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_SOCKET_FAMILY=AF_INET\n")
    proc, result, logs = run_probe(libnccl, tmp_path, NCCL_CONF_FILE=str(conf))
    assert proc.returncode == 0, proc.stderr
    (log,) = logs
    family = [(r.value, r.source) for r in log.env_reports if r.name == "NCCL_SOCKET_FAMILY"]
    assert family == [("AF_INET", "environment")]  # NCCL does not say it came from a conf file


def test_real_libnccl_warn_lines_are_parsed(libnccl: Path, tmp_path: Path) -> None:
    proc, result, logs = run_probe(libnccl, tmp_path, NCCL_COMM_ID="notanaddress")
    assert proc.returncode == 3 and result["unique_id_rc"] != 0
    (log,) = logs
    assert log.pid == result["pid"]
    assert any(w.message.startswith("Invalid NCCL_COMM_ID") and w.src_line for w in log.warnings)
