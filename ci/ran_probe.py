"""Run one installed SGLang release's own launch code on CPU with the plugin active, and say what ran.

Executed by ``ci/ran.py`` with the Python of a release's venv (``ci/sglang_venv.py build X
--plugin-wheel ...``), with ``SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS=1``; writes one JSON result:

    <venv>/bin/python ci/ran_probe.py --out result.json [--work DIR]

Three processes deep, as a real launch is:

1. this process (the plugin *not* enabled) makes a tiny model config and an audit directory, starts
   the launcher, and afterwards judges the launch's audit records (the audit verdict of the run);
2. the *launcher*: a fresh interpreter with ``SGLANG_EAGLE_NCCL=<profile>``, so the plugin activates
   from its installed ``.pth`` line exactly as in a user's ``python -m sglang.launch_server`` process.
   It runs SGLang's own code: its plugin loader where the release has one (what its launchers call
   first), ``ServerArgs.add_cli_args`` (the plugin's ``--nccl-*`` flags must join the parser),
   ``prepare_server_args`` and ``resolve_once`` (argument resolution), then
   ``engine._set_envs_and_config`` (SGLang's NCCL writes and its switch to ``spawn``);
3. two *scheduler ranks* the launcher spawns after that, inheriting its environment as SGLang's
   schedulers do: each names itself as SGLang's scheduler does (``setproctitle``), calls SGLang's plugin
   loader where it exists, and builds SGLang's groups with TP = 2 over gloo through the release's own
   distributed init (``parallel_state.init_distributed_environment`` + ``initialize_model_parallel`` up
   to 0.5.20, ``distributed.bootstrap.init_parallel_runtime`` from 0.5.21: the plugin's
   ``preflight_rank.init_groups`` picks the one the release has); one gloo all-reduce per group; then,
   where the release has it, the EAGLE draft's group wiring: ``draft_tp_context`` entered with the
   target's TP group (the draft's collectives must run on an existing group, and no group may be created
   that the hooks do not see).

What is GPU-only is recorded as reached or not, never stood in for: torch's NCCL process group (gloo
here) and NCCL's communicator inside SGLang's ``PyNcclCommunicator`` (its library cannot load on CPU).
A step is ``ok``, ``fail`` (with the reason) or ``n/a`` (with the reason: the release lacks it).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

PROFILE = "pcie-8gpu"
TP = 2
RANK_TIMEOUT_S = 400.0
# What SGLang's CPU launch needs, same flags for every release (attention backends differ by release:
# torch_native exists in every one of them).
SERVER_ARGS = ["--tp-size", str(TP), "--device", "cpu", "--load-format", "dummy", "--skip-tokenizer-init",
               "--attention-backend", "torch_native"]
STAGE = "RAN_PROBE_STAGE"


def _step(status: str, detail: str, **more: Any) -> dict[str, Any]:
    return {"status": status, "detail": detail, **more}


def _error(exc: BaseException) -> str:
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {text}"[:400]


def _nccl_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_NCCL_"))}


# --- the scheduler ranks (spawned by the launcher) -----------------------------------------------------


def _known_groups() -> list[Any]:
    from sglang_eagle_nccl.inproc import preflight_rank as pr

    return pr.known_groups()


def _group_facts(group: Any) -> dict[str, Any]:
    import torch.distributed as dist

    device_group = getattr(group, "device_group", None)
    return {
        "name": getattr(group, "unique_name", "?"),
        "ranks": list(getattr(group, "ranks", [])),
        "backend": str(dist.get_backend(device_group)) if device_group is not None else None,
        # SGLang's own NCCL communicator object of the group: built where the release builds one eagerly,
        # with a library that cannot load on CPU (NCCL's communicator itself is GPU-only).
        "pynccl": type(getattr(group, "pynccl_comm", None)).__name__ if getattr(group, "pynccl_comm", None) else None,
        "pynccl_available": bool(getattr(getattr(group, "pynccl_comm", None), "available", False)),
    }


def _draft_tp_context() -> tuple[Any, str] | None:
    """SGLang's draft group context and where it lives (it moved; absent before 0.4.6)."""
    import importlib

    for module in ("sglang.srt.speculative.spec_utils", "sglang.srt.speculative.eagle_worker",
                   "sglang.srt.speculative.eagle_utils"):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        ctx = getattr(mod, "draft_tp_context", None)
        if ctx is not None:
            return ctx, module
    return None


def _eagle_worker_classes() -> list[str]:
    """The EAGLE worker classes the release defines (the eagle_worker hooks' targets), imported for real."""
    import importlib

    found = []
    for module, cls in (("sglang.srt.speculative.eagle_worker", "EAGLEWorker"),
                        ("sglang.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2")):
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            if "No module named" in str(exc) and module in str(exc):
                continue
            raise
        if hasattr(mod, cls):
            found.append(f"{module}:{cls}")
    return found


