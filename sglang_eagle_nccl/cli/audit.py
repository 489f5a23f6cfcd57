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
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Gather the launch directory from every node of this Ray cluster first (\"auto\": the cluster the "
                   "launch itself recorded, else refused; no shared filesystem needed), then judge all of it. "
                   "DIRECTORIES is then the one launch directory path the nodes wrote to.")
@click.option("--ray-timeout", "ray_timeout", type=click.FloatRange(min=0, min_open=True), default=60.0,
              show_default=True, metavar="SECONDS",
              help="With --ray: the most each network step may take (reaching the cluster, starting the per-node "
                   "tasks, gathering their answers); past it: exit 2 naming the address and the deadline.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: every record behind the verdict.")
@click.option("--ledger", "show_ledger", is_flag=True, help="Also show the phase ledger: per speculative phase, each group's "
              "collectives, sizes, implementation and the tuner's decision (target verify first).")
@click.option("--budget", "budget_flags", multiple=True, metavar="KIND=N",
              help="Raise (or lower) one limit of the whole audit's work: bytes, files, lines or records "
                   "(defaults: 4 GiB, 500,000 files, 16 million lines, 8 million records). Past a limit: exit 2.")
def audit_cmd(directories: tuple[str, ...], nccl_debug_dir: str | None, verbose: bool, ray_address: str | None,
              as_json: bool, budget_flags: tuple[str, ...] = (), ray_timeout: float = 60.0,
              show_ledger: bool = False) -> None:
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
    and lines are listed and left out of the verdict (which is then at best ⚠). The verdict
    depends on the set of files only: not on the order of DIRECTORIES, nor on how often a file
    was copied (copies that disagree are listed, and only make the verdict worse).
    """
    from sglang_eagle_nccl.offline.audit.judge import load_report
    from sglang_eagle_nccl.offline.audit.read import CannotJudge, no_cycle_collector
    from sglang_eagle_nccl.offline.audit.render import format_text

    budget = _budget(budget_flags, as_json)

    collected = None
    paths = list(directories)
    if ray_address is not None:
        import os
        import tempfile

        from sglang_eagle_nccl.offline.ray_collect import CollectError, collect

        if len(paths) != 1:
            fail_input("--ray gathers one launch directory from every node: give exactly one DIRECTORY", as_json=as_json)
        try:
            collected = collect(os.path.abspath(paths[0]), tempfile.mkdtemp(prefix="sglang-eagle-nccl-collected-"),
                                address=ray_address, timeout_s=ray_timeout)
        except CollectError as exc:
            fail_input(f"cannot gather through Ray: {exc}", as_json=as_json)
        paths = collected.directories
        if not paths:
            problems = "; ".join(p for n in collected.nodes for p in n.problems)
            fail_input(f"cannot judge: no node of the Ray cluster holds {directories[0]} ({problems})", as_json=as_json)
    try:
        report = load_report(paths, budget)
    except CannotJudge as exc:
        fail_input(f"cannot judge: {exc}", as_json=as_json)
    data: dict[str, object] = {}
    if as_json:  # only --json prints the report as data
        with no_cycle_collector():  # the report as data: as many small objects again, none in a cycle
            data = report.to_dict()
    if collected is not None:
        data["collected"] = {"summary": collected.summary(), "dest": collected.dest, "cluster": collected.cluster,
                             "nodes": [{"node_id": n.node_id, "host": n.host, "files": len(n.files),
                                        "seconds": round(n.seconds, 3), "problems": n.problems} for n in collected.nodes]}
    nccl_text = ""
    failed = report.verdict == "fail"
    if nccl_debug_dir:
        from sglang_eagle_nccl.offline.audit.nccl_cross_check import cross_check

        check = cross_check(report, nccl_debug_dir)
        data["nccl_debug"] = check
        nccl_text = check["text"]
        failed = failed or not check["ok"]
    ledger_text = ""
    if show_ledger or as_json:
        from sglang_eagle_nccl.offline.audit.ledger_audit import ledger_screen

        section, ledger_text = ledger_screen(report)
        if section is not None or show_ledger:
            data["ledger"] = section
    if as_json:
        emit_json(data)
    else:
        if collected is not None:
            click.echo(collected.summary())
            for node in collected.nodes:
                for problem in node.problems:
                    click.echo(f"  ⚠ {node.host} ({node.node_id[:8]}): {problem}")
        click.echo(format_text(report, verbose=verbose))
        if nccl_text:
            click.echo("")
            click.echo(nccl_text)
        if show_ledger:
            click.echo("")
            click.echo(ledger_text)
    sys.exit(1 if failed else 0)


def _budget(flags: tuple[str, ...], as_json: bool) -> object:
    """--budget KIND=N, checked before anything is read (exit 2 naming the flag, the value and the rule)."""
    from sglang_eagle_nccl.offline.audit.records import DEFAULT_BUDGET, Budget

    limits: dict[str, int] = {}
    for flag in flags:
        kind, _, value = flag.partition("=")
        if kind not in DEFAULT_BUDGET or not value.isascii() or not value.isdigit() or int(value) < 1:
            fail_input(f"--budget {flag!r}: expected KIND=N with KIND one of {', '.join(sorted(DEFAULT_BUDGET))} and N "
                       "a positive whole number. Fix: e.g. --budget bytes=8589934592", as_json=as_json)
        limits[kind] = int(value)
    return Budget(limits)
