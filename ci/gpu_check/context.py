"""What the steps share: the run's context (options, checked Python, environment, facts, the
validated profile) and the helpers every step uses -- validate the profile, run the plugin's
audit with its NCCL cross-check, merge a judgement into a step."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpu_check.common import Options, Progress, Step
from gpu_check.procs import run_json


@dataclasses.dataclass
class Context:
    opts: Options
    python: str
    env: dict[str, str]
    say: Progress
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    profile: dict[str, Any] = dataclasses.field(default_factory=dict)

    def timeout(self, wanted: float) -> float:
        """``wanted`` seconds, or what is left of the budget (minus a margin for the report)."""
        left = self.opts.budget_s - self.say.elapsed() - 15.0
        return max(10.0, min(wanted, left))

    def cli(self, *args: str) -> list[str]:
        # The module rather than the console script: an install with --target has no bin/ entry. Not
        # ``-m``: it puts the working directory first on sys.path, so run from a checkout it would check
        # the checkout's sources instead of the installed plugin (Python 3.10 has no -P); the working
        # directory's entry is dropped before the module is found.
        return [self.python, "-c", _RUN_CLI, *args]


_RUN_CLI = "import runpy, sys; sys.path.pop(0); runpy.run_module('sglang_eagle_nccl.cli.main', run_name='__main__', alter_sys=True)"


def resolve_profile(ctx: Context, step: Step) -> None:
    """Validate the profile once, with the checked plugin, before anything starts."""
    args = ["profiles", "show", ctx.opts.profile, "--json"]
    for item in ctx.opts.nccl_env:
        args += ["--nccl-env", item]
    rc, data, err = run_json(ctx.cli(*args), env=ctx.env, timeout=ctx.timeout(120),
                             log=ctx.opts.work / "logs" / "profile.log")
    if rc != 0 or not isinstance(data, dict) or "env" not in data:
        detail = (data or {}).get("error") if isinstance(data, dict) else None
        step.status = "missing" if rc == 2 else "fail"
        step.problems.append(f"profile {ctx.opts.profile!r} with {ctx.opts.nccl_env or 'no --nccl-env'} is not "
                             f"usable: {detail or err.strip()[-800:]}")
        return
    ctx.profile = data
    step.details.update(name=data.get("name"), env=data.get("env"))
    debug_set = [k for k in data["env"] if k.startswith("NCCL_DEBUG")]
    if debug_set:
        step.notes.append(f"the profile sets {debug_set}; gpu-check replaces them per step so each step's "
                          "NCCL files land in its own directory")


def expected_env(ctx: Context, extra: Sequence[str]) -> dict[str, str]:
    env = {k: str(v) for k, v in (ctx.profile.get("env") or {}).items()}
    for item in extra:
        key, _, value = item.partition("=")
        env[key] = value
    return env


def audit_and_parse(ctx: Context, name: str, audit_root: Path, nccl_dir: Path) -> tuple[dict[str, Any] | None,
                                                                                        list[dict[str, Any]], str]:
    """The plugin's audit with its NCCL cross-check, and the parsed NCCL files of one step."""
    logs_dir = ctx.opts.work / "logs"
    rc, audit, err = run_json(ctx.cli("audit", str(audit_root), "--nccl-debug-dir", str(nccl_dir), "--json"),
                              env=ctx.env, timeout=ctx.timeout(120), log=logs_dir / f"{name}-audit.log")
    problem = ""
    if not isinstance(audit, dict) or "verdict" not in audit:
        audit = None
        problem = f"`sglang-eagle-nccl audit {audit_root} --nccl-debug-dir {nccl_dir} --json` gave no report " \
                  f"(exit {rc}): {err.strip()[-600:]}"
    else:
        # The text form too, for people reading the logs tarball.
        run_json(ctx.cli("audit", str(audit_root), "--nccl-debug-dir", str(nccl_dir)), env=ctx.env,
                 timeout=ctx.timeout(120), log=logs_dir / f"{name}-audit.txt")
    logs: list[dict[str, Any]] = []
    if any(p.is_file() for p in nccl_dir.glob("*")):
        rc, parsed, err = run_json([ctx.python, "-m", "sglang_eagle_nccl.knowledge.nccl.debug_log", str(nccl_dir)], env=ctx.env,
                                   timeout=ctx.timeout(120))
        if isinstance(parsed, list):
            logs = parsed
        else:
            problem = problem or f"the NCCL debug files in {nccl_dir} could not be parsed: {err.strip()[-600:]}"
    return audit, logs, problem


def merge(step: Step, judged: Mapping[str, Any], audit: Mapping[str, Any] | None) -> None:
    step.problems += judged["problems"]
    step.notes += judged["notes"]
    step.details["nccl_processes"] = judged["processes"]
    if audit is not None:
        step.details["audit"] = {
            "verdict": audit.get("verdict"),
            "run_dir": audit.get("run_dir"),
            "processes": [{k: p.get(k) for k in ("pid", "role", "verdict", "patch_set", "sglang_version")}
                          for p in audit.get("processes", [])],
            "communicators": [{k: c.get(k) for k in ("pid", "group", "kind", "backend", "verdict")}
                              for c in audit.get("communicators", [])],
            "eagle": audit.get("eagle", []),
            "problems": audit.get("problems", []),
            "nccl_processes": (audit.get("nccl_debug") or {}).get("processes"),
        }
