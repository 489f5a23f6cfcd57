"""`doctor`, `analyze`, `estimate`: what is installed, and what SGLang's logs say."""

from __future__ import annotations

import click

from sglang_eagle_nccl.cli.common import (
    decide_or_exit,
    emit_json,
    fail_input,
    profile_options,
)

# --- doctor -----------------------------------------------------------------------------------


@click.command()
@profile_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor(profiles: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None, as_json: bool) -> None:
    """Versions, chosen patch set and each hook target, NCCL conf files, effective settings.

    Reads SGLang's source instead of importing it, so it is quick and safe to run anywhere.
    Exit 0 when no problem is listed, 1 when any is (missing torch or SGLang, a missing hook
    target, a profile in the environment that cannot be applied ...), 2 for a bad --profile.
    """
    import os
    import sys

    from sglang_eagle_nccl.contract import names
    from sglang_eagle_nccl.decision.decide import Inputs, decide
    from sglang_eagle_nccl.offline.doctor import format_doctor, run_doctor

    profile = None
    problems: list[str] = []
    decision = None
    if profiles or nccl_env:
        # The one decision a launch of it from this shell gets (launcher and children).
        decision = decide_or_exit(profiles, nccl_env, as_json=as_json, allow_unknown=allow_unknown, activation=False)
        profile = decision.profile
        if decision.refusals:
            problems.append(f"activation would refuse the profile '{profile.name}' here: "
                            + "; ".join(f.message() for f in decision.refusals))
    elif os.environ.get(names.ENV_PROFILE) or names.is_enabled() or os.environ.get(names.ENV_ENV):
        # Exactly what a process started from this shell decides at activation, and what the
        # processes it starts would (the hand-off they get).
        decision = decide(Inputs(os.environ, from_environment=True))
        profile = decision.profile
        if profile is None:
            problems.append("the SGLANG_EAGLE_NCCL* environment holds a profile that cannot be applied: "
                            + "; ".join(f.message() for f in decision.problems))
        elif decision.refusals:
            problems.append("a process started from this shell would refuse its profile: "
                            + "; ".join(f.message() for f in decision.refusals))
    report = run_doctor(profile, problems)
    if as_json:
        emit_json(report.to_dict())
    else:
        click.echo(format_doctor(report))
    sys.exit(1 if report.problems else 0)


# --- analyze / estimate -----------------------------------------------------------------------


@click.command()
@click.argument("logs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--audit-dir", default=None, type=click.Path(file_okay=False), help="Include the plugin's audit verdict (e.g. 'NCCL profile not in force on rank 3').")
@click.option("--baseline-decode-ms", type=float, default=None, help="Decode step (ms) of a non-speculative run, if no baseline run is in the logs.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def analyze(logs: tuple[str, ...], audit_dir: str | None, baseline_decode_ms: float | None, as_json: bool) -> None:
    """Diagnose speculative decoding from SGLang server logs.

    Per run: tokens/s, mean accept length, implied cycle time, the baseline decode step it
    has to beat, and the likely bottleneck (verify without CUDA graph, cycle too slow for the
    accept length, NCCL profile not in force on some rank ...).
    """
    from sglang_eagle_nccl.offline.speclog.analyze import analyze_logs
    from sglang_eagle_nccl.offline.speclog.render import format_text, reports_to_json

    problems: list[str] = []
    if audit_dir:
        from sglang_eagle_nccl.offline.audit.judge import load_report, problems_for_analyze

        try:
            problems = problems_for_analyze(load_report(audit_dir))
        except FileNotFoundError as exc:
            fail_input(str(exc), as_json=as_json)
    try:
        reports = analyze_logs(list(logs), audit_problems=problems, baseline_decode_ms=baseline_decode_ms)
    except ValueError as exc:
        fail_input(str(exc), as_json=as_json)
    if as_json:
        emit_json(reports_to_json(reports))
    else:
        click.echo(format_text(reports))


@click.command()
@click.option("--accept-len", type=float, required=True, help="Mean accepted tokens per verify cycle (SGLang's 'accept len').")
@click.option("--verify-ms", type=float, required=True, help="One speculative cycle (draft + verify), ms.")
@click.option("--decode-ms", type=float, required=True, help="One plain decode step without speculation, ms.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def estimate(accept_len: float, verify_ms: float, decode_ms: float, as_json: bool) -> None:
    """Back-of-envelope: does speculation win at this accept length and cycle time?"""
    from sglang_eagle_nccl.offline.speclog.estimate import estimate as compute

    try:
        result = compute(accept_len, verify_ms, decode_ms)
    except ValueError as exc:
        fail_input(str(exc), as_json=as_json)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(result.format_text())
