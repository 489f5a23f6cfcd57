"""Steps (a) preflight and (b) the engine; each fills in its :class:`~gpu_check.common.Step` and
cross-checks its NCCL debug files against its audit (c). The judging they call is pure
(:mod:`gpu_check.judging`)."""

from __future__ import annotations

import json

from gpu_check.common import (
    PACKAGE_DIR,
    RESULT_MARK,
    Step,
    debug_env,
    last_exception_line,
    last_json_line,
)
from gpu_check.context import Context, audit_and_parse, expected_env, merge
from gpu_check.environment import missing_module_hint
from gpu_check.judging import judge_nccl, scan_plugin_failures
from gpu_check.ledger_check import judge_ledger
from gpu_check.procs import run_logged

# Step (b)'s requests: two single prompts, then both as one batch.
PROMPTS = ([1, 17, 33, 71, 105, 260], [1, 5, 9, 200, 300, 411, 7])


def step_preflight(ctx: Context, step: Step) -> None:
    base = ctx.opts.work / "preflight"
    nccl_dir, audit_root = base / "nccl", base / "audit"
    nccl_dir.mkdir(parents=True, exist_ok=True)
    backend = "gloo" if ctx.opts.rehearsal else "nccl"
    extra = debug_env(nccl_dir)
    args = ["preflight", "--tp", "1", "--backend", backend, "--profile", ctx.opts.profile,
            "--audit-dir", str(audit_root), "--timeout", str(int(ctx.timeout(180))), "--json"]
    for item in [*ctx.opts.nccl_env, *extra]:
        args += ["--nccl-env", item]
    ctx.say(f"(a) preflight --tp 1 --backend {backend} --profile {ctx.opts.profile} (+ NCCL debug to {nccl_dir})")
    stdout = ctx.opts.work / "logs" / "preflight.json"
    ran = run_logged(ctx.cli(*args), env=ctx.env, log=ctx.opts.work / "logs" / "preflight.log",
                     timeout=ctx.timeout(240), stdout_to=stdout)
    try:
        result = json.loads(stdout.read_text())
    except (OSError, ValueError):
        result = None
    step.details.update(backend=backend, exit_code=ran.rc, run_wall_s=round(ran.wall_s, 1), nccl_dir=str(nccl_dir))
    if ran.rc is None:
        step.problems.append(f"preflight did not finish within {ctx.timeout(240):.0f}s (killed)")
    if not isinstance(result, dict):
        step.problems.append(f"preflight printed no JSON result (exit {ran.rc}): "
                             f"{last_exception_line(ran.output) or ran.output.strip()[-600:]}")
        return
    ranks = result.get("ranks", [])
    step.details.update(run_dir=result.get("run_dir"), ranks=[
        {k: r.get(k) for k in ("rank", "status", "init_path", "exercised", "message")} for r in ranks])
    for r in ranks:
        if r.get("status") != "ok":
            step.problems.append(f"preflight rank {r.get('rank')}: {r.get('status')}: {r.get('message')}")
        elif not r.get("exercised"):
            step.problems.append(f"preflight rank {r.get('rank')} ran no collective: no NCCL communicator was forced")
    if not result.get("ok") and not step.problems:
        step.problems.append("preflight verdict: fail (see the audit in the logs)")
    audit, logs, problem = audit_and_parse(ctx, "preflight", audit_root, nccl_dir)
    if problem:
        step.problems.append(problem)
    rank_pids = {int(p["pid"]): p["role"] for p in (audit or {}).get("processes", [])
                 if str(p.get("role", "")).startswith("preflight_TP")}
    if audit is not None and not rank_pids:
        step.problems.append("the audit holds no preflight rank process (the plugin did not activate in the rank)")
    if ctx.opts.rehearsal:
        judged = judge_nccl(audit, logs, expected_env(ctx, extra), nccl_dir=str(nccl_dir))
        step.notes.append("gloo backend: no NCCL communicator exists here, so no NCCL file is expected; "
                          "step (d) feeds real NCCL output through the same code")
    else:
        judged = judge_nccl(audit, logs, expected_env(ctx, extra), required_pids=rank_pids, require_nccl=True,
                            require_comm_inits=True, nccl_dir=str(nccl_dir))
        exercised = sum(len(r.get("exercised") or []) for r in ranks)
        inits = sum(p["comm_inits_complete"] for p in judged["processes"] if p["pid"] in rank_pids)
        step.details.update(groups_exercised=exercised, nccl_comm_inits_complete=inits)
        if inits and exercised and inits != exercised:
            step.notes.append(f"{exercised} group(s) exercised, {inits} NCCL communicator init(s) logged "
                              "(torch may split or reuse communicators)")
    merge(step, judged, audit)


