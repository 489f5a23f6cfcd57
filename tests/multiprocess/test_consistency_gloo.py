"""The consistency check over real torch.distributed gloo groups in real spawned processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import time

TIMEOUT = 8.0


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, env: dict, die: bool, queue) -> None:
    import torch.distributed as dist

    from sglang_eagle_nccl.inproc.evidence.consistency import ConsistencyError, check_group

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    group = dist.new_group(list(range(world)), backend="gloo")
    if die:
        os.kill(os.getpid(), signal.SIGKILL)  # this rank dies as the check starts
    start = time.monotonic()
    try:
        result = check_group(group, "tp", env, timeout_s=TIMEOUT)
        queue.put(
            (
                rank,
                "ok" if result.ok else "mismatch",
                [m.describe() for m in result.mismatches],
                time.monotonic() - start,
            )
        )
    except ConsistencyError as exc:
        queue.put((rank, "error", str(exc), time.monotonic() - start))


def _run(envs: list[dict], die: int | None = None):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _port()
    procs = [
        ctx.Process(target=_rank, args=(r, len(envs), port, envs[r], r == die, q)) for r in range(len(envs))
    ]
    for p in procs:
        p.start()
    results = {}
    deadline = time.monotonic() + 90
    while len(results) < len(envs) - (1 if die is not None else 0) and time.monotonic() < deadline:
        try:
            r = q.get(timeout=1)
            results[r[0]] = r[1:]
        except Exception:  # noqa: BLE001 - queue.Empty
            pass
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    return results


def test_agreeing_ranks_pass_and_node_local_may_differ():
    base = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
    res = _run(
        [
            {**base, "NCCL_SOCKET_IFNAME": "eth0"},
            {**base, "NCCL_SOCKET_IFNAME": "lo"},
            {**base, "NCCL_IB_HCA": "=mlx5_1"},
        ]
    )
    assert {r: v[0] for r, v in res.items()} == {0: "ok", 1: "ok", 2: "ok"}


def test_mismatch_is_seen_by_every_rank_with_names_and_values():
    res = _run([{"NCCL_PROTO": "LL"}, {"NCCL_PROTO": "Simple"}, {"NCCL_PROTO": "LL"}])
    assert set(res) == {0, 1, 2}
    for status, mismatches, elapsed in res.values():
        assert status == "mismatch"
        assert mismatches == ["NCCL_PROTO differs (ranks 0,2: 'LL'; rank 1: 'Simple')"]
        assert elapsed < TIMEOUT


def test_dead_rank_gives_clear_error_within_timeout():
    res = _run([{"NCCL_PROTO": "LL"}, {"NCCL_PROTO": "LL"}], die=1)
    status, message, elapsed = res[0]
    assert status == "error"
    assert "peer rank" in message
    assert elapsed < TIMEOUT + 6
