"""Child process activated ONLY through SGLANG_EAGLE_NCCL (the installed wheel's .pth line): a foreign
write to NCCL_SOCKET_IFNAME after activation, then the first NCCL call reads through the env plugin.

Usage: python activated_nccl_probe.py LIBNCCL WRITE_MODE [PLANT]
  WRITE_MODE: os.environ | setenv
  PLANT: none (default) | fifo | hardlink | symlink | lines -- before ctypes is first imported (when the
  plugin creates this process's NCCL reads log), something is put at the log's name in the launch
  directory; the plugin must refuse it, leave it as it was, and never block.
The answer is written to probe-result.json. Nothing here configures the plugin: activation did.
"""

from __future__ import annotations

import json
import os
import sys

FOREIGN_VALUE = "bogus0"


def plant(kind: str) -> dict:
    from sglang_eagle_nccl.contract.launch_dir import reads_file_name
    from sglang_eagle_nccl.inproc.boot.state import STATE

    path = os.path.join(STATE.run_dir, reads_file_name())
    outside = os.path.abspath("outside.txt")
    with open(outside, "w") as fh:
        fh.write("precious\n")
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "hardlink":
        os.link(outside, path)
    elif kind == "symlink":
        os.symlink(outside, path)
    elif kind == "lines":
        with open(path, "w") as fh:
            fh.write('{"event": "read", "name": "NCCL_SOCKET_IFNAME", "value": "forged"}\n')
    return {"path": path, "outside": outside}


def main(libnccl: str, mode: str, planted_kind: str = "none") -> int:
    activated = "sglang_eagle_nccl.inproc.boot.state" in sys.modules
    planted = plant(planted_kind) if planted_kind != "none" else None
    import ctypes  # the plugin configures its library now (and creates its reads log)

    if mode == "os.environ":
        os.environ["NCCL_SOCKET_IFNAME"] = FOREIGN_VALUE
    elif mode == "setenv":
        libc = ctypes.CDLL(None)
        libc.setenv.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
        assert libc.setenv(b"NCCL_SOCKET_IFNAME", FOREIGN_VALUE.encode(), 1) == 0
    nccl = ctypes.CDLL(libnccl)
    unique_id = ctypes.create_string_buffer(128)
    rc = nccl.ncclGetUniqueId(unique_id)
    after = None
    if planted is not None:
        st = os.lstat(planted["path"])
        import stat

        after = {
            "kind": stat.S_IFMT(st.st_mode),
            "outside": open(planted["outside"]).read(),
            "body": open(planted["path"]).read() if stat.S_ISREG(st.st_mode) else None,
        }
    # The answer goes to a file in the working directory: NCCL's own threads print INFO lines to
    # stdout too, and one may land in the middle of a line printed here.
    with open("probe-result.json", "w") as out:
        json.dump(
            {
                "pid": os.getpid(),
                "rc": rc,
                "activated": activated,
                "planted": planted,
                "after": after,
                "env_plugin": os.environ.get("NCCL_ENV_PLUGIN"),
            },
            out,
        )
    return 0 if rc == 0 else 3


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
