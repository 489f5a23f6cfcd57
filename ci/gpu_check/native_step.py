"""Step (d): the native NCCL plugins in a one-rank communicator.

The process is set up the way a user's own launcher would do it: ``sglang-eagle-nccl env
--audit-dir DIR --format json`` for a profile with ``[[tuner.rules]]`` (so both ``NCCL_ENV_PLUGIN``
and ``NCCL_TUNER_PLUGIN`` are set) prints the environment, and the child
(``one_rank_comm.py``) gets that environment and nothing else of the plugin's. Then NCCL's debug
file says which plugins it loaded, and ``sglang-eagle-nccl audit DIR --json`` says what NCCL read
through the env plugin (``nccl_reads``). ``NCCL_SOCKET_IFNAME=lo`` is added to the profile: NCCL
reads it in ``ncclGetUniqueId`` (bootstrap interface), the one read a CPU can show too.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpu_check.common import PACKAGE_DIR, RESULT_MARK, Step, debug_env, last_exception_line, last_json_line
from gpu_check.context import Context, audit_and_parse, merge
from gpu_check.judging import judge_native, judge_nccl
from gpu_check.procs import run_json, run_logged

NATIVE_PROFILE = "pcie-8gpu-eagle"
PROBE_IFNAME = "lo"  # exists on every Linux machine; a one-rank bootstrap needs nothing else
CHILD = PACKAGE_DIR / "one_rank_comm.py"
# NCCL's own lines about plugins (src/plugin/env.cc, src/plugin/tuner.cc: "Successfully loaded
# external env plugin %s", "Successfully loaded external tuner plugin %s"; the plugins' own
# "ENV/Plugin: Using <name> (v<n>)" and "TUNER/Plugin: ..." lines).
PLUGIN_LINE = re.compile(r"(loaded external \w+ plugin|\w+/Plugin:|NCCL_(ENV|TUNER)_PLUGIN set by environment)")


def plugin_lines(nccl_dir: Path) -> list[str]:
    """NCCL's lines about plugins in every debug file of ``nccl_dir``, without the host:pid prefix."""
    found = []
    for path in sorted(nccl_dir.glob("*")):
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            if PLUGIN_LINE.search(line):
                found.append(line.split(" NCCL INFO ", 1)[-1].strip())
    return found


def _launch_env(ctx: Context, step: Step, nccl_dir: Path, audit_root: Path) -> dict[str, str] | None:
    """The environment ``sglang-eagle-nccl env --audit-dir`` prints (None, with a problem, if it fails)."""
    args = ["env", "--profile", ctx.opts.native_profile, "--audit-dir", str(audit_root), "--format", "json"]
    for item in [*ctx.opts.nccl_env, f"NCCL_SOCKET_IFNAME={PROBE_IFNAME}", *debug_env(nccl_dir)]:
        args += ["--nccl-env", item]
    rc, printed, err = run_json(ctx.cli(*args), env=ctx.env, timeout=ctx.timeout(120),
                                log=ctx.opts.work / "logs" / "native-plugins-env.log")
    if rc != 0 or not isinstance(printed, dict) or "SGLANG_EAGLE_NCCL" not in printed:
        step.status = "missing" if rc == 2 else "fail"
        step.problems.append(f"`sglang-eagle-nccl {' '.join(args[:3])} ... --audit-dir` gave no environment "
                             f"(exit {rc}): {err.strip()[-800:]}")
        return None
    return {str(k): str(v) for k, v in printed.items()}


def step_native_plugins(ctx: Context, step: Step) -> None:
    base = ctx.opts.work / "native-plugins"
    nccl_dir, audit_root = base / "nccl", base / "audit"
    nccl_dir.mkdir(parents=True, exist_ok=True)
    if ctx.opts.rehearsal:
        lib = ctx.opts.nccl_lib or (Path(ctx.facts["libnccl"]) if ctx.facts.get("libnccl") else None)
        if lib is None:
            step.status = "skipped"
            step.notes.append("no libnccl.so.2: the nvidia-nccl-cu13 wheel is not installed in the checked Python; "
                              "pip install nvidia-nccl-cu13 (about 300 MB) or pass --nccl-lib PATH/libnccl.so.2")
            return
        child = [ctx.python, str(CHILD), "ctypes", str(lib)]
    else:
        child = [ctx.python, str(CHILD), "torch"]
    launch = _launch_env(ctx, step, nccl_dir, audit_root)
    if launch is None:
        return
    env = dict(ctx.env)
    env.update(launch)
    ctx.say(f"(d) one-rank communicator ({child[2]}) in a process activated by `sglang-eagle-nccl env` "
            f"(profile {ctx.opts.native_profile})")
    ran = run_logged(child, env=env, log=ctx.opts.work / "logs" / "native-plugins.log", timeout=ctx.timeout(240))
    result = last_json_line(ran.output, RESULT_MARK) or {}
    step.details.update(exit_code=ran.rc, run_wall_s=round(ran.wall_s, 1), nccl_dir=str(nccl_dir),
                        profile=ctx.opts.native_profile, child=result)
    if ran.rc is None:
        step.problems.append(f"the one-rank communicator did not finish within {ctx.timeout(240):.0f}s (killed)")
    elif not result:
        step.problems.append(f"the one-rank communicator printed no result (exit {ran.rc}): "
                             f"{last_exception_line(ran.output) or ran.output.strip()[-600:]}")
        return
    audit, logs, problem = audit_and_parse(ctx, "native-plugins", audit_root, nccl_dir)
    if problem:
        step.problems.append(problem)
    lines = plugin_lines(nccl_dir)
    judged = judge_native(audit, result, lines, gpu=not ctx.opts.rehearsal,
                          expected={"NCCL_SOCKET_IFNAME": PROBE_IFNAME})
    step.problems += judged["problems"]
    step.notes += judged["notes"]
    step.details.update(nccl_plugin_lines=lines, nccl_reads=judged["reads"], tuner_inits=judged["tuner_inits"])
    # NCCL's debug output of the same process goes through the same cross-check as (a) and (b).
    expected = {k: v for k, v in launch.items() if k.startswith("NCCL_") and not k.startswith("NCCL_DEBUG")}
    pid = result.get("pid")
    required = {int(pid): "one-rank communicator"} if isinstance(pid, int) else {}
    merge(step, judge_nccl(audit, logs, expected, required_pids=required, require_nccl=True,
                           require_comm_inits=not ctx.opts.rehearsal, nccl_dir=str(nccl_dir)), audit)
