"""Test support: ci/gpu_check (the GPU check's driver package, standard library only) imported
the way ``ci/gpu-check`` runs it, as the package ``gpu_check`` with ``ci/`` on ``sys.path``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "ci" / "gpu-check"
_CI = str(REPO / "ci")

if _CI not in sys.path:
    sys.path.append(_CI)  # appended: nothing in ci/ may shadow an installed module

gpu_check = SimpleNamespace(
    **{
        name: importlib.import_module(f"gpu_check.{name}")
        for name in (
            "common",
            "procs",
            "environment",
            "context",
            "steps",
            "native_step",
            "judging",
            "report",
            "cli",
        )
    }
)
