"""End-to-end tier: a real SGLang engine on CPU (tiny dummy-weight Llama, TP=2, gloo; EAGLE where
the installed SGLang can run it on CPU), the plugin installed from its wheel in the venv built by
ci/sglang_venv.py, CPU stand-ins from tests/support/sglang_cpu_standins.py."""

from __future__ import annotations

import os
from importlib.metadata import version

import pytest

from support import sglang_cpu_run as run
from support import tiny_models

SGLANG_VERSION = version("sglang")  # this tier needs SGLang installed: fail loudly if it is not
EAGLE = run.supports_cpu_eagle(SGLANG_VERSION)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("models")
    target = tiny_models.write_target(base / "target")
    draft = tiny_models.write_eagle_draft(base / "draft", kind="EAGLE3") if EAGLE else None
    return target, draft


@pytest.fixture(scope="session")
def e2e_base_env() -> dict[str, str]:
    """This environment without any NCCL or plugin variable, plus what a TP=2 CPU engine needs."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
    }
    return run.full_env(2, env, PYTHONWARNINGS="ignore")


@pytest.fixture
def e2e_env(e2e_base_env):
    return dict(e2e_base_env)  # a copy per test: a test may change its own
