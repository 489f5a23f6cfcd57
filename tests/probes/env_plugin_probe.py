"""Child process: hand the env plugin its profile, write foreign values, let real NCCL read.

Usage: python env_plugin_probe.py LIBNCCL PLUGIN_LIBRARY READS_LOG WRITE_MODE
  WRITE_MODE: "os.environ" or "setenv" (how the foreign write after configuration is made).

Order, as activation does it: load the plugin library with ctypes, configure it with the
profile's NCCL_SOCKET_IFNAME=lo, open the reads log, set NCCL_ENV_PLUGIN; then something else in
the process overwrites NCCL_SOCKET_IFNAME ("bogus0"); then the first NCCL call
(ncclGetUniqueId) loads the plugin and reads through it. Prints one JSON line.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

from sglang_eagle_nccl.contract.launch_dir import open_record_file
from sglang_eagle_nccl.native.library import load

PROFILE_VALUE = "lo"
FOREIGN_VALUE = "bogus0"


def main(libnccl: str, plugin: str, reads_log: str, mode: str) -> int:
    lib = load(plugin)
    lib.configure_env({"NCCL_SOCKET_IFNAME": PROFILE_VALUE})
    # Created the one way (the launch directory's rules), handed over as a descriptor.
    fd = open_record_file(os.path.dirname(reads_log), os.path.basename(reads_log))
    log_error = lib.set_reads_log_fd(fd)
    os.environ["NCCL_ENV_PLUGIN"] = plugin
    os.environ["NCCL_SOCKET_IFNAME"] = PROFILE_VALUE  # activation also writes the profile to the environment
    if mode == "os.environ":
        os.environ["NCCL_SOCKET_IFNAME"] = FOREIGN_VALUE
    elif mode == "setenv":
        libc = ctypes.CDLL(None)
        libc.setenv.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
        assert libc.setenv(b"NCCL_SOCKET_IFNAME", FOREIGN_VALUE.encode(), 1) == 0
        libc.getenv.restype = ctypes.c_char_p
        assert libc.getenv(b"NCCL_SOCKET_IFNAME") == FOREIGN_VALUE.encode()
    else:
        raise SystemExit(f"unknown write mode {mode!r}")
    nccl = ctypes.CDLL(libnccl)
    unique_id = ctypes.create_string_buffer(128)
    rc = nccl.ncclGetUniqueId(unique_id)
    abi, nccl_version = lib.env_plugin_info()
    flush_error = lib.flush_reads_counts()
    print(
        json.dumps(
            {
                "pid": os.getpid(),
                "unique_id_rc": rc,
                "log_error": log_error,
                "flush_error": flush_error,
                "plugin_abi": abi,
                "nccl_version": nccl_version,
            }
        ),
        flush=True,
    )
    return 0 if rc == 0 else 3


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