def _eagle_wiring(rank: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from sglang.srt.distributed import parallel_state as ps

    workers = _eagle_worker_classes()
    found = _draft_tp_context()
    if found is None:
        return _step("n/a", "this release has no draft_tp_context: its EAGLE draft runs on the target's TP group "
                     "as it is (no group swap to run)", workers=workers)
    ctx, module = found
    params = list(inspect.signature(ctx).parameters)
    target_tp = ps.get_tp_group()
    before = {id(g) for g in _known_groups()}
    if params[:1] == ["tp_group"]:
        arg = target_tp
    else:
        # 0.5.23: a draft parallel layout (resolve_draft_parallel_layout); its tp_group None means "the
        # target's own TP group".
        from sglang.srt.speculative import draft_parallel

        arg = _layout_sharing_target(draft_parallel)
    # 0.5.21 and 0.5.22: the worker says whether the draft owns the attention group too (it does).
    kwargs = {"owns_attention": True} if "owns_attention" in params else {}
    with ctx(arg, **kwargs):
        inside = ps.get_tp_group()
        t = torch.ones(1) * (rank + 1)
        dist.all_reduce(t, group=inside.device_group)
        swapped_to = getattr(inside, "unique_name", "?")
    after = {id(g) for g in _known_groups()}
    ok = inside is target_tp and after == before and float(t.item()) == 3.0
    return _step("ok" if ok else "fail",
                 f"{module}.draft_tp_context({params[0] if params else ''}) -> tp group '{swapped_to}'"
                 f" is the target's: {inside is target_tp}; groups created inside: {len(after - before)};"
                 f" all-reduce inside gave {float(t.item())}",
                 workers=workers)


def _layout_sharing_target(draft_parallel: Any) -> Any:
    """The draft layout SGLang resolves for an EAGLE draft without DP attention (0.5.23: the worker
    calls ``resolve_draft_parallel_layout`` with the model's declared spec, or the legacy policy)."""
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    spec = draft_parallel.legacy_draft_parallel_spec(SpeculativeAlgorithm.EAGLE)
    return draft_parallel.resolve_draft_parallel_layout(spec)


def _rank_main(rank: int, port: int, dist_port: int, queue: Any) -> None:
    out: dict[str, Any] = {"rank": rank}
    try:
        import setproctitle
        import sglang  # noqa: F401 - a scheduler child runs SGLang's module: SGLang is imported before it names itself

        # What SGLang's run_scheduler_process does first: the plugin learns the process role from it.
        setproctitle.setproctitle(f"sglang::scheduler_TP{rank}")
        try:
            from sglang.srt.plugins import load_plugins  # >= 0.5.11: every scheduler child calls it
        except ImportError:
            load_plugins = None
        if load_plugins is not None:
            load_plugins()
        from sglang_eagle_nccl.inproc import preflight_rank as pr
        from sglang_eagle_nccl.inproc.boot.state import STATE

        out["plugin_active"] = bool(STATE.active)
        out["env_at_init"] = _nccl_env()
        start = time.monotonic()
        path = pr.init_groups(rank=rank, world_size=TP, local_rank=rank, tp_size=TP, dp_attention=False,
                              backend="gloo", init_method=f"tcp://127.0.0.1:{port}", device="cpu",
                              dist_port=dist_port)
        out["init"] = _step("ok", path, seconds=round(time.monotonic() - start, 1))
        groups = _known_groups()
        out["groups"] = [_group_facts(g) for g in groups]
        out["exercised"] = pr.exercise(groups, "cpu")
        try:
            out["eagle"] = _eagle_wiring(rank)
        except Exception as exc:  # noqa: BLE001 - recorded as the step's failure
            out["eagle"] = _step("fail", _error(exc), traceback=traceback.format_exc()[-1500:])
        with contextlib.suppress(Exception):
            pr.tear_down()
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the launcher
        out["error"] = _error(exc)
        out["traceback"] = traceback.format_exc()[-3000:]
    queue.put(out)


# --- the launcher -------------------------------------------------------------------------------------


def _launcher(model: str, result_path: str) -> None:
    result: dict[str, Any] = {}

    def save() -> None:
        Path(result_path).write_text(json.dumps(result, indent=1))

    try:
        import sglang

        from sglang_eagle_nccl.inproc.boot.state import STATE

        result["sglang"] = sglang.__version__
        result["plugin_active"] = bool(STATE.active)
        result["env_after_activation"] = _nccl_env()
        try:
            from sglang.srt.plugins import load_plugins  # SGLang's launchers call it first (>= 0.5.11)
        except ImportError:
            load_plugins = None
        if load_plugins is not None:
            load_plugins()
        from sglang.srt.server_args import ServerArgs, prepare_server_args

        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        flags = sorted(o for o in parser._option_string_actions if o.startswith("--nccl-"))
        result["flags"] = _step("ok" if "--nccl-profile" in flags else "fail",
                                f"ServerArgs.add_cli_args: {', '.join(flags) or 'no --nccl-* flag'}")
        save()
        start = time.monotonic()
        args = prepare_server_args(["--model-path", model, *SERVER_ARGS])
        how = "prepare_server_args"
        if hasattr(args, "resolve_once"):
            args.resolve_once()  # >= 0.5.19: resolution runs here, in the launcher
            how += " + resolve_once"
        result["resolution"] = _step("ok", how, seconds=round(time.monotonic() - start, 1), env=_nccl_env())
        save()
        from sglang.srt.entrypoints import engine

        engine._set_envs_and_config(args)
        import multiprocessing as mp

        result["set_envs"] = _step("ok", "engine._set_envs_and_config", env=_nccl_env(),
                                   start_method=mp.get_start_method(allow_none=True))
        save()
    except BaseException as exc:  # noqa: BLE001
        result["error"] = _error(exc)
        result["traceback"] = traceback.format_exc()[-3000:]
        save()
        return

    # The scheduler ranks: spawned after _set_envs_and_config, inheriting what it left (as SGLang's are).
    import multiprocessing as mp

    from sglang_eagle_nccl.offline.launch.preflight import cpu_rank_env

    os.environ.update({k: v for k, v in cpu_rank_env(TP).items() if k not in os.environ})
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port, dist_port = _free_port(), _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, port, dist_port, queue)) for r in range(TP)]
    start = time.monotonic()
    for p in procs:
        p.start()
    ranks: dict[int, dict[str, Any]] = {}
    deadline = start + RANK_TIMEOUT_S
    import queue as queue_mod

    while len(ranks) < TP and time.monotonic() < deadline:
        try:
            item = queue.get(timeout=2)
            ranks[item["rank"]] = item
        except queue_mod.Empty:
            if all(not p.is_alive() for p in procs):
                break
    for p in procs:
        p.join(20)
        if p.is_alive():
            p.kill()
            p.join(5)
    result["ranks"] = [ranks.get(r, {"rank": r, "error": f"no report (exit code {procs[r].exitcode})"})
                       for r in range(TP)]
    result["ranks_seconds"] = round(time.monotonic() - start, 1)
    save()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the parent: start the launcher, judge the audit -------------------------------------------------


