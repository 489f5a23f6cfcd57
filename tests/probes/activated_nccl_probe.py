"""Child process activated ONLY through SGLANG_EAGLE_NCCL (the installed wheel's .pth line): a foreign
write to NCCL_SOCKET_IFNAME after activation, then the first NCCL call reads through the env plugin.

Usage: python activated_nccl_probe.py LIBNCCL WRITE_MODE     (WRITE_MODE: os.environ | setenv)
Prints one JSON line. Nothing here configures the plugin: activation did, at interpreter start.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

FOREIGN_VALUE = "bogus0"


def main(libnccl: str, mode: str) -> int:
    activated = "sglang_eagle_nccl.inproc.boot.state" in sys.modules
    if mode == "os.environ":
        os.environ["NCCL_SOCKET_IFNAME"] = FOREIGN_VALUE
    elif mode == "setenv":
        libc = ctypes.CDLL(None)
        libc.setenv.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
        assert libc.setenv(b"NCCL_SOCKET_IFNAME", FOREIGN_VALUE.encode(), 1) == 0
    nccl = ctypes.CDLL(libnccl)
    unique_id = ctypes.create_string_buffer(128)
    rc = nccl.ncclGetUniqueId(unique_id)
    # The answer goes to a file in the working directory: NCCL's own threads print INFO lines to
    # stdout too, and one may land in the middle of a line printed here.
    with open("probe-result.json", "w") as out:
        json.dump({"pid": os.getpid(), "rc": rc, "activated": activated,
                   "env_plugin": os.environ.get("NCCL_ENV_PLUGIN")}, out)
    return 0 if rc == 0 else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
