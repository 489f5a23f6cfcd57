#!/usr/bin/env python3
"""The phase ledger's cost: per collective and per decode step when on; what it costs when off.

When off, the ledger's hooks are not installed (``when = "ledger"`` in the manifests), so a
collective runs SGLang's code untouched: 0 added per call by construction; the only trace is the
installer skipping a dozen manifest entries once per process (inside the registration window that
bench/registration.py measures).

When on, every collective goes through wrapt's wrapper, :func:`hook_ledger.run_ledger_hook`, the
entry point's cell and one dict update under a lock; every forward through the step context.
This measures them in one process, with the real wrapper mechanism (wrapt's
``FunctionWrapper`` around a method, as the installer does), the real hook functions and ledger,
and a CPU bfloat16 tensor of the tiny test model's decode size (1 token x 64 hidden), on an
object that answers like an SGLang group coordinator of 2 ranks on a real (1-process) gloo group:

- ``per_collective_ns``: wrapped ``all_reduce`` minus the bare method (median of rounds; CPU time of
  the thread, so the figure holds on a loaded machine);
- ``per_step_ns``: a decode step of the CPU tiny model (one ``ModelRunner.forward`` with 5
  all-reduces and 1 all-gather, as the ledger of the e2e engine counts them) wrapped, minus bare,
  including the flush every step ends with (one ``os.write`` of the changed lines);
- ``flush_ms``: one flush of a ledger holding ``KEYS`` keys to a launch directory.

    python bench/ledger_cost.py [--json] [--rounds N] [--calls N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KEYS = 200


def _setup() -> tuple[tuple, tuple]:
    import torch
    import torch.distributed as dist
    import wrapt

    from sglang_eagle_nccl.inproc.hooks import hook_ledger

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29591")
        dist.init_process_group("gloo", rank=0, world_size=1)

    class Coordinator:
        """Answers the attributes the ledger reads of an SGLang GroupCoordinator (2 ranks, gloo)."""

        unique_name = "tp:0"
        world_size = 2
        local_size = 2
        device_group = dist.group.WORLD
        pynccl_comm = None

        def all_reduce(self, input_):
            return input_

        def all_gather(self, input_, dim=-1):
            return input_

    class Runner:
        is_draft_worker = False
        model_config = None

        def forward(self, forward_batch):
            group = _STEP_GROUP[0]
            for _ in range(5):
                group.all_reduce(forward_batch.x)
            group.all_gather(forward_batch.x)
            return None

    class Mode:
        name = "DECODE"

    class Batch:
        forward_mode = Mode()
        batch_size = 1
        input_ids = torch.zeros(1, dtype=torch.int64)
        x = torch.zeros(1, 64, dtype=torch.bfloat16)

    class Hook:
        def __init__(self, handler: str) -> None:
            self.handler = handler

    def wrap(cls: type, name: str, handler: str) -> type:
        hook = Hook(handler)
        wrapped = type(cls.__name__ + "Wrapped", (cls,), {})
        wrapt.wrap_function_wrapper(
            wrapped, name, lambda w, i, a, k: hook_ledger.run_ledger_hook(hook, w, i, a, k))
        return wrapped

    bare = (Coordinator(), Runner(), Batch())
    WrappedCoordinator = wrap(wrap(Coordinator, "all_reduce", "ledger_all_reduce"), "all_gather", "ledger_all_gather")
    WrappedRunner = wrap(Runner, "forward", "ledger_forward")
    return bare, (WrappedCoordinator(), WrappedRunner(), Batch())


def _time(fn, calls: int) -> float:
    """CPU time of this thread per call: on a loaded shared machine wall time mostly measures the
    other processes (a long wrapped round is preempted far more often than a short bare one)."""
    start = time.thread_time_ns()
    for _ in range(calls):
        fn()
    return (time.thread_time_ns() - start) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()

    import torch

    from sglang_eagle_nccl.inproc.evidence.ledger import LEDGER, Ledger

    bare, wrapped = _setup()
    # The process ledger writes to a launch directory, as in SGLang's schedulers: every step's flush
    # (one write of the lines that changed) is part of the per-step figure.
    from sglang_eagle_nccl.contract.launch_dir import identity

    step_dir = tempfile.mkdtemp(prefix="ledger-bench-steps-")
    LEDGER.attach(lambda: (step_dir, {"identity": identity()}))
    t = torch.zeros(1, 64, dtype=torch.bfloat16)
    ctx = LEDGER.enter("decode", "eager", 1, 1)
    coll_bare, coll_on = [], []
    for _ in range(args.rounds):
        coll_bare.append(_time(lambda: bare[0].all_reduce(t), args.calls))
        coll_on.append(_time(lambda: wrapped[0].all_reduce(t), args.calls))
    LEDGER.leave(ctx, completed=False)

    step_bare, step_on = [], []
    steps = max(args.calls // 10, 100)
    for _ in range(args.rounds):
        step_bare.append(_time(lambda: _step(bare[1], bare[0], bare[2]), steps))
        step_on.append(_time(lambda: _step(wrapped[1], wrapped[0], wrapped[2]), steps))

    ledger = Ledger()
    run_dir = tempfile.mkdtemp(prefix="ledger-bench-")
    ledger.attach(lambda: (run_dir, {"identity": identity()}))
    for i in range(KEYS):
        ledger.collective("all_reduce", "tp:0", 2, 128 * (i + 1), "bfloat16", "gloo")
    t0 = time.thread_time_ns()
    ledger.flush()
    flush_ms = (time.thread_time_ns() - t0) / 1e6

    result = {
        "bench": "ledger_cost",
        "per_collective_ns": round(statistics.median(coll_on) - statistics.median(coll_bare)),
        "bare_collective_ns": round(statistics.median(coll_bare)),
        "per_step_ns": round(statistics.median(step_on) - statistics.median(step_bare)),
        "bare_step_ns": round(statistics.median(step_bare)),
        "step_shape": "1 ModelRunner.forward, 5 all-reduces + 1 all-gather of 128 B (tiny CPU model's decode)",
        "flush_ms_for_keys": {str(KEYS): round(flush_ms, 3)},
        "off": "hooks not installed: 0 per collective by construction",
        "load": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    if args.json:
        import json

        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    return 0


def _step(runner: object, coordinator: object, batch: object) -> None:
    """One decode step: the runner's forward, its collectives on ``coordinator``."""
    _STEP_GROUP[0] = coordinator
    runner.forward(batch)


_STEP_GROUP: list = [None]

if __name__ == "__main__":
    raise SystemExit(main())
