"""``preflight``: spawn N ranks that run the installed SGLang's real distributed init with the
plugin active, then audit every group and communicator they built. No model, seconds.

Ranks are real ``multiprocessing`` spawn children (like SGLang's schedulers): they inherit the
serialised profile through the environment and activate the plugin at interpreter start (or
explicitly, when running from a source checkout without the ``.pth`` file).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl.inproc.boot import environ
from sglang_eagle_nccl.offline.audit.judge import MARK, Report, load_report
from sglang_eagle_nccl.offline.audit.render import format_text
from sglang_eagle_nccl.offline.launch.rank_output import RankRelay, known_cause


class PreflightError(RuntimeError):
    """Preflight could not start (SGLang missing, bad address ...)."""


@dataclass
class RankOutcome:
    rank: int
    exitcode: int | None
    status: str  # ok / error / timeout / died
    message: str = ""
    init_path: str = ""
    exercised: list[str] = field(default_factory=list)
    traceback: str = ""
    stage: str = ""  # where a rank that failed stopped (inproc/preflight_rank.py: STAGE_*)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class PreflightResult:
    ranks: list[RankOutcome]
    report: Report | None
    wall_s: float
    run_dir: str

    @property
    def ok(self) -> bool:
        return all(r.status == "ok" for r in self.ranks) and self.report is not None and self.report.verdict != "fail"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "wall_s": round(self.wall_s, 3),
            "run_dir": self.run_dir,
            "ranks": [r.to_dict() for r in self.ranks],
            "audit": self.report.to_dict() if self.report else None,
        }

    def format_text(self) -> str:
        lines = []
        shown: dict[str, int] = {}  # error message -> the rank whose cause and traceback were shown
        for r in self.ranks:
            mark = "✓" if r.status == "ok" else "✗"
            lines.append(f"{mark} rank {r.rank}: {_outcome_text(r)}")
            if r.status == "ok":
                continue
            if r.message in shown:
                lines.append(f"    (the same error as rank {shown[r.message]})")
                continue
            shown[r.message] = r.rank
            cause = known_cause(r.message)
            if cause:
                lines.append(f"    cause: {cause}")
            if r.traceback and "ConsistencyError" not in r.message:
                lines += ["    " + x for x in r.traceback.strip().splitlines()[-8:]]
        lines.append("")
        if self.report is not None:
            lines.append(format_text(self.report))
        lines.append("")
        verdict = "ok" if self.ok else "fail"
        lines.append(f"Preflight {MARK[verdict]} in {self.wall_s:.1f}s ({len(self.ranks)} rank(s)); audit: {self.run_dir}")
        return "\n".join(lines)


def _outcome_text(r: RankOutcome) -> str:
    """``ok (path)``; a failure names where the rank stopped and the error's first line."""
    if r.status == "ok":
        return "ok" + (f" ({r.init_path})" if r.init_path else "")
    first = next((line for line in r.message.splitlines() if line.strip()), "")
    from sglang_eagle_nccl.contract.events import STAGE_ACTIVATION, STAGE_IMPORT_SGLANG

    if r.stage == STAGE_IMPORT_SGLANG:
        where = "SGLang could not be imported"
    elif r.stage and r.stage != STAGE_ACTIVATION:
        where = f"{r.status} at {r.stage}"
    else:
        where = r.status
    return where + (f": {first}" if first else "")


