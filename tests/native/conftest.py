"""Native tier: the C env and tuner plugins (sglang_eagle_nccl/nccl/native).

    pip install nvidia-nccl-cu13==2.32.3     # real libnccl for test_native_real_nccl.py (CPU-loadable)
    pytest tests/native                       # everything here carries the `native` marker

Tests use the installed library when there is one (a wheel built with a C compiler, or an
editable install); otherwise they compile the same sources into a temporary directory, so the C
behaviour is tested wherever a compiler exists. Whether the *installed* wheel carries the library
is tested by test_native_build.py, which builds both wheels.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_eagle_nccl.nccl.native import build, library

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.native)


@pytest.fixture(scope="session")
def native_lib(tmp_path_factory) -> library.NativeLibrary:
    ok, reason = library.status()
    if ok:
        return library.load()
    out = tmp_path_factory.mktemp("native") / build.LIBRARY_NAME
    info = build.compile_library(out)
    if not info.built:
        pytest.skip(f"no native library: installed one unavailable ({reason}) and compiling failed ({info.reason})")
    return library.load(out)


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