def step_engine(ctx: Context, step: Step) -> None:
    base = ctx.opts.work / "engine"
    nccl_dir, audit_root = base / "nccl", base / "audit"
    nccl_dir.mkdir(parents=True, exist_ok=True)
    extra = debug_env(nccl_dir)
    env = dict(ctx.env)
    # The Engine API path users take: the plugin is enabled by environment in the launching script.
    env.update({
        "SGLANG_EAGLE_NCCL": ctx.opts.profile,
        "SGLANG_EAGLE_NCCL_ENV": " ".join([*ctx.opts.nccl_env, *extra]),
        "SGLANG_EAGLE_NCCL_AUDIT_DIR": str(audit_root),
        # The phase ledger: steps per phase, CUDA-graph replays, each collective's implementation.
        "SGLANG_EAGLE_NCCL_LEDGER": "1",
    })
    spec = {"mode": ctx.opts.mode, "work": str(base), "prompts": PROMPTS,
            "max_new_tokens": 8 if ctx.opts.rehearsal else 16}
    where = "CPU (stand-ins)" if ctx.opts.rehearsal else "CUDA, CUDA graphs on"
    ctx.say(f"(b) engine: tiny Llama + EAGLE-3 draft, dummy weights, TP=1, {where}")
    timeout = ctx.timeout(300 if ctx.opts.rehearsal else 360)
    # The package directory runs as a script (its __main__) under the checked interpreter.
    ran = run_logged([ctx.python, str(PACKAGE_DIR), "--child-engine", json.dumps(spec)], env=env,
                     log=ctx.opts.work / "logs" / "engine.log", timeout=timeout)
    result = last_json_line(ran.output, RESULT_MARK) or {}
    step.details.update(exit_code=ran.rc, run_wall_s=round(ran.wall_s, 1), leftover_processes=ran.leftovers,
                        nccl_dir=str(nccl_dir), **{k: v for k, v in result.items() if k != "ok"})
    if ran.rc is None:
        step.problems.append(f"the engine did not finish within {timeout:.0f}s (killed with its processes)")
    elif ran.rc != 0 or not result.get("ok"):
        error = result.get("error") or last_exception_line(ran.output) or ran.output.strip()[-600:]
        hint = missing_module_hint(error or "")
        step.problems.append(f"the engine failed (exit {ran.rc}): {error}"
                             + (f"; carry/install {hint}" if hint else ""))
    if ran.leftovers:
        step.problems.append(f"processes left after shutdown (killed): {ran.leftovers}")
    if result.get("ok"):
        if not all(result.get("outputs") or [[]]):
            step.problems.append("a request generated no tokens")
        if not ctx.opts.rehearsal and result.get("cuda_graph") is not True:
            step.problems.append(f"CUDA graphs were not on in the engine (disable_cuda_graph="
                                 f"{result.get('disable_cuda_graph')!r})")
        dropped = result.get("dropped_kwargs") or []
        if dropped:
            step.notes.append(f"this SGLang has no server argument(s) {dropped}; left at their defaults")
    failures = scan_plugin_failures(ran.output)
    if failures:
        message = "the plugin reported failures in the engine's log: " + "; ".join(failures[:3])
        # The CPU stand-ins cover only what the CPU runs call; an import-only gap there (a module the
        # plugin resolves eagerly) is noted, on a GPU it is a real defect.
        (step.notes if ctx.opts.rehearsal else step.problems).append(message)
    audit, logs, problem = audit_and_parse(ctx, "engine", audit_root, nccl_dir)
    if problem:
        step.problems.append(problem)
    if audit is not None:
        roles = [p.get("role", "") for p in audit.get("processes", [])]
        if not any(r.startswith("scheduler") for r in roles):
            step.problems.append(f"no scheduler process in the plugin's audit (roles: {roles})")
        if not audit.get("eagle"):
            step.problems.append("the audit holds no EAGLE worker record (the EAGLE hook did not run)")
        problems, notes, details = judge_ledger(audit.get("ledger"), rehearsal=ctx.opts.rehearsal)
        step.problems += problems
        step.notes += notes
        step.details.update(details)
    judged = judge_nccl(audit, logs, expected_env(ctx, extra), nccl_dir=str(nccl_dir))
    if not logs:
        step.notes.append("no NCCL debug file from the engine: at TP=1 SGLang runs no collective on its "
                          "one-rank groups and builds no PyNccl communicator, so NCCL is never initialised"
                          if not ctx.opts.rehearsal else "CPU engine: gloo only, NCCL is never loaded")
    merge(step, judged, audit)
