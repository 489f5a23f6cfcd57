"""Native tier: the C env and tuner plugins (sglang_eagle_nccl/native).

    pytest tests/native        # part of plain `python -m pytest`; everything here carries the `native` marker

Tests use the installed library when there is one (a wheel built with a C compiler, or an
editable install); otherwise they compile the same sources into a temporary directory, so the C
behaviour is tested wherever a compiler exists (tests/support/native_lib.py). Whether the
*installed* wheel carries the library is tested by test_native_build.py, which builds both wheels.
The plugins loaded by the real libnccl of the nvidia-nccl-cu13 wheel are tier tests/nccl_lib.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_eagle_nccl.native import library
from support.native_lib import session_library

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.native)


@pytest.fixture(scope="session")
def native_lib(tmp_path_factory) -> library.NativeLibrary:
    return session_library(tmp_path_factory.mktemp("native"))


def _clean(lib: library.NativeLibrary) -> None:
    lib.configure_env({}, {}, ())
    lib.select_group(None)
    lib.configure_tuner([])
    lib.reset_reads()


@pytest.fixture
def lib(native_lib):
    """The library with no profile, no rules, no label, no reads log (restored after the test)."""
    _clean(native_lib)
    yield native_lib
    _clean(native_lib)
