"""nccl_lib tier: the real libnccl.so.2 of the pinned nvidia-nccl-cu13 wheel, loaded on a CPU.

    pip install "nvidia-nccl-cu13==2.32.3"    # about 300 MB; CPU-loadable (ncclGetUniqueId needs no GPU)
    pytest tests/nccl_lib

Not part of plain `python -m pytest` (pyproject's testpaths): the wheel is large and the tests
here are about NCCL itself. Asked for without the wheel, they fail with the install command
rather than skip: a skipped NCCL tier would look like a passed one. `ci/test` installs it.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from sglang_eagle_nccl.native import library
from support.native_lib import session_library

HERE = Path(__file__).resolve().parent
NCCL_WHEEL = "nvidia-nccl-cu13"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.nccl_lib)


@pytest.fixture(scope="session", autouse=True)
def nccl_wheel_present() -> None:
    """Someone who asked for this tier wants NCCL tested: a missing wheel is an error, not a skip."""
    try:
        importlib.metadata.distribution(NCCL_WHEEL)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(
            f'{NCCL_WHEEL} is not installed: pip install "{NCCL_WHEEL}==2.32.3" (tests/nccl_lib needs it)'
        )


@pytest.fixture(scope="session")
def native_lib(tmp_path_factory) -> library.NativeLibrary:
    return session_library(tmp_path_factory.mktemp("native"))
