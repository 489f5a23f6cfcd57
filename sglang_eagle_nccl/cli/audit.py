"""`audit`: the verdict of one launch."""

from __future__ import annotations

import sys

import click

from sglang_eagle_nccl.cli.common import emit_json, fail_input

# --- audit ------------------------------------------------------------------------------------


@click.command("audit")
@click.argument("directories", nargs=-1, required=True, type=click.Path())
@click.option("--nccl-debug-dir", type=click.Path(exists=True), default=None, help="Also compare with NCCL's own debug files (NCCL_DEBUG_FILE=<dir>/nccl.%h.%p.log).")
@click.option("--verbose", "-v", is_flag=True, help="Every process, communicator, NCCL read and all-reduce table.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: every record behind the verdict.")
def audit_cmd(directories: tuple[str, ...], nccl_debug_dir: str | None, verbose: bool, as_json: bool) -> None:
    """Verdict per host, process and communicator for one launch.

    DIRECTORIES: the launch directory printed at start (or its audit root: its newest launch), one
    shared by every node, or several -- one per node or pod, however collected -- judged as one launch.
    Processes are told apart by host, boot, PID namespace, pid and start time, never by pid alone.

    \b
    Exit codes:
      0  pass: the profile was in force everywhere audited (warnings allowed)
      1  fail: some process or communicator missed the profile
      2  cannot judge: no launch found, not a directory, or nothing readable
    Files that are not regular (symlinks, FIFOs, devices) are never opened; unreadable files
    and lines are listed and left out of the verdict (which is then at best ⚠).
    """
    from sglang_eagle_nccl.offline.audit.judge import load_report
    from sglang_eagle_nccl.offline.audit.read import CannotJudge
    from sglang_eagle_nccl.offline.audit.render import format_text

    try:
        report = load_report(list(directories))
    except CannotJudge as exc:
        fail_input(f"cannot judge: {exc}", as_json=as_json)
    data = report.to_dict()
    nccl_text = ""
    failed = report.verdict == "fail"
    if nccl_debug_dir:
        from sglang_eagle_nccl.offline.audit.nccl_cross_check import cross_check

        check = cross_check(report, nccl_debug_dir)
        data["nccl_debug"] = check
        nccl_text = check["text"]
        failed = failed or not check["ok"]
    if as_json:
        emit_json(data)
    else:
        click.echo(format_text(report, verbose=verbose))
        if nccl_text:
            click.echo("")
            click.echo(nccl_text)
    sys.exit(1 if failed else 0)