def cuda_possible() -> bool:
    """False when no CUDA device can be used here, known without importing torch.

    Importing torch just to ask ``torch.cuda.is_available()`` costs the launcher about a second (the
    largest share of preflight's wall time after the ranks' own imports), on the critical path before
    any rank starts. A CPU build of torch (its version ends in ``+cpu``) or a machine without NVIDIA
    device nodes cannot use CUDA; anything else is asked of torch itself.
    """
    from sglang_eagle_nccl.contract.versions import installed_version

    torch_version = installed_version("torch")
    if torch_version is None or torch_version.endswith("+cpu"):
        return False
    return any(name.startswith("nvidia") and name[6:].isdigit() for name in os.listdir("/dev")) \
        if os.path.isdir("/dev") else True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_rank_env(local_ranks: int) -> dict[str, str]:
    """SGLang's CPU engine binds each rank to cores and refuses more ranks than NUMA nodes
    unless told which cores each rank owns; share this machine's cores among the ranks.
    Only preflight's own rank processes get these (they are not NCCL settings)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    per = max(1, len(cores) // local_ranks)
    parts = []
    for i in range(local_ranks):
        chunk = cores[(i * per) % len(cores):][:per] or cores[:1]
        parts.append(f"{chunk[0]}-{chunk[-1]}" if len(chunk) > 1 else str(chunk[0]))
    # Set even for one local rank: SGLang compares the world size (all nodes) with this
    # machine's NUMA nodes and refuses when the binding is not explicit.
    return {"OMP_NUM_THREADS": str(per), "SGLANG_CPU_OMP_THREADS_BIND": "|".join(parts)}


def _rank_main(info: dict[str, Any], queue: Any) -> None:
    """Body of one preflight rank (a spawned process)."""
    from sglang_eagle_nccl.inproc import preflight_rank as pr

    rank = info["rank"]
    stage = pr.STAGE_ACTIVATION
    queue.put({"rank": rank, "status": "stage", "stage": stage})  # progress: where each rank is
    try:
        from sglang_eagle_nccl.inproc.boot import bootstrap
        from sglang_eagle_nccl.inproc.boot.state import STATE
        from sglang_eagle_nccl.inproc.hooks import installer

        # Activated already by the .pth bootstrap when the plugin is installed; explicit here so
        # a source checkout behaves the same. A problem here is refused at this door like at any other.
        try:
            bootstrap.activate(origin="preflight")
            installer.ensure_hooks()
        except Exception as exc:  # noqa: BLE001 - the door's refusal raises, with the environment put back
            from sglang_eagle_nccl.inproc.refusal import refuse

            refuse("preflight_rank", exc)
        STATE.role = f"preflight_TP{rank}"
        if STATE.audit is not None:
            STATE.audit.role = STATE.role
            STATE.audit.write("process_role", title=f"sglang::preflight_TP{rank}")
        stage = pr.STAGE_TORCH
        queue.put({"rank": rank, "status": "stage", "stage": stage})
        import torch

        device = info["device"]
        if device == "cuda":
            torch.cuda.set_device(info["local_rank"])
        stage = pr.STAGE_SGLANG
        queue.put({"rank": rank, "status": "stage", "stage": stage})
        pr.import_sglang()
        stage = pr.STAGE_INIT
        queue.put({"rank": rank, "status": "stage", "stage": stage})
        path = pr.init_groups(
            rank=rank, world_size=info["world_size"], local_rank=info["local_rank"], tp_size=info["tp_size"],
            dp_attention=info["dp_attention"], backend=info["backend"], init_method=info["init_method"],
            device=device, dist_port=info["dist_port"], nnodes=info["nnodes"], node_rank=info["node_rank"],
            dist_init_addr=info["dist_init_addr"],
        )
        stage = pr.STAGE_EXERCISE
        queue.put({"rank": rank, "status": "stage", "stage": stage})
        done = pr.exercise(pr.known_groups(), device) if info["exercise"] else []
        queue.put({"rank": rank, "status": "ok", "init_path": path, "exercised": done})
        queue.put({"rank": rank, "status": "stage", "stage": "tear-down"})
        try:
            pr.tear_down()
        except Exception:  # noqa: BLE001 - tear-down problems do not change the verdict
            pass
    except BaseException as exc:  # noqa: BLE001 - report everything to the parent
        # A refusal at activation is recorded by the door itself; later, the rank records where it stopped.
        if stage != pr.STAGE_ACTIVATION:
            pr.record_stop(stage, exc)
        queue.put({"rank": rank, "status": "error", "stage": stage, "message": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc()})
        raise SystemExit(1) from None


def run_preflight(
    decision: Any,
    *,
    tp_size: int,
    dp_attention: bool = False,
    backend: str = "auto",
    timeout: float = 120.0,
    nnodes: int = 1,
    node_rank: int = 0,
    dist_init_addr: str | None = None,
    exercise: bool = True,
    progress: Callable[[str], None] | None = None,
) -> PreflightResult:
    """Spawn the ranks of the launch ``decision`` decided (decision/decide.py), then audit them."""
    from importlib.util import find_spec

    profile = decision.profile
    say = progress or (lambda _m: None)
    if find_spec("sglang") is None:
        raise PreflightError("sglang is not installed in this Python environment; preflight runs the installed SGLang's own init")
    if tp_size % nnodes:
        raise PreflightError(f"--tp {tp_size} is not divisible by --nnodes {nnodes}")
    local_ranks = tp_size // nnodes
    cuda = False
    if backend in ("auto", "nccl"):
        if find_spec("torch") is None:
            raise PreflightError("torch is not installed in this Python environment")
        if cuda_possible():
            import torch

            cuda = torch.cuda.is_available() and torch.cuda.device_count() >= local_ranks
    if backend == "nccl" and not cuda:
        raise PreflightError(f"--backend nccl needs {local_ranks} CUDA device(s) on this node")
    chosen = "nccl" if (backend == "nccl" or (backend == "auto" and cuda)) else "gloo"
    device = "cuda" if chosen == "nccl" else "cpu"
    if dist_init_addr:
        host, _, port_text = dist_init_addr.rpartition(":")
        if not host or not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5 and 0 < int(port_text) < 65536):
            raise PreflightError(f"--dist-init-addr {dist_init_addr!r} must be HOST:PORT")
        port = int(port_text)
    else:
        host, port = "127.0.0.1", _free_port()
    init_method = f"tcp://{host}:{port}"
    from sglang_eagle_nccl.contract.launch_dir import AuditError, open_launch

    meta = {"profile": profile.to_dict(), "launcher": "sglang-eagle-nccl preflight", "tp_size": tp_size,
            "nnodes": nnodes, "node_rank": node_rank}
    try:
        # The audit is what preflight produces: without a place to write it, stop here.
        run_dir = open_launch(profile.policy.audit_dir, meta, required=True, name=decision.launch_name())
    except AuditError as exc:
        raise PreflightError(f"{exc}; pass --audit-dir to a writable directory") from None
    assert run_dir is not None
    # Children inherit the environment at start(): the one hand-off every launcher uses, plus the
    # CPU binding of preflight's own ranks (not NCCL settings).
    updates = decision.child_environment(run_dir)
    cpu_env = cpu_rank_env(local_ranks) if device == "cpu" else {}
    saved = {k: os.environ.get(k) for k in [*updates, *cpu_env]}
    # Through the one writer: the hand-off, then the CPU binding where the user set none (harness names).
    environ.write(updates)
    environ.write({k: v for k, v in cpu_env.items() if k not in os.environ}, harness=True)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = []
    start = time.monotonic()
    say(f"[preflight] {tp_size} rank(s) ({local_ranks} on this node), backend {chosen}, profile '{profile.name}', audit {run_dir}")
    # The ranks' own output comes through preflight: each line with its rank, SGLang's usual CPU-only
    # notices folded into one line at the end (offline/launch/rank_output.py).
    relay = RankRelay()
    try:
        for local in range(local_ranks):
            rank = node_rank * local_ranks + local
            info = {
                "rank": rank, "local_rank": local, "world_size": tp_size, "tp_size": tp_size,
                "dp_attention": dp_attention, "backend": chosen, "init_method": init_method, "device": device,
                "dist_port": port, "exercise": exercise, "nnodes": nnodes, "node_rank": node_rank,
                "dist_init_addr": dist_init_addr,
            }
            p = ctx.Process(target=_rank_main, args=(info, queue), name=f"preflight-rank{rank}")
            relay.starting(rank, p.start)
            procs.append((rank, p))
    finally:
        environ.put_back(saved, harness=True)
        relay.relay()
    outcomes: dict[int, RankOutcome] = {}
    progress = _Progress(say, start, len(procs))
    deadline = start + timeout
    first_failure: float | None = None
    while any(p.is_alive() for _, p in procs):
        now = time.monotonic()
        if now > deadline:
            break
        # Once one rank has failed, the others get a grace period to report theirs (the
        # consistency check errors on every rank), then they are stopped.
        if first_failure is not None and now - first_failure > 15:
            break
        _drain(queue, outcomes, progress)
        progress.tick(now)
        if first_failure is None and any(o.status != "ok" for o in outcomes.values()):
            first_failure = now
        time.sleep(0.05)
    _drain(queue, outcomes, progress)
    for rank, p in procs:
        if p.is_alive():
            p.kill()
            p.join(5)
            outcomes.setdefault(rank, RankOutcome(rank, p.exitcode, "timeout", f"did not finish within {timeout:.0f}s (killed)"))
        else:
            p.join()
        if rank not in outcomes:
            outcomes[rank] = RankOutcome(rank, p.exitcode, "died", f"exited with code {p.exitcode} without reporting")
        else:
            outcomes[rank].exitcode = p.exitcode
    wall = time.monotonic() - start
    folded = relay.finish()
    if folded:
        say(folded)
    try:
        report = load_report(run_dir)
    except FileNotFoundError:
        report = None
    say(f"[preflight] ranks finished in {wall:.1f}s")
    return PreflightResult([outcomes[r] for r, _ in procs], report, wall, str(run_dir))


class _Progress:
    """Where the ranks are, said when it changes, and every :data:`HEARTBEAT_S` seconds while it does
    not (a rank importing torch and SGLang on a busy machine is silent for a minute or more)."""

    HEARTBEAT_S = 15.0

    def __init__(self, say: Callable[[str], None], start: float, ranks: int) -> None:
        self.say, self.start, self.ranks = say, start, ranks
        self.stage: dict[int, str] = {}
        self.changed = False
        self.last_said = start

    def moved(self, rank: int, stage: str) -> None:
        self.stage[rank] = stage
        self.changed = True

    def tick(self, now: float) -> None:
        # Changes are said at most once a second (ranks start within moments of each other).
        quiet = now - self.last_said
        if not self.stage or not ((self.changed and quiet >= 1.0) or quiet >= self.HEARTBEAT_S):
            return
        from collections import Counter

        counts = Counter(self.stage.values())
        where = ", ".join(f"{stage}: {n}" for stage, n in counts.items())
        self.say(f"[preflight {now - self.start:5.1f}s] {'' if self.changed else 'still '}{where} "
                 f"(of {self.ranks} rank(s))")
        self.changed, self.last_said = False, now


def _drain(queue: Any, outcomes: dict[int, RankOutcome], progress: _Progress | None = None) -> None:
    import queue as queue_mod

    while True:
        try:
            item = queue.get_nowait()
        except queue_mod.Empty:
            return
        rank = item["rank"]
        if item["status"] == "stage":
            if progress is not None:
                progress.moved(rank, item["stage"])
            continue
        outcomes[rank] = RankOutcome(
            rank, None, item["status"], item.get("message", ""), item.get("init_path", ""), item.get("exercised", []),
            item.get("traceback", ""), item.get("stage", ""),
        )
