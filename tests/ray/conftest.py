"""The Ray tier: SGLang's Ray backend (RayEngine, ``launch_server --use-ray``) on a real two-node Ray
cluster on CPU, with the plugin installed from its wheel.

Run in the SGLang 0.5.23 venv of ``ci/sglang_venv.py`` (it adds Ray, pinned): ``SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS=1
<venv>/bin/pytest tests/ray``. One cluster serves the whole session (``support.ray_cluster``: started by Ray's own
``Cluster`` from an environment with no plugin, NCCL or Ray variable; one CPU and one logical GPU per node).
Whatever the actors need (the CPU stand-ins' gate, SGLang's CPU settings, the group probe) reaches them the way a
user's values do: the job's ``runtime_env``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from support import tiny_models
from support.ray_cluster import RayCluster

SGLANG_VERSION = version("sglang")  # this tier needs SGLang installed: fail loudly if it is not
RAY_VERSION = version("ray")  # ... and Ray (ci/sglang_venv.py installs it into the 0.5.23 venv)


@pytest.fixture(scope="session")
def cluster():
    # A short directory of its own: Ray's socket paths under it must stay below the 107-byte limit.
    base = Path(tempfile.mkdtemp(prefix="sen-ray-"))
    started = time.monotonic()
    handle = RayCluster(base)
    print(f"\n[tests/ray] Ray {RAY_VERSION} cluster of 2 nodes up in {time.monotonic() - started:.1f}s")
    try:
        yield handle
    finally:
        handle.close()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("models")
    return {
        "target": tiny_models.write_target(base / "target"),
        "EAGLE": tiny_models.write_eagle_draft(base / "eagle", kind="EAGLE"),
        "EAGLE3": tiny_models.write_eagle_draft(base / "eagle3", kind="EAGLE3"),
    }
