"""``launch``: start SGLang's server with a profile in every process it spawns.

The wrapper validates the profile first (nothing starts on a bad profile), checks that the
installed SGLang is covered by a patch set, creates the launch's audit directory, and runs
``python -m sglang.launch_server <args>`` with the profile serialised into the environment.
The server's interpreter activates the plugin from the ``.pth`` bootstrap (every SGLang
version), so this works the same on SGLang releases with and without native plugins.
Signals are forwarded; when the server exits, the audit verdict is printed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_eagle_nccl import names
from sglang_eagle_nccl.audit.writer import new_launch_dir, write_launch_meta
from sglang_eagle_nccl.names import ENV_ROOT_PID
from sglang_eagle_nccl.profile.model import Profile


@dataclass(frozen=True)
class LaunchPlan:
    argv: list[str]
    env_updates: dict[str, str]
    run_dir: Path | None
    node_rank: int | None


def node_rank_from_args(args: Sequence[str]) -> int | None:
    for i, a in enumerate(args):
        if a == "--node-rank" and i + 1 < len(args) and args[i + 1].isdigit():
            return int(args[i + 1])
        if a.startswith("--node-rank=") and a.split("=", 1)[1].isdigit():
            return int(a.split("=", 1)[1])
    return None


def plan_launch(profile: Profile, server_args: Sequence[str], *, python: str | None = None) -> LaunchPlan:
    """Decide the command and environment (creates only the audit directory)."""
    node_rank = node_rank_from_args(server_args)
    run_dir = None
    try:
        run_dir = new_launch_dir(profile.policy.audit_dir)
        write_launch_meta(run_dir, {"profile": profile.to_dict(), "launcher": "sglang-eagle-nccl launch", "server_args": list(server_args)})
    except Exception as exc:  # noqa: BLE001
        if profile.policy.audit_required:
            raise
        print(f"[sglang-eagle-nccl] WARNING: cannot create the audit directory ({exc}); continuing without audit", file=sys.stderr)
    env = dict(profile.process_env(node_rank))
    env[names.ENV_ENABLE] = profile.name if "/" not in profile.name else "1"
    env[names.ENV_PROFILE] = profile.to_json()
    if run_dir is not None:
        env[names.ENV_RUN_DIR] = str(run_dir)
    if node_rank is not None:
        env[names.ENV_NODE_RANK] = str(node_rank)
    argv = [python or sys.executable, "-m", "sglang.launch_server", *server_args]
    return LaunchPlan(argv, env, run_dir, node_rank)


def run(plan: LaunchPlan, *, summary: bool = True) -> int:
    env = dict(os.environ)
    # The server process is the root of the launch (it runs SGLang's launcher code).
    env.pop(ENV_ROOT_PID, None)
    env.update(plan.env_updates)
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
        from sglang_eagle_nccl.audit.report import MARK, load_report

        try:
            report = load_report(plan.run_dir)
            print(
                f"[sglang-eagle-nccl] audit {MARK[report.verdict]} ({report.verdict}): "
                f"{len(report.processes)} process(es), {len(report.communicators)} communicator record(s); "
                f"details: sglang-eagle-nccl audit {plan.run_dir}",
                file=sys.stderr,
            )
        except FileNotFoundError:
            print(f"[sglang-eagle-nccl] no audit records were written in {plan.run_dir}", file=sys.stderr)
    return code
