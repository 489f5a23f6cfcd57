"""``launch``: start SGLang's server with a profile in every process it spawns.

The wrapper validates the profile first (nothing starts on a bad profile), checks that the
installed SGLang is covered by a patch set, opens the launch's audit directory, and runs
``python -m sglang.launch_server <args>`` with the environment built by
:func:`~sglang_eagle_nccl.decision.decide.decide` (the one decision). The server's interpreter activates
the plugin from the ``.pth`` bootstrap (every SGLang version), so this works the same on SGLang
releases with and without native plugins. Signals are forwarded; when the server exits, the
audit verdict is printed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.decision.child_env import merged
from sglang_eagle_nccl.decision.decide import Decision


@dataclass(frozen=True)
class LaunchPlan:
    argv: list[str]
    env_updates: dict[str, str | None]
    run_dir: str | None
    node_rank: int | None


def _node_rank_value(text: str) -> int | None:
    from sglang_eagle_nccl.contract.names import parse_node_rank

    return parse_node_rank(text)


def node_rank_from_args(args: Sequence[str]) -> int | None:
    """``--node-rank`` as SGLang's own argparse reads it: ``--node-rank N`` or ``=N``, the last one wins."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--node-rank", type=_node_rank_value, default=None)
    try:
        known, _ = parser.parse_known_args(list(args))
    except SystemExit:  # `--node-rank` without a value: SGLang's own parser reports it
        return None
    return known.node_rank


def plan_launch(decision: Decision, server_args: Sequence[str], *, python: str | None = None,
                dry_run: bool = False) -> LaunchPlan:
    """The command and environment of the launch ``decision`` decided (once, from the shell it was asked
    in). Opens the launch directory, except for a dry run; only the hand-off's signing is left here."""
    from sglang_eagle_nccl.contract.launch_dir import open_launch

    profile = decision.profile
    assert profile is not None, "a refused decision launches nothing"
    environ = decision.inputs.environ
    node_rank = decision.inputs.node_rank
    run_dir = None
    if not dry_run:
        meta = {"profile": profile.to_dict(), "launcher": "sglang-eagle-nccl launch", "server_args": list(server_args)}
        run_dir = open_launch(profile.policy.audit_dir, meta, required=profile.policy.audit_required,
                              name=decision.launch_name())
    # The server process is the root of the launch (it runs SGLang's launcher code): decided so.
    updates = decision.child_environment(run_dir, create_key=not dry_run)
    argv = [python or sys.executable, "-m", "sglang.launch_server", *server_args]
    from sglang_eagle_nccl.contract.findings import ProfileError
    from sglang_eagle_nccl.profile.limits import check_exec_size

    too_big = [f for f in check_exec_size(merged(environ, updates), argv) if f.severity == "error"]
    if too_big:
        if run_dir is not None:
            # Nothing was started: leave nothing behind either.
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)
        raise ProfileError(too_big)
    return LaunchPlan(argv, updates, run_dir, node_rank)


def run(plan: LaunchPlan, *, summary: bool = True) -> int:
    env = merged(os.environ, plan.env_updates)
    proc = subprocess.Popen(plan.argv, env=env)

    def forward(signum: int, _frame: Any) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        code = proc.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if summary and plan.run_dir is not None:
        from sglang_eagle_nccl.offline.audit.judge import MARK, load_report

        paths = [plan.run_dir]
        if "--use-ray" in plan.argv:
            # The scheduler actors wrote on their own nodes: gather them through Ray (the cluster outlives
            # SGLang when it was started with `ray start`; a private one died with it: this node only).
            import tempfile

            from sglang_eagle_nccl.offline.ray_collect import CollectError, collect

            try:
                collected = collect(plan.run_dir, tempfile.mkdtemp(prefix="sglang-eagle-nccl-collected-"),
                                    address=os.environ.get("RAY_ADDRESS") or "auto")
                paths = collected.directories or paths
                log(collected.summary())
            except CollectError as exc:
                log(f"records of other Ray nodes not gathered ({exc}); the verdict covers this node: "
                    f"run `sglang-eagle-nccl audit --ray ADDRESS {plan.run_dir}` while the cluster is up")
        try:
            report = load_report(paths)
            log(
                f"audit {MARK[report.verdict]} ({report.verdict}): {len(report.processes)} process(es), "
                f"{len(report.communicators)} communicator record(s) on {len(report.machines())} machine(s); details: "
                f"sglang-eagle-nccl audit {' '.join(paths)}"
            )
        except (OSError, ValueError) as exc:
            log(f"no audit could be read from {plan.run_dir}: {exc}")
    return code
