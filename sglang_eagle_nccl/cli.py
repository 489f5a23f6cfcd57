"""``sglang-eagle-nccl``: the command line. Thin: every command delegates to a module.

Exit codes: 0 success; 1 a negative verdict (``validate`` found errors, ``audit`` found a
communicator without the profile, ``preflight`` failed); 2 bad input (unknown profile,
malformed file or flag), in which case nothing was applied or started.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from . import __version__

PROFILE_HELP = (
    "Profile: a built-in name (see `profiles list`) or a TOML file. Repeat to layer profiles "
    "(later ones override earlier ones). Default: $SGLANG_EAGLE_NCCL."
)
ENV_HELP = "KEY=VALUE NCCL setting on top of the profile (repeatable), e.g. --nccl-env NCCL_ALGO=Tree."


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def _fail_input(message: str, *, as_json: bool = False, findings: Sequence[Any] = ()) -> NoReturn:
    if as_json:
        _emit_json({"ok": False, "error": message, "findings": [f.to_dict() for f in findings]})
    else:
        click.echo(message, err=True)
    sys.exit(2)


def _resolve(profiles: Sequence[str], env_flags: Sequence[str], *, as_json: bool = False, **policy: Any) -> Any:
    from .findings import ProfileError
    from .profile import resolve

    try:
        resolution = resolve(list(profiles), env_flags=list(env_flags), policy_flags=policy)
    except ProfileError as exc:
        _fail_input(str(exc), as_json=as_json, findings=exc.findings)
    if not as_json:
        for w in resolution.warnings:
            click.echo(f"warning: {w.message()}", err=True)
    return resolution


def profile_options(func: Any) -> Any:
    func = click.option("--nccl-env", "nccl_env", multiple=True, metavar="KEY=VALUE", help=ENV_HELP)(func)
    func = click.option("--profile", "-p", "profiles", multiple=True, metavar="NAME_OR_FILE", help=PROFILE_HELP)(func)
    func = click.option("--allow-unknown", is_flag=True, default=None, help="Accept NCCL_* names this plugin does not know (new NCCL releases).")(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="sglang-eagle-nccl")
def main() -> None:
    """Make NCCL settings reach every SGLang process and communicator, and prove it.

    \b
    Three ways to use a profile:
      sglang-eagle-nccl launch --profile pcie-8gpu -- --model-path M --tp 8 ...
      python -m sglang.launch_server ... --nccl-profile pcie-8gpu --nccl-env NCCL_PROTO=LL
      SGLANG_EAGLE_NCCL=pcie-8gpu python my_engine_script.py        (Engine API)

    Then read what every process and communicator actually got:
      sglang-eagle-nccl audit <audit dir printed at start>
    """


# --- profiles ---------------------------------------------------------------------------------


@main.group()
def profiles() -> None:
    """List and show NCCL profiles."""


@profiles.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def profiles_list(as_json: bool) -> None:
    """List the built-in profiles."""
    from .profile import builtin_names, resolve

    rows = []
    for name in builtin_names():
        p = resolve([name], use_environ=False).profile
        rows.append({"name": name, "description": p.description, "env": p.env_dict()})
    if as_json:
        _emit_json(rows)
        return
    for r in rows:
        click.echo(f"{r['name']:<14} {r['description']}")
        for k, v in r["env"].items():
            click.echo(f"{'':<14}   {k}={v}")


@profiles.command("show")
@click.argument("name_or_file", nargs=-1)
@click.option("--nccl-env", "nccl_env", multiple=True, metavar="KEY=VALUE", help=ENV_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (the exact serialised profile).")
def profiles_show(name_or_file: tuple[str, ...], nccl_env: tuple[str, ...], as_json: bool) -> None:
    """Show the resolved profile NAME_OR_FILE (several are layered in order)."""
    resolution = _resolve(name_or_file, nccl_env, as_json=as_json)
    p = resolution.profile
    if as_json:
        _emit_json({**p.to_dict(), "warnings": [w.to_dict() for w in resolution.warnings]})
        return
    from .nccl_vars import lookup

    click.echo(f"Profile: {p.name}")
    if p.description:
        click.echo(f"  {p.description}")
    click.echo(f"Sources (lowest precedence first): {', '.join(p.sources) or '-'}")
    click.echo("Process-wide environment:")
    for k, v in p.env:
        spec = lookup(k)
        scope = f"{spec.scope}, {spec.ranks}" if spec else "unknown variable"
        click.echo(f"  {k}={v}   [{scope}]")
    for g, pairs in p.groups:
        click.echo(f"Group '{g}' (per-communicator overrides):")
        for k, v in pairs:
            click.echo(f"  {k}={v}")
    for n, pairs in p.nodes:
        click.echo(f"Node {n}:")
        for k, v in pairs:
            click.echo(f"  {k}={v}")
    click.echo("Policy: " + ", ".join(f"{k}={v}" for k, v in p.policy.to_dict().items()))


# --- explain / validate -------------------------------------------------------------------------


@main.command()
@click.argument("variable")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def explain(variable: str, as_json: bool) -> None:
    """What NCCL does with VARIABLE: values, scope, cross-rank rule, version changes."""
    from .nccl_vars import closest, lookup

    spec = lookup(variable.upper() if variable.upper().startswith(("NCCL_", "TORCH_NCCL_")) else variable)
    if spec is None:
        hints = closest(variable)
        msg = f"{variable}: not a variable this plugin knows." + (f" Did you mean {' or '.join(hints)}?" if hints else "")
        _fail_input(msg, as_json=as_json)
    if as_json:
        _emit_json(spec.to_dict())
        return
    scope = {
        "process": "read once per process and cached by NCCL: must be set before the first NCCL call; cannot differ per group",
        "communicator": "re-read at every communicator creation: may be overridden per SGLang group ([groups.<name>.env])",
        "torch_pg": "read by PyTorch when a ProcessGroupNCCL is built",
    }[spec.scope]
    ranks = {
        "must_match": "every rank must hold the same value (NCCL never checks; a mismatch hangs or corrupts data)",
        "node_local": "describes the local machine: may differ between nodes",
        "free": "diagnostic: may differ between ranks",
    }[spec.ranks]
    click.echo(f"{spec.name}")
    click.echo(f"  {spec.summary}")
    click.echo(f"  Values:  {spec.values}")
    click.echo(f"  Scope:   {scope}")
    click.echo(f"  Ranks:   {ranks}")
    if spec.since:
        click.echo(f"  Since:   NCCL {spec.since}")
    for c in spec.changes:
        click.echo(f"  Changed: {c}")
    if spec.warning:
        click.echo(f"  Warning: {spec.warning}")


@main.command()
@click.argument("name_or_file", nargs=-1)
@click.option("--nccl-env", "nccl_env", multiple=True, metavar="KEY=VALUE", help=ENV_HELP)
@click.option("--allow-unknown", is_flag=True, default=None, help="Accept NCCL_* names this plugin does not know.")
@click.option("--nccl-version", default=None, metavar="X.Y", help="Check against a specific NCCL release (e.g. 2.21 rejects 'func:list' syntax).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def validate(name_or_file: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None, nccl_version: str | None, as_json: bool) -> None:
    """Check profiles/files and --nccl-env settings with NCCL's parsing rules.

    Reports every problem at once. Exit 0 when valid (warnings allowed), 1 when not.
    """
    from .findings import ProfileError
    from .profile import resolve

    try:
        resolution = resolve(
            list(name_or_file), env_flags=list(nccl_env),
            policy_flags={"allow_unknown": allow_unknown, "nccl_version": nccl_version},
        )
    except ProfileError as exc:
        if as_json:
            _emit_json({"ok": False, "findings": [f.to_dict() for f in exc.findings]})
        else:
            click.echo(str(exc), err=True)
            for f in exc.findings:
                if f.severity == "warning":
                    click.echo(f"  warning: {f.message()}", err=True)
        sys.exit(1)
    if as_json:
        _emit_json({"ok": True, "profile": resolution.profile.to_dict(), "findings": [w.to_dict() for w in resolution.warnings]})
        return
    for w in resolution.warnings:
        click.echo(f"warning: {w.message()}")
    n = len(resolution.profile.all_names())
    click.echo(f"OK: profile '{resolution.profile.name}' is valid ({n} variable(s), {len(resolution.warnings)} warning(s)).")


# --- doctor -----------------------------------------------------------------------------------


@main.command()
@profile_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor(profiles: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None, as_json: bool) -> None:
    """Versions, chosen patch set and each hook target, NCCL conf files, effective settings.

    Reads SGLang's source instead of importing it, so it is quick and safe to run anywhere.
    """
    from .doctor import format_doctor, run_doctor

    profile = None
    if profiles or nccl_env:
        profile = _resolve(profiles, nccl_env, as_json=as_json, allow_unknown=allow_unknown).profile
    else:
        from .findings import ProfileError
        from .profile import resolve

        try:
            profile = resolve().profile if _env_has_profile() else None
        except ProfileError as exc:
            click.echo(f"SGLANG_EAGLE_NCCL* environment holds a profile that cannot be applied:\n{exc}", err=True)
    report = run_doctor(profile)
    if as_json:
        _emit_json(report.to_dict())
    else:
        click.echo(format_doctor(report))


def _env_has_profile() -> bool:
    import os

    from . import _gate

    return _gate.is_enabled() or bool(os.environ.get(_gate.ENV_ENV))


# --- env ----------------------------------------------------------------------------------------


@main.command("env")
@profile_options
@click.option("--audit-dir", default=None, metavar="DIR", help="Create one launch directory under DIR and include it, so every process of the launch audits into it.")
@click.option("--node-rank", type=int, default=None, help="Node rank (selects [nodes.<rank>.env]).")
@click.option("--format", "fmt", type=click.Choice(["shell", "json", "dotenv"]), default="shell", show_default=True)
def env_cmd(profiles: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None, audit_dir: str | None, node_rank: int | None, fmt: str) -> None:
    """Print the environment that enables the profile in processes you start yourself.

    For launchers that do not inherit your shell: Ray (runtime_env={"env_vars": ...}),
    Kubernetes (env / a ConfigMap), systemd (EnvironmentFile). The output holds the plugin's
    gate, the serialised profile and the NCCL variables themselves (so a process without the
    plugin installed still gets the values).

    \b
      eval "$(sglang-eagle-nccl env --profile pcie-8gpu)"
      sglang-eagle-nccl env --profile pcie-8gpu --format json   # for Ray's runtime_env
    """
    import shlex

    from . import _gate
    from .audit import new_launch_dir, write_launch_meta
    from .bootstrap import ENV_ROOT_PID

    profile = _resolve(profiles, nccl_env, allow_unknown=allow_unknown).profile
    out: dict[str, str] = dict(profile.process_env(node_rank))
    out[_gate.ENV_ENABLE] = "1"
    out[_gate.ENV_PROFILE] = profile.to_json()
    if node_rank is not None:
        out[_gate.ENV_NODE_RANK] = str(node_rank)
    if audit_dir:
        run_dir = new_launch_dir(audit_dir)
        write_launch_meta(run_dir, {"profile": profile.to_dict(), "launcher": "sglang-eagle-nccl env"})
        out[_gate.ENV_RUN_DIR] = str(run_dir)
        # No process of that launch is the launcher: they all audit as processes of one launch.
        out[ENV_ROOT_PID] = "external"
    if fmt == "json":
        _emit_json(out)
    elif fmt == "dotenv":
        for k, v in out.items():
            click.echo(f"{k}={v}")
    else:
        for k, v in out.items():
            click.echo(f"export {k}={shlex.quote(v)}")


# --- launch -----------------------------------------------------------------------------------


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@profile_options
@click.option("--audit-dir", default=None, metavar="DIR", help="Root of the audit directories (one sub-directory per launch).")
@click.option("--audit-required", is_flag=True, default=None, help="Fail instead of warning when the audit cannot be written.")
@click.option("--allow-partial", is_flag=True, default=None, help="Run on an SGLang newer than the plugin knows even if hook targets are missing.")
@click.option("--sglang-wins", multiple=True, metavar="NCCL_VAR", help="Keep SGLang's own value for this variable (e.g. NCCL_NVLS_ENABLE with --enable-nccl-nvls).")
@click.option("--python", default=None, metavar="PATH", help="Python interpreter of the SGLang environment (default: this one).")
@click.option("--dry-run", is_flag=True, help="Print the command and environment instead of starting SGLang.")
@click.argument("server_args", nargs=-1, type=click.UNPROCESSED)
def launch(
    profiles: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None, audit_dir: str | None,
    audit_required: bool | None, allow_partial: bool | None, sglang_wins: tuple[str, ...], python: str | None,
    dry_run: bool, server_args: tuple[str, ...],
) -> None:
    """Start `python -m sglang.launch_server SERVER_ARGS...` with the profile in every process.

    \b
    Example:
      sglang-eagle-nccl launch --profile pcie-8gpu -- --model-path M --tp 8 \\
          --speculative-algorithm EAGLE3 --speculative-draft-model-path D
    """
    from .launch import plan_launch, run

    args = list(server_args)
    if args and args[0] == "--":
        args = args[1:]
    resolution = _resolve(
        profiles, nccl_env, allow_unknown=allow_unknown, audit_dir=audit_dir, audit_required=audit_required,
        allow_partial=allow_partial, sglang_wins=list(sglang_wins) or None,
    )
    _check_sglang_coverage(resolution.profile, python)
    plan = plan_launch(resolution.profile, args, python=python)
    if dry_run:
        _emit_json({"argv": plan.argv, "env": plan.env_updates, "run_dir": str(plan.run_dir) if plan.run_dir else None})
        return
    if plan.run_dir:
        click.echo(f"[sglang-eagle-nccl] profile '{resolution.profile.name}'; audit: {plan.run_dir}", err=True)
    sys.exit(run(plan))


def _check_sglang_coverage(profile: Any, python: str | None) -> None:
    """Refuse early (before starting a server) when this SGLang is not covered."""
    if python:
        return  # another interpreter: its own bootstrap checks coverage at start-up
    from .doctor import package_version
    from .patchsets import PatchSetError, check_coverage, installed_root, require_coverage, select

    version = package_version("sglang")
    if version is None:
        _fail_input("sglang is not installed in this Python environment; install it (or pass --python PATH).")
    try:
        selection = select(version)
        root = installed_root()
        if not selection.tested and root is not None:
            require_coverage(check_coverage(selection, root), allow_partial=profile.policy.allow_partial)
    except PatchSetError as exc:
        _fail_input(str(exc))


# --- audit ------------------------------------------------------------------------------------


@main.command("audit")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--nccl-debug-dir", type=click.Path(exists=True), default=None, help="Also compare with NCCL's own debug files (NCCL_DEBUG_FILE=<dir>/nccl.%h.%p.log).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def audit_cmd(directory: str, nccl_debug_dir: str | None, as_json: bool) -> None:
    """Verdict per process and communicator for one launch (DIRECTORY or its newest launch).

    Exit 1 if any communicator missed the profile.
    """
    from .audit_report import format_text, load_report

    try:
        report = load_report(directory)
    except FileNotFoundError as exc:
        _fail_input(str(exc), as_json=as_json)
    data = report.to_dict()
    nccl_text = ""
    failed = report.verdict == "fail"
    if nccl_debug_dir:
        from .nccl_cross_check import cross_check

        check = cross_check(report, nccl_debug_dir)
        data["nccl_debug"] = check
        nccl_text = check["text"]
        failed = failed or not check["ok"]
    if as_json:
        _emit_json(data)
    else:
        click.echo(format_text(report))
        if nccl_text:
            click.echo("")
            click.echo(nccl_text)
    sys.exit(1 if failed else 0)


# --- preflight --------------------------------------------------------------------------------


@main.command()
@click.option("--tp", "tp_size", type=click.IntRange(1, 1024), required=True, help="Tensor-parallel size: ranks to spawn on this node.")
@click.option("--dp-attention", is_flag=True, help="Also build the attention_tp groups of DP attention (dp size = tp size).")
@profile_options
@click.option("--backend", type=click.Choice(["auto", "gloo", "nccl"]), default="auto", show_default=True, help="torch.distributed backend (auto: nccl with CUDA, gloo otherwise).")
@click.option("--audit-dir", default=None, metavar="DIR", help="Root of the audit directories.")
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
    from .preflight import PreflightError, run_preflight

    if nnodes > 1 and not dist_init_addr:
        _fail_input("--nnodes > 1 needs --dist-init-addr HOST:PORT (the same on every node)", as_json=as_json)
    resolution = _resolve(profiles, nccl_env, as_json=as_json, allow_unknown=allow_unknown, audit_dir=audit_dir)
    try:
        result = run_preflight(
            resolution.profile, tp_size=tp_size, dp_attention=dp_attention, backend=backend, timeout=timeout,
            nnodes=nnodes, node_rank=node_rank, dist_init_addr=dist_init_addr, exercise=not no_exercise,
            progress=None if as_json else (lambda m: click.echo(m, err=True)),
        )
    except PreflightError as exc:
        _fail_input(str(exc), as_json=as_json)
    if as_json:
        _emit_json(result.to_dict())
    else:
        click.echo(result.format_text())
    sys.exit(0 if result.ok else 1)


# --- analyze / estimate -----------------------------------------------------------------------


@main.command()
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
    from .analyze import analyze_logs, format_text, reports_to_json

    problems: list[str] = []
    if audit_dir:
        from .audit_report import load_report, problems_for_analyze

        try:
            problems = problems_for_analyze(load_report(audit_dir))
        except FileNotFoundError as exc:
            _fail_input(str(exc), as_json=as_json)
    try:
        reports = analyze_logs(list(logs), audit_problems=problems, baseline_decode_ms=baseline_decode_ms)
    except ValueError as exc:
        _fail_input(str(exc), as_json=as_json)
    if as_json:
        _emit_json(reports_to_json(reports))
    else:
        click.echo(format_text(reports))


@main.command()
@click.option("--accept-len", type=float, required=True, help="Mean accepted tokens per verify cycle (SGLang's 'accept len').")
@click.option("--verify-ms", type=float, required=True, help="One speculative cycle (draft + verify), ms.")
@click.option("--decode-ms", type=float, required=True, help="One plain decode step without speculation, ms.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def estimate(accept_len: float, verify_ms: float, decode_ms: float, as_json: bool) -> None:
    """Back-of-envelope: does speculation win at this accept length and cycle time?"""
    from .estimate import estimate as compute

    try:
        result = compute(accept_len, verify_ms, decode_ms)
    except ValueError as exc:
        _fail_input(str(exc), as_json=as_json)
    if as_json:
        _emit_json(result.to_dict())
    else:
        click.echo(result.format_text())


if __name__ == "__main__":  # pragma: no cover
    main()
