"""Test support: real spawned ranks that build the installed SGLang's groups (gloo, CPU) and
describe each group's all-reduce paths the moment ``GroupCoordinator.__init__`` returns.

Each rank wraps the real ``GroupCoordinator.__init__`` of the installed SGLang (so the describer
sees the object exactly when the plugin's group hook would), runs SGLang's own distributed init
through ``launchers.sglang_init.init_groups``, then, over the real gloo ``cpu_group`` of the tp
group, builds the communicator classes SGLang itself would build for it, as far as SGLang's own
constructors allow on a CPU device, and describes those too. Nothing is stood in for.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from typing import Any

from support.rank_runner import collect_results, free_port


def _describe_at_creation(described: list[dict[str, Any]]) -> None:
    from sglang.srt.distributed import parallel_state as ps

    from sglang_eagle_nccl.inproc.evidence.allreduce_readers import describe_group

    original = ps.GroupCoordinator.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        described.append(describe_group(self))

    ps.GroupCoordinator.__init__ = init


def _try_construct(tp: Any) -> dict[str, Any]:
    """Build SGLang's communicator classes on the tp group's real gloo cpu_group, as SGLang's
    GroupCoordinator does; record for each whether SGLang's constructor allows it on CPU."""
    from sglang_eagle_nccl.inproc.evidence.allreduce_readers import describe_group

    built: dict[str, Any] = {}
    attempts = []
    try:
        from sglang.srt.distributed.device_communicators.custom_all_reduce import CustomAllreduce

        attempts.append(("ca_comm", lambda: CustomAllreduce(group=tp.cpu_group, device=tp.device)))
    except Exception as exc:  # noqa: BLE001
        built["ca_comm"] = f"import failed: {type(exc).__name__}: {exc}"
    try:
        from sglang.srt.distributed.device_communicators.pcie_ipc_ar import PcieIpcCommunicator

        attempts.append(
            (
                "pcie_ipc_comm",
                lambda: PcieIpcCommunicator(group=tp.device_group, device=tp.device, cpu_group=tp.cpu_group),
            )
        )
    except ImportError:
        built["pcie_ipc_comm"] = "absent in this release"
    try:
        from sglang.srt.distributed.device_communicators.torch_symm_mem import TorchSymmMemCommunicator

        attempts.append(
            ("torch_symm_mem_comm", lambda: TorchSymmMemCommunicator(group=tp.cpu_group, device=tp.device))
        )
    except ImportError:
        try:  # named SymmMemCommunicator / symm_mem_comm before 0.5.4.post3
            from sglang.srt.distributed.device_communicators.symm_mem import SymmMemCommunicator

            attempts.append(
                ("symm_mem_comm", lambda: SymmMemCommunicator(group=tp.cpu_group, device=tp.device))
            )
        except ImportError:
            built["torch_symm_mem_comm"] = "absent in this release"
    for attr, make in attempts:
        try:
            obj = make()
        except Exception as exc:  # noqa: BLE001 - SGLang refuses on CPU: that is the finding
            built[attr] = f"constructor raised on CPU: {type(exc).__name__}: {exc}"
            continue
        built[attr] = {
            "class": type(obj).__name__,
            "disabled": getattr(obj, "disabled", None),
            "has_max_size": "max_size" in vars(obj),
        }
        setattr(tp, attr, obj)
    # The tp group now carries every communicator SGLang could build here: describe it again.
    return {"constructed": built, "description": describe_group(tp)}


def _rank(rank: int, world: int, port: int, env: dict[str, str], q: Any) -> None:
    os.environ.update(env)
    start = time.monotonic()
    try:
        described: list[dict[str, Any]] = []
        _describe_at_creation(described)
        from sglang_eagle_nccl.inproc.preflight_rank import init_groups, known_groups

        init_groups(
            rank=rank,
            world_size=world,
            local_rank=rank,
            tp_size=world,
            dp_attention=False,
            backend="gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            device="cpu",
            dist_port=port,
        )
        from sglang_eagle_nccl.inproc.evidence.allreduce_readers import describe_group
        from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import format_paths

        later = {d["unique_name"]: d for d in (describe_group(g) for g in known_groups())}
        tp = next(g for g in known_groups() if getattr(g, "unique_name", "").startswith("tp:"))
        constructed = _try_construct(tp)
        q.put(
            {
                "rank": rank,
                "status": "ok",
                "at_creation": described,
                "after_init": later,
                "constructed": constructed,
                "lines": [format_paths(d) for d in described],
                "elapsed": time.monotonic() - start,
            }
        )
    except BaseException as exc:  # noqa: BLE001
        q.put(
            {
                "rank": rank,
                "status": "error",
                "type": type(exc).__name__,
                "message": str(exc),
                "tb": traceback.format_exc(),
            }
        )


def run(world: int, env: dict[str, str], timeout: float = 240.0) -> dict[int, dict[str, Any]]:
    """Spawn ``world`` ranks; return each rank's report."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank, args=(r, world, port, env, q)) for r in range(world)]
    for p in procs:
        p.start()
    return collect_results(procs, q, world, timeout)
