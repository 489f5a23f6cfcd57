"""Test support: the native plugins library for a test session.

The installed library when there is one (a wheel built with a C compiler, or an editable install
that compiled in place); otherwise the same sources compiled into a temporary directory, so the C
behaviour is tested wherever a compiler exists. Used by the native and nccl_lib tiers' conftests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_eagle_nccl.native import build, library


def session_library(tmp_dir: Path) -> library.NativeLibrary:
    """The loaded library; skips (naming both reasons) only when none is installed and none compiles."""
    ok, reason = library.status()
    if ok:
        return library.load()
    out = tmp_dir / build.LIBRARY_NAME
    info = build.compile_library(out)
    if not info.built:
        pytest.skip(
            f"no native library: installed one unavailable ({reason}) and compiling failed ({info.reason})"
        )
    return library.load(out)
