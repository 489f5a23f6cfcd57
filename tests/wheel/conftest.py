"""The installed-wheel tier: one venv with the built wheel, shared by every module of the tier."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.wheel_env import build_wheel, fresh_venv


@pytest.fixture(scope="session")
def venv_python(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(base / "dist")
    return fresh_venv(base / "venv", wheel)
