"""Test support: build the plugin wheel and install it into a fresh virtual environment.

CI builds the wheel once and passes it in ``SGLANG_EAGLE_NCCL_TEST_WHEEL``; otherwise it is
built here with ``pip wheel``. Nothing here stands in for the plugin: the venv holds the real
wheel, installed the way users install it (never editable).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build_wheel(out_dir: Path) -> Path:
    """The plugin wheel, in ``out_dir`` (copied there when CI already built it)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    given = os.environ.get("SGLANG_EAGLE_NCCL_TEST_WHEEL")
    if given:
        import shutil

        return Path(shutil.copy2(given, out_dir))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(REPO), "-w", str(out_dir)],
        check=True,
    )
    (wheel,) = out_dir.glob("sglang_eagle_nccl-*.whl")
    return wheel


def fresh_venv(path: Path, wheel: Path) -> Path:
    """A new venv with the wheel and its runtime dependencies; returns its python."""
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    python = path / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        check=True,
    )
    return python
