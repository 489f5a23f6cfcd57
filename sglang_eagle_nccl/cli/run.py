"""`launch`, `env`, `preflight`: start SGLang processes with a profile, or prepare their environment."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from sglang_eagle_nccl.cli.common import decide_or_exit, emit_json, fail_input, profile_options

# --- env ----------------------------------------------------------------------------------------


@click.command("env")
@profile_options
@click.option("--audit-dir", default=None, metavar="DIR", help="Create one launch directory under DIR and include it, so every process of the launch audits into it (processes on this machine or a filesystem they share). A relative DIR is made absolute against the current working directory when the profile is resolved. For pods or nodes that each keep their own records, set SGLANG_EAGLE_NCCL_AUDIT_DIR instead: every launcher then opens its own launch there.")
@click.option("--node-rank", type=click.IntRange(0, 10**9 - 1), default=None, help="Node rank (selects [nodes.<rank>.env]).")
@click.option("--node-rank-from", default=None, metavar="VAR", help="k8s format: take each pod's node rank from this variable of the pod (LeaderWorkerSet: LWS_WORKER_INDEX), so one list serves every pod.")
@click.option("--format", "fmt", type=click.Choice(["shell", "json", "dotenv", "k8s"]), default="shell", show_default=True)
def env_cmd(profiles: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None, audit_dir: str | None,
            node_rank: int | None, node_rank_from: str | None, fmt: str) -> None:
    """Print the environment that enables the profile in processes you start yourself.

    For launchers that do not inherit your shell: Ray (runtime_env={"env_vars": ...}),
    Kubernetes (the env: list of a container), systemd (EnvironmentFile). The output holds the
    plugin's gate, the serialised profile, the plugin variables it was resolved from and the NCCL
    variables themselves (so a process without the plugin installed still gets the values): a
    process started with exactly this environment, anywhere, activates the same profile.

    \b
      eval "$(sglang-eagle-nccl env --profile pcie-8gpu)"
      sglang-eagle-nccl env --profile pcie-8gpu --format json   # for Ray's runtime_env
      sglang-eagle-nccl env --profile pcie-8gpu --format k8s --node-rank-from LWS_WORKER_INDEX
    """
    from sglang_eagle_nccl.contract import names
    from sglang_eagle_nccl.contract.findings import ProfileError
    from sglang_eagle_nccl.contract.launch_dir import AuditError, open_launch
    from sglang_eagle_nccl.decision.child_env import EXTERNAL_ROOT, merged
    from sglang_eagle_nccl.decision.decide import environment_refusals
    from sglang_eagle_nccl.offline.launch.env_formats import FormatError, render
    from sglang_eagle_nccl.profile.limits import check_exec_size

    if node_rank_from is not None:
        if fmt != "k8s":
            fail_input("--node-rank-from names a variable of a Kubernetes pod; it needs --format k8s "
                       "(elsewhere give --node-rank N)")
        if node_rank is not None:
            fail_input("--node-rank and --node-rank-from both give the node rank; pass one of them")
        if not (node_rank_from.isascii() and node_rank_from.replace("_", "a").isalnum() and not node_rank_from[0].isdigit()):
            fail_input(f"--node-rank-from {node_rank_from!r}: not a variable name (letters, digits, '_'), "
                       "e.g. --node-rank-from LWS_WORKER_INDEX")
    # The launch's decision (activation's own checks among it), before anything is written (the key,
    # the launch directory).
    # With a launch directory no process of that launch is its root: they all join it as children.
    # Standalone: the processes get exactly what is printed (every input the serialised profile records
    # among it), never this shell's other variables.
    decision = decide_or_exit(profiles, nccl_env, allow_unknown=allow_unknown, node_rank=node_rank, launch={
        "opens_launch": bool(audit_dir), "audit_root": audit_dir, "root_pid": EXTERNAL_ROOT if audit_dir else None,
        "standalone": True,
    })
    profile = decision.profile
    run_dir = None
    if audit_dir:
        meta = {"profile": profile.to_dict(), "launcher": "sglang-eagle-nccl env"}
        try:
            run_dir = open_launch(audit_dir, meta, required=True, name=decision.launch_name())
        except AuditError as exc:
            fail_input(str(exc))
    try:
        updates = decision.child_environment(run_dir)
    except ProfileError as exc:
        fail_input(str(exc), findings=exc.findings)
    out = {k: v for k, v in updates.items() if v is not None}
    too_big = [f for f in check_exec_size(out, []) if f.severity == "error"]
    if too_big:
        fail_input(str(ProfileError(too_big)))
    # Proof, not hope: activation itself, on exactly what is printed and on this shell with it.
    for where, environ in (("exactly this environment", out), ("this shell with this environment added",
                                                                 merged(os.environ, out))):
        refused = environment_refusals(environ)
        if refused:
            fail_input(f"a process started with {where} would refuse the profile "
                       f"({names.ENV_PROFILE} as printed):\n{ProfileError(refused)}", findings=refused)
    try:
        click.echo(render(out, fmt, node_rank_from=node_rank_from, unset=[k for k, v in updates.items() if v is None]))
    except FormatError as exc:
        fail_input(str(exc))


# --- launch -----------------------------------------------------------------------------------


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@profile_options
@click.option("--audit-dir", default=None, metavar="DIR", help="Root of the audit directories (one sub-directory per launch). A relative DIR is made absolute against the current working directory when the profile is resolved.")
@click.option("--audit-required", is_flag=True, default=None, help="Fail instead of warning when the audit cannot be written.")
@click.option("--allow-partial", is_flag=True, default=None, help="Run on an SGLang newer than the plugin knows even if hook targets are missing.")
@click.option("--sglang-wins", multiple=True, metavar="NCCL_VAR", help="Keep SGLang's own value for this variable (e.g. NCCL_NVLS_ENABLE with --enable-nccl-nvls).")
@click.option("--python", default=None, metavar="PATH", help="Python interpreter of the SGLang environment (default: this one).")
@click.option("--ledger", is_flag=True, default=None, help="Count every collective by speculative phase, implementation and size (audit --ledger shows it).")
@click.option("--dry-run", is_flag=True, help="Print the command and environment instead of starting SGLang.")
@click.argument("server_args", nargs=-1, type=click.UNPROCESSED)
def launch(
    profiles: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None, audit_dir: str | None,
    audit_required: bool | None, allow_partial: bool | None, sglang_wins: tuple[str, ...], python: str | None,
    ledger: bool | None, dry_run: bool, server_args: tuple[str, ...],
) -> None:
    """Start `python -m sglang.launch_server SERVER_ARGS...` with the profile in every process.

    \b
    Example:
      sglang-eagle-nccl launch --profile pcie-8gpu -- --model-path M --tp 8 \\
          --speculative-algorithm EAGLE3 --speculative-draft-model-path D
    """
    from sglang_eagle_nccl.contract.launch_dir import AuditError
    from sglang_eagle_nccl.offline.launch.server import node_rank_from_args, plan_launch, run

    args = list(server_args)
    if args and args[0] == "--":
        args = args[1:]
    _refuse_misplaced_options(args)
    if python is not None:
        _check_python(python)
    # The server runs this installation: the launch's decision refuses here, before anything starts,
    # what its activation would refuse (another interpreter decides with its own installation).
    decision = decide_or_exit(
        profiles, nccl_env, allow_unknown=allow_unknown, audit_dir=audit_dir, audit_required=audit_required,
        allow_partial=allow_partial, sglang_wins=list(sglang_wins) or None, activation=python is None,
        node_rank=node_rank_from_args(args), launch={"opens_launch": not dry_run, "root_pid": None}, ledger=ledger,
    )
    from sglang_eagle_nccl.contract.findings import ProfileError

    _check_sglang_coverage(decision.profile, python)

    try:
        plan = plan_launch(decision, args, python=python, dry_run=dry_run)
    except (AuditError, ProfileError) as exc:
        fail_input(str(exc))
    if dry_run:
        emit_json({"argv": plan.argv, "env": plan.env_updates, "run_dir": None,
                   "note": "dry run: nothing was written; a real launch opens its audit directory first"})
        return
    if plan.run_dir:
        click.echo(f"[sglang-eagle-nccl] profile '{decision.profile.name}'; audit: {plan.run_dir}", err=True)
    sys.exit(run(plan))


# The wrapper's own options. SGLang has none of these names, so one among the server arguments
# is a misplaced plugin option, never meant for SGLang.
_OWN_OPTIONS = (
    "--profile", "-p", "--nccl-env", "--allow-unknown", "--audit-dir", "--audit-required", "--allow-partial",
    "--sglang-wins", "--python", "--dry-run", "--ledger",
)


def _refuse_misplaced_options(args: list[str]) -> None:
    for arg in args:
        if arg == "--":
            return  # everything after a second `--` is the user's explicit choice
        name = arg.split("=", 1)[0]
        if name in _OWN_OPTIONS:
            fail_input(
                f"{name} comes after the server arguments, where it would be passed to SGLang. "
                f"Fix: put the plugin's options before `--`, e.g. "
                f"sglang-eagle-nccl launch {name} ... -- --model-path M ..."
            )


def _check_python(python: str) -> None:
    import shutil

    found = shutil.which(python)
    if found is None or not os.path.isfile(found):
        fail_input(
            f"--python {python}: no such executable interpreter. Fix: pass the path of the SGLang environment's "
            "python, e.g. --python /path/to/venv/bin/python"
        )


def _check_sglang_coverage(profile: Any, python: str | None) -> None:
    """Refuse early (before starting a server) when this SGLang is not covered."""
    if python:
        return  # another interpreter: its own bootstrap checks coverage at start-up
    from sglang_eagle_nccl.contract.versions import installed_sglang_version
    from sglang_eagle_nccl.knowledge.sglang.patchsets import (
        PatchSetError,
        check_coverage,
        installed_root,
        require_coverage,
        select,
    )

    version = installed_sglang_version()
    if version is None:
        fail_input("sglang is not installed in this Python environment; install it (or pass --python PATH).")
    try:
        selection = select(version)
        root = installed_root()
        if not selection.tested and root is not None:
            require_coverage(check_coverage(selection, root), allow_partial=profile.policy.allow_partial)
    except PatchSetError as exc:
        fail_input(str(exc))


# --- preflight --------------------------------------------------------------------------------


@click.command()
@click.option("--tp", "tp_size", type=click.IntRange(1, 1024), required=True, help="Tensor-parallel size: ranks to spawn on this node.")
@click.option("--dp-attention", is_flag=True, help="Also build the attention_tp groups of DP attention (dp size = tp size).")
@profile_options
@click.option("--backend", type=click.Choice(["auto", "gloo", "nccl"]), default="auto", show_default=True, help="torch.distributed backend (auto: nccl with CUDA, gloo otherwise).")
@click.option("--audit-dir", default=None, metavar="DIR", help="Root of the audit directories. A relative DIR is made absolute against the current working directory when the profile is resolved.")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds before the ranks are killed.")
@click.option("--nnodes", type=click.IntRange(1, 1024), default=1, show_default=True, help="Number of nodes (one preflight per node).")
@click.option("--node-rank", type=click.IntRange(0, 1023), default=0, show_default=True, help="This node's rank.")
@click.option("--dist-init-addr", default=None, metavar="HOST:PORT", help="Rendezvous address shared by all nodes (required with --nnodes > 1).")
@click.option("--no-exercise", is_flag=True, help="Do not run one collective per group (NCCL communicators then stay uncreated).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def preflight(
    tp_size: int, dp_attention: bool, profiles: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None,
    backend: str, audit_dir: str | None, timeout: float, nnodes: int, node_rank: int, dist_init_addr: str | None,
    no_exercise: bool, as_json: bool,
) -> None:
    """Run the installed SGLang's real distributed init in --tp ranks with the plugin, then audit.

    No model is loaded: each rank builds SGLang's groups (world, tp, pp, attention_tp, ...) with
    gloo on a CPU machine or NCCL on GPUs, so a mismatch or a profile that does not reach a
    communicator shows up in seconds instead of after a model load.
    """
    from sglang_eagle_nccl.offline.launch.preflight import PreflightError, run_preflight

    if nnodes > 1 and not dist_init_addr:
        fail_input("--nnodes > 1 needs --dist-init-addr HOST:PORT (the same on every node)", as_json=as_json)
    # The ranks activate with this installation: what they would refuse is refused before they start.
    decision = decide_or_exit(profiles, nccl_env, as_json=as_json, allow_unknown=allow_unknown, audit_dir=audit_dir,
                              node_rank=node_rank, launch={"opens_launch": True})
    from sglang_eagle_nccl.contract.findings import ProfileError

    try:
        result = run_preflight(
            decision, tp_size=tp_size, dp_attention=dp_attention, backend=backend, timeout=timeout,
            nnodes=nnodes, node_rank=node_rank, dist_init_addr=dist_init_addr, exercise=not no_exercise,
            progress=None if as_json else (lambda m: click.echo(m, err=True)),
        )
    except PreflightError as exc:
        fail_input(str(exc), as_json=as_json)
    except ProfileError as exc:  # the ranks' hand-off cannot be written (too large to start them with)
        fail_input(str(exc), as_json=as_json, findings=exc.findings)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(result.format_text())
    sys.exit(0 if result.ok else 1)
