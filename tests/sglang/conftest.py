"""SGLang tier: runs inside a venv built by ci/sglang_venv.py (real SGLang wheel, CPU torch,
the plugin installed from its wheel, CPU stand-ins from tests/support/sglang_cpu_standins.py)."""

from __future__ import annotations

import os
from importlib.metadata import version

import pytest
from packaging.version import Version

SGLANG = Version(version("sglang"))  # fails loudly if this tier runs without SGLang installed


@pytest.fixture(scope="session")
def sglang_version() -> Version:
    return SGLANG


@pytest.fixture
def plugin_env(tmp_path) -> dict[str, str]:
    """Environment for processes that should run SGLang with the plugin enabled."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
    }
    env["SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS"] = "1"
    env["SGLANG_EAGLE_NCCL_AUDIT_DIR"] = str(tmp_path / "audit")
    return env
