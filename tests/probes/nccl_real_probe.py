"""Load a real libnccl.so.2 with ctypes and call ncclGetVersion and ncclGetUniqueId.

Usage: python nccl_real_probe.py [PATH/TO/libnccl.so.2]
Without a path, the library of the installed nvidia-nccl-cu13 (or -cu12) wheel is used.
Works without a GPU: neither call needs a CUDA device. NCCL_DEBUG* and NCCL_SOCKET_IFNAME
come from the environment of this process.
Prints one JSON line {"pid", "lib", "version_code", "get_version_rc", "unique_id_rc"}.
Exit status: 0 both calls returned ncclSuccess, 2 no library found, 3 a call failed.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import os
import sys
from pathlib import Path

LIB_IN_WHEEL = "nvidia/nccl/lib/libnccl.so.2"
NCCL_UNIQUE_ID_BYTES = 128


def find_libnccl() -> Path | None:
    """libnccl.so.2 shipped by an installed nvidia-nccl-cu13 (or -cu12) distribution."""
    for dist_name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12"):
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        lib = Path(str(dist.locate_file(LIB_IN_WHEEL)))
        if lib.is_file():
            return lib
    return None


def main(argv: list[str]) -> int:
    lib_path = Path(argv[1]) if len(argv) > 1 else find_libnccl()
    if lib_path is None or not lib_path.is_file():
        print(json.dumps({"pid": os.getpid(), "error": f"libnccl.so.2 not found ({lib_path})"}))
        return 2
    lib = ctypes.CDLL(str(lib_path))
    version = ctypes.c_int(0)
    get_version_rc = lib.ncclGetVersion(ctypes.byref(version))
    unique_id = ctypes.create_string_buffer(NCCL_UNIQUE_ID_BYTES)
    unique_id_rc = lib.ncclGetUniqueId(unique_id)
    print(
        json.dumps(
            {
                "pid": os.getpid(),
                "lib": str(lib_path),
                "version_code": version.value,
                "get_version_rc": get_version_rc,
                "unique_id_rc": unique_id_rc,
            }
        ),
        flush=True,
    )
    return 0 if get_version_rc == 0 and unique_id_rc == 0 else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
