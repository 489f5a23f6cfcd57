"""The command line: parse the arguments, check the Python, validate the profile, run the steps in
order, write the report. Exit status: 0 everything agreed, 1 a disagreement or failed check, 2
something needed is missing or the arguments are wrong."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gpu_check
from gpu_check.common import (
    DEFAULT_BUDGET_S,
    DEFAULT_PROFILE,
    PLUGIN_DIST,
    SUPPORT_DIR,
    Options,
    Progress,
    Step,
    default_out_dir,
    scrubbed_environment,
)
from gpu_check.context import Context, resolve_profile
from gpu_check.engine_child import child_engine
from gpu_check.environment import (
    build_overlay,
    inspect_python,
    rehearsal_default_python,
    requirements,
    resolve_python,
)
from gpu_check.judging import overall_exit
from gpu_check.native_step import NATIVE_PROFILE, step_native_plugins
from gpu_check.report import REPORT_LOGS, format_text, write_report
from gpu_check.steps import step_engine, step_preflight


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser(
        prog="ci/gpu-check", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(gpu_check.__doc__ or "").split("\nThe package:")[0],
        epilog="docs/gpu-check.md: what to carry to a GPU machine without internet, and how.")
    parser.add_argument("--python", help="the interpreter with torch, SGLang and the plugin (default python3); "
                        "with --wheels: the base the wheels are layered over")
    parser.add_argument("--wheels", type=Path, help="install every *.whl in DIR (--no-index --no-deps) into an "
                        "overlay venv over --python, and check with that")
    parser.add_argument("--out", type=Path, help="report directory (default: $OUT if set, else ./gpu-check-report)")
    parser.add_argument("--work-dir", type=Path, help="scratch directory (default: a new temporary directory)")
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=f"profile name or TOML file (default {DEFAULT_PROFILE})")
    parser.add_argument("--nccl-env", action="append", default=[], metavar="KEY=VALUE",
                        help="extra NCCL setting on top of the profile (repeatable)")
    parser.add_argument("--skip-engine", action="store_true", help="leave out step (b) on purpose")
    parser.add_argument("--check-only", action="store_true", help="only report what the checked Python has")
    parser.add_argument("--cpu-rehearsal", action="store_true", help="run the steps without CUDA (see above)")
    parser.add_argument("--nccl-lib", type=Path, help="rehearsal: libnccl.so.2 to load for step (d)")
    parser.add_argument("--native-profile", default=NATIVE_PROFILE,
                        help=f"profile of step (d), one with [[tuner.rules]] (default {NATIVE_PROFILE})")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for the whole run")
    parser.add_argument("--child-engine", help=argparse.SUPPRESS)
    return parser.parse_args(argv), parser


def main(argv: Sequence[str] | None = None) -> int:
    args, parser = parse_args(argv)
    if args.child_engine:
        return child_engine(json.loads(args.child_engine))
    for item in args.nccl_env:
        if "=" not in item or not item.split("=", 1)[0].strip():
            parser.error(f"--nccl-env {item!r}: expected KEY=VALUE")
        if item.startswith("NCCL_DEBUG"):
            parser.error(f"--nccl-env {item}: gpu-check sets NCCL_DEBUG* itself (one file per process and step)")
    work = (args.work_dir or Path(tempfile.mkdtemp(prefix="gpu-check-"))).absolute()
    if re.search(r"\s", str(work)):
        parser.error(f"--work-dir {work}: NCCL_DEBUG_FILE paths must not contain whitespace")
    work.mkdir(parents=True, exist_ok=True)
    opts = Options(mode="cpu-rehearsal" if args.cpu_rehearsal else "gpu", python=args.python, wheels=args.wheels,
                   out=(args.out or default_out_dir()).absolute(), work=work, profile=args.profile,
                   nccl_env=list(args.nccl_env), skip_engine=args.skip_engine, check_only=args.check_only,
                   nccl_lib=args.nccl_lib, budget_s=args.budget, native_profile=args.native_profile)
    return Run(opts).execute()


class Run:
    """One run: the steps in order, their timings, and the report written whatever happened."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.say = Progress()
        self.env, self.scrubbed = scrubbed_environment()
        if opts.rehearsal:
            sys.path.insert(0, str(SUPPORT_DIR))
            import sglang_cpu_run  # type: ignore[import-not-found]

            # SGLang's CPU engine switch, the stand-in gate, no torch.compile (2 cores); TP=1: no core binding.
            self.env.pop(sglang_cpu_run.OMP_BIND_VAR, None)
            self.env.update(sglang_cpu_run.env_for(1))
        self.timings: dict[str, float] = {}
        self.steps: list[Step] = []
        self.ctx: Context | None = None
        self.started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    def execute(self) -> int:
        opts = self.opts
        self.say(f"mode {opts.mode}; report -> {opts.out}; work -> {opts.work}")
        needs = self.check_environment()
        if needs is None:
            return self.finish()
        if not self.check_profile():
            return self.finish()
        self.run_steps(needs)
        return self.finish()

    def record(self, step: Step, started: float) -> Step:
        self.steps.append(step.finish(started))
        self.timings[step.name] = step.wall_s
        return step

    def check_environment(self) -> dict[str, list[str]] | None:
        """The checked Python and what it lacks; None when nothing more can (or should) run."""
        opts, say = self.opts, self.say
        step = Step("environment", "environment: the checked Python")
        t0 = time.monotonic()
        base_python = resolve_python(opts.python or (rehearsal_default_python() if opts.rehearsal else None))
        python = base_python
        if opts.wheels:
            python = build_overlay(base_python, opts.wheels.absolute(), opts.work / "venv", self.env, say)
        ctx = self.ctx = Context(opts, python, self.env, say)
        say(f"inspecting {python} (torch, CUDA, SGLang, plugin imports)")
        ctx.facts = inspect_python(python, self.env, mode=opts.mode, log=opts.work / "logs" / "environment.log")
        needs = requirements(ctx.facts, mode=opts.mode, want_engine=not opts.skip_engine)
        step.details.update(python=python, base_python=base_python, wheels=str(opts.wheels) if opts.wheels else None,
                            needs=needs)
        if not ctx.facts.get("plugin_pth"):
            step.notes.append("the plugin's .pth bootstrap is not in a site directory of this Python (installed "
                              "with --target + PYTHONPATH?): SGLang's plugin entry point (>= 0.5.11) must carry it alone")
        if needs["all"]:
            step.status = "missing"
            step.problems += needs["all"]
        self.record(step, t0)
        t = ctx.facts.get("torch") or {}
        dists = ctx.facts["dists"]
        say(f"environment: torch {t.get('version')} cuda={t.get('cuda_available')} devices={t.get('devices')} "
            f"nccl={t.get('nccl')}; sglang {dists.get('sglang')}; plugin {dists.get(PLUGIN_DIST)} ({step.wall_s:.1f}s)")
        for problem in step.problems:
            say(f"MISSING: {problem}")
        if step.status == "missing" or opts.check_only:
            for message in needs["engine"]:
                say(f"MISSING for (b): {message}")
            return None
        return needs

    def check_profile(self) -> bool:
        assert self.ctx is not None
        step = Step("profile", f"profile '{self.opts.profile}' validated by the plugin")
        t0 = time.monotonic()
        resolve_profile(self.ctx, step)
        self.record(step, t0)
        for problem in step.problems:
            self.say(f"PROFILE: {problem}")
        return step.status == "ok"

    def plan(self) -> list[tuple[str, str, Callable[[Context, Step], None]]]:
        rehearsal = self.opts.rehearsal
        # Each step's NCCL files are cross-checked against its own audit: that is (c).
        cross_check = "; (c) its NCCL files vs the audit"
        if rehearsal:  # gloo and the CPU engine load no NCCL: (d)'s real libnccl is the only NCCL output
            comm = "(d) one-rank NCCL communicator, real libnccl.so.2 without a GPU: env plugin loaded, " \
                   "NCCL's reads" + cross_check
        else:
            comm = "(d) one-rank NCCL communicator: env + tuner plugins loaded, NCCL's reads" + cross_check
        return [
            ("preflight", "(a) preflight --tp 1, " + ("gloo" if rehearsal else "NCCL")
             + ", one collective per group" + ("" if rehearsal else cross_check), step_preflight),
            # (d) before (b): the engine may use most of the budget, and (d) takes seconds.
            ("native-plugins", comm, step_native_plugins),
            ("engine", "(b) SGLang engine, tiny Llama + EAGLE-3 draft, dummy weights"
             + ("" if rehearsal else cross_check), step_engine),
        ]

    def run_steps(self, needs: dict[str, list[str]]) -> None:
        assert self.ctx is not None
        opts = self.opts
        for name, title, run_step in self.plan():
            step = Step(name, title)
            t0 = time.monotonic()
            if name == "engine" and opts.skip_engine:
                step.status = "skipped"
                step.notes.append("left out on request (--skip-engine)")
            elif name == "engine" and needs["engine"]:
                # Asked for but impossible here: missing on a GPU (exit 2); in the rehearsal a skip.
                step.status = "skipped" if opts.rehearsal else "missing"
                (step.notes if opts.rehearsal else step.problems).extend(needs["engine"])
            else:
                try:
                    run_step(self.ctx, step)
                except Exception as exc:  # noqa: BLE001 - one broken step must not lose the others' report
                    step.problems.append(f"gpu-check itself failed in this step: {type(exc).__name__}: {exc}")
            self.record(step, t0)
            self.say(f"{title}: {step.status.upper()} in {step.wall_s:.1f}s")
            for problem in step.problems:
                self.say(f"  ✗ {problem}")

    def finish(self) -> int:
        opts, ctx = self.opts, self.ctx
        code = overall_exit(self.steps)
        report: dict[str, Any] = {
            "tool": "ci/gpu-check", "mode": opts.mode, "exit_code": code, "ok": code == 0, "started": self.started_at,
            "total_s": round(self.say.elapsed(), 1), "timings": self.timings, "work_dir": str(opts.work),
            "environment": ctx.facts if ctx else {}, "scrubbed_env": self.scrubbed,
            "profile": {"spec": opts.profile, "nccl_env": opts.nccl_env,
                        "resolved_env": (ctx.profile.get("env") if ctx else None)},
            "steps": [s.to_dict() for s in self.steps],
        }
        json_path, text_path = write_report(opts, report)
        sys.stdout.write("\n" + format_text(report))
        self.say(f"report: {json_path} {text_path} {opts.out / REPORT_LOGS}")
        return code