def _audit(audit_dir: Path) -> dict[str, Any]:
    from sglang_eagle_nccl.offline.audit.judge import load_report
    from sglang_eagle_nccl.offline.audit.read import read_launch

    report = load_report(audit_dir)
    _, procs = read_launch(report.run_dir)
    processes = []
    for proc in procs:
        counts: dict[str, int] = {}
        for r in proc.records:
            counts[r.get("event", "?")] = counts.get(r.get("event", "?"), 0) + 1
        processes.append({
            "role": proc.role,
            "events": dict(sorted(counts.items())),
            "hooks": sorted({r.get("target", "?") for r in proc.events("hook_installed")}),
            "groups": sorted({r.get("group", "?") for r in proc.events("group_created")}),
            "pynccl": sorted({r.get("group", "?") for r in proc.events("pynccl_created")}),
            "sglang_writes": [w.get("name") for r in proc.events("sglang_env_writes") for w in r.get("writes", [])],
        })
    return {
        "verdict": report.verdict,
        "problems": report.problems[:10],
        "process_verdicts": sorted(f"{p.role}: {p.verdict}" for p in report.processes),
        "communicators": sorted({f"{c.kind}:{c.group}={c.verdict}" for c in report.communicators}),
        "unreadable": len(report.unreadable),
        "processes": sorted(processes, key=lambda p: p["role"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="run one SGLang release's launch code on CPU with the plugin")
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", help="working directory (default: a new temporary one)")
    ap.add_argument("--launcher", nargs=2, metavar=("MODEL", "RESULT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.launcher:
        _launcher(*args.launcher)
        return 0

    from sglang_eagle_nccl.inproc.preflight_rank import write_tiny_config

    work = Path(args.work or tempfile.mkdtemp(prefix="ran-probe-"))
    work.mkdir(parents=True, exist_ok=True)
    model = write_tiny_config(str(work / "model"))
    audit_dir = work / "audit"
    launcher_result = work / "launcher.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))}
    env.update({"SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS": "1", "SGLANG_EAGLE_NCCL": PROFILE,
                "SGLANG_EAGLE_NCCL_AUDIT_DIR": str(audit_dir), "PYTHONWARNINGS": "ignore"})
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--out", args.out,
                           "--launcher", model, str(launcher_result)],
                          env=env, capture_output=True, text=True, timeout=RANK_TIMEOUT_S + 200)
    out: dict[str, Any] = {"launcher_exit": proc.returncode, "seconds": round(time.monotonic() - start, 1)}
    try:
        out["launcher"] = json.loads(launcher_result.read_text())
    except (OSError, ValueError) as exc:
        out["launcher"] = {"error": f"no launcher result ({_error(exc)})"}
    out["stderr_tail"] = proc.stderr[-2500:]
    try:
        out["audit"] = _audit(audit_dir)
    except Exception as exc:  # noqa: BLE001 - no records is itself the finding
        out["audit"] = {"verdict": None, "error": _error(exc)}
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
