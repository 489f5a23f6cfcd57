"""Test support: spawn N real ranks that build the installed SGLang's groups (gloo, CPU).

Each rank is a real ``multiprocessing`` spawn child; the plugin activates in it exactly as in
SGLang's schedulers (the installed ``.pth`` bootstrap reads the serialised profile from the
environment). Per-rank environment differences emulate a rank whose NCCL settings differ
(another node, a stray export); ``die_in_check`` makes one rank die (SIGKILL) at the moment
its consistency check for a group starts, as a crashed peer would; ``stall_in_check`` makes one
rank stop (SIGSTOP: alive, sockets open, never answering) inside that check, as a hung peer would.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_mod
import signal
import socket
import threading
import time
import traceback
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_here() -> None:
    """Stop this process (SIGSTOP) without this thread taking one more step.

    A process-directed SIGSTOP sent from a secondary thread may stop the process a moment after
    kill() returns: the check's thread then went on into the real all-gather, its payload reached
    the peer, the peer's check passed, and the peer hung later in SGLang's own collective instead
    (seen under load). So the signal goes to this thread, and the thread never continues anyway.
    """
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
    while True:
        time.sleep(60)


def _stall_inside_check(group: str, where: str) -> None:
    """From now on, this rank stops itself inside the consistency check of ``group``.

    ``where="barrier"``: before the check's monitored barrier (the peers wait there);
    ``where="all_gather"``: after the barrier and the all-gather of the payload sizes, just as
    the payloads themselves are exchanged (the peers are inside the all-gather). SIGSTOP keeps
    the process and its gloo connections alive: the peers see silence, not a closed socket.
    """
    from sglang_eagle_nccl.inproc.evidence import consistency

    original = consistency.check_group

    def stalling(cpu_group: Any, group_name: str, env: Any, **kw: Any) -> Any:
        if group_name == group:
            if where == "barrier":
                _stop_here()
            else:
                import torch.distributed.distributed_c10d as c10d

                real_all_gather = c10d.all_gather
                calls = []

                def all_gather(*args: Any, **kwargs: Any) -> Any:
                    # all_gather_object: sizes first (1st call), then the pickled payloads (2nd).
                    calls.append(None)
                    if len(calls) == 2:
                        _stop_here()
                    return real_all_gather(*args, **kwargs)

                c10d.all_gather = all_gather
        return original(cpu_group, group_name, env, **kw)

    consistency.check_group = stalling


def _rank(
    rank: int,
    world: int,
    port: int,
    extra_env: dict[str, str],
    die_in_check: str | None,
    q: Any,
    stall_in_check: tuple[str, str] | None = None,
) -> None:
    os.environ.update(extra_env)
    try:
        from sglang_eagle_nccl.inproc.boot import bootstrap
        from sglang_eagle_nccl.inproc.boot.state import STATE
        from sglang_eagle_nccl.inproc.evidence import consistency
        from sglang_eagle_nccl.inproc.hooks import installer

        bootstrap.activate(origin="test-rank")
        installer.ensure_hooks()
        STATE.role = f"scheduler_TP{rank}"
        if STATE.audit:
            STATE.audit.role = STATE.role
            STATE.audit.write("process_role", title=f"sglang::scheduler_TP{rank}")
        if die_in_check:
            original = consistency.check_group

            def dying(cpu_group, group_name, env, **kw):
                if group_name == die_in_check:
                    os.kill(os.getpid(), signal.SIGKILL)
                return original(cpu_group, group_name, env, **kw)

            consistency.check_group = dying
        if stall_in_check:
            _stall_inside_check(*stall_in_check)
        # When this rank's latest check began: a rank that fails reports how long that check took.
        checks_started: list[float] = []
        inner_check = consistency.check_group

        def timed(*args: Any, **kwargs: Any) -> Any:
            checks_started.append(time.monotonic())
            return inner_check(*args, **kwargs)

        consistency.check_group = timed
        from sglang_eagle_nccl.inproc.preflight_rank import init_groups

        start = time.monotonic()
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
        _report(q, {"rank": rank, "status": "ok", "elapsed": time.monotonic() - start})
        _wait_for_peers()
    except BaseException as exc:  # noqa: BLE001
        now = time.monotonic()
        _report(
            q,
            {
                "rank": rank,
                "status": "error",
                "type": type(exc).__name__,
                "message": str(exc),
                "tb": traceback.format_exc(),
                "elapsed": now - start if "start" in dir() else None,
                "check_elapsed": now - checks_started[-1]
                if "checks_started" in dir() and checks_started
                else None,
            },
        )


def _report(q: Any, result: dict[str, Any]) -> None:
    # Flush before anything else can happen: a rank whose check thread is still blocked in a gloo
    # collective may hang while the interpreter shuts down, and the queue's feeder thread would
    # then never send the result.
    q.put(result)
    q.close()
    q.join_thread()


def _wait_for_peers(timeout_s: float = 60.0) -> None:
    """Keep a finished rank alive until every rank has finished building its groups.

    Rank 0 hosts the rendezvous store: if it exited as soon as its own groups were built, a slower
    peer still creating a group would lose the store ("Broken pipe"), which no real SGLang rank
    does to its peers. Bounded, and a peer that failed or was stopped only makes this wait end.
    """
    from datetime import timedelta

    try:
        import torch.distributed as dist

        dist.monitored_barrier(timeout=timedelta(seconds=timeout_s), wait_all_ranks=True)
    except Exception:  # noqa: BLE001 - the result is already reported; this only delays exit
        pass


def collect_results(
    procs: list[Any], q: Any, expected: int, timeout: float, stopped: tuple[int, ...] = ()
) -> dict[int, dict[str, Any]]:
    """Each rank's report from ``q`` (keyed by ``"rank"``) until ``expected`` arrived, every rank
    died, or ``timeout``; then every process is joined, and killed if it does not end.

    ``stopped``: ranks that stopped themselves (SIGSTOP) and can never end on their own: killed
    first, without a join's grace (15 s of waiting each, measured in ci/test), which also closes
    their connections, so a peer still blocked on them ends too."""
    results: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    while len(results) < expected and time.monotonic() < deadline:
        try:
            item = q.get(timeout=1)
            results[item["rank"]] = item
        except queue_mod.Empty:
            if all(not p.is_alive() for p in procs):
                break
    for r in stopped:
        procs[r].kill()
    for p in procs:
        p.join(15)
        if p.is_alive():
            p.kill()
            p.join(5)
    return results


def launcher_env(profile_spec: str, audit_root: str, **policy: Any) -> dict[str, str]:
    """What a launcher hands its children: the plugin's one hand-off, with one launch directory."""
    from sglang_eagle_nccl.contract.launch_dir import open_launch
    from sglang_eagle_nccl.decision.child_env import child_environment
    from sglang_eagle_nccl.profile.resolve import resolve

    profile = resolve([profile_spec], use_environ=False, policy_flags=policy).profile
    run_dir = open_launch(
        audit_root, {"profile": profile.to_dict(), "launcher": "tests/support/rank_runner.py"}, required=True
    )
    updates = child_environment(
        profile, run_dir=run_dir, node_rank=None, environ={}, root_pid=str(os.getpid())
    )
    return {k: v for k, v in updates.items() if v is not None}


