"""Step (d)'s child: one NCCL communicator of one rank, in a process the plugin activated.

    python ci/gpu_check/one_rank_comm.py MODE [LIBNCCL]
      MODE "torch":  torch.distributed, backend nccl, world size 1 on cuda:0, one all-reduce (a GPU);
      MODE "ctypes": LIBNCCL loaded with ctypes: ncclGetUniqueId, then ncclCommInitRank for one rank
                     (on a CPU the init fails for want of a CUDA device, after the env plugin loaded).

Runs under the checked interpreter with the environment that ``sglang-eagle-nccl env --audit-dir``
printed, and nothing else: the plugin activates at interpreter start from ``SGLANG_EAGLE_NCCL``
(its ``.pth`` line), sets ``NCCL_ENV_PLUGIN`` / ``NCCL_TUNER_PLUGIN`` to its own library, and hands
the library the profile when SGLang is imported -- which is why this script imports ``sglang``
before NCCL's first call, as every SGLang process does. Only the standard library, torch (GPU) and
SGLang are used; the plugin is never called directly.

Prints one line ``GPU_CHECK_RESULT {json}``; exit status 0 when NCCL's calls succeeded (in "ctypes"
mode on a CPU, a failed communicator init is the expected outcome and reported, not an error).
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
import time

RESULT_MARK = "GPU_CHECK_RESULT "
NCCL_UNIQUE_ID_BYTES = 128  # sizeof(ncclUniqueId): char internal[NCCL_UNIQUE_ID_BYTES] (nccl.h)


def _with_sglang(result: dict) -> None:
    started = time.monotonic()
    import sglang  # noqa: F401 - the import is the point: the plugin configures its library here

    result["sglang_import_s"] = round(time.monotonic() - started, 1)
    result["plugin_env"] = {k: os.environ.get(k) for k in ("NCCL_ENV_PLUGIN", "NCCL_TUNER_PLUGIN")}


def run_torch(result: dict) -> int:
    import torch
    import torch.distributed as dist

    result["torch"] = torch.__version__
    result["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    started = time.monotonic()
    # device_id makes the process group create its NCCL communicator now (eager init), so the
    # communicator's init -- where NCCL loads the tuner -- is part of this step whatever torch defers.
    with socket.socket() as sock:  # a free port for the one-rank rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1, device_id=device)
    tensor = torch.ones(1024, device=device)
    dist.all_reduce(tensor)
    torch.cuda.synchronize()
    result["all_reduce_ok"] = bool(tensor[0].item() == 1.0)
    dist.destroy_process_group()
    result["comm_s"] = round(time.monotonic() - started, 1)
    result["comm_ok"] = result["all_reduce_ok"]
    return 0 if result["comm_ok"] else 3


def run_ctypes(result: dict, libnccl: str) -> int:
    nccl = ctypes.CDLL(libnccl)
    nccl.ncclGetErrorString.restype = ctypes.c_char_p
    nccl.ncclGetLastError.restype = ctypes.c_char_p
    version = ctypes.c_int(0)
    nccl.ncclGetVersion(ctypes.byref(version))
    code = version.value
    result["nccl_version"] = f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    unique_id = ctypes.create_string_buffer(NCCL_UNIQUE_ID_BYTES)
    rc = nccl.ncclGetUniqueId(unique_id)
    result["unique_id_rc"] = rc
    if rc != 0:
        result["error"] = "ncclGetUniqueId: " + nccl.ncclGetErrorString(rc).decode(errors="replace")
        return 3
    # ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank):
    # the id is passed by value, as a struct of 128 chars.
    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * NCCL_UNIQUE_ID_BYTES)]

    comm = ctypes.c_void_p()
    uid = UniqueId.from_buffer_copy(unique_id.raw)
    nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    rc = nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0)
    result["comm_init_rc"] = rc
    result["comm_ok"] = rc == 0
    if rc == 0:
        nccl.ncclCommDestroy(comm)
    else:
        result["comm_init_error"] = (nccl.ncclGetErrorString(rc).decode(errors="replace") + ": "
                                     + (nccl.ncclGetLastError(None) or b"").decode(errors="replace"))
    return 0


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else ""
    result: dict = {"pid": os.getpid(), "mode": mode, "comm_ok": False}
    try:
        _with_sglang(result)
        if mode == "torch":
            code = run_torch(result)
        elif mode == "ctypes" and len(argv) > 2:
            result["lib"] = argv[2]
            code = run_ctypes(result, argv[2])
        else:
            result["error"] = f"usage: one_rank_comm.py torch | ctypes LIBNCCL (got {argv[1:]})"
            code = 2
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which judges
        result["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        code = 3
    print(RESULT_MARK + json.dumps(result), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