def run_ranks(
    world: int,
    *,
    base_env: dict[str, str],
    per_rank_env: dict[int, dict[str, str]] | None = None,
    die_in_check: tuple[int, str] | None = None,
    stall_in_check: tuple[int, str, str] | None = None,
    timeout: float = 240.0,
) -> dict[int, dict[str, Any]]:
    """Spawn ``world`` ranks; return each rank's report (ranks that died or stalled report nothing).

    ``stall_in_check=(rank, group, where)``: see :func:`_stall_inside_check`; the stalled rank is
    killed once the others have reported.
    """
    per_rank_env = per_rank_env or {}
    saved = {k: os.environ.get(k) for k in base_env}
    os.environ.update(base_env)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = []
    try:
        for r in range(world):
            die = die_in_check[1] if die_in_check and die_in_check[0] == r else None
            stall = (
                (stall_in_check[1], stall_in_check[2]) if stall_in_check and stall_in_check[0] == r else None
            )
            p = ctx.Process(target=_rank, args=(r, world, port, per_rank_env.get(r, {}), die, q, stall))
            p.start()
            procs.append(p)
    finally:
        # The test's own harness restores what it set (CPU binding included): not the plugin's writer.
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    expected = world - (1 if die_in_check else 0) - (1 if stall_in_check else 0)
    stopped = (stall_in_check[0],) if stall_in_check else ()
    results = collect_results(procs, q, expected, timeout, stopped)
    for r, p in enumerate(procs):
        if r in results:
            results[r]["exitcode"] = p.exitcode
    return results
