"""`profiles list|show`, `explain`, `validate`: profiles and NCCL knowledge."""

from __future__ import annotations

import sys
from typing import Any

import click

from sglang_eagle_nccl.cli.common import ENV_HELP, emit_json, environment_profile, fail_input, resolve_or_exit

# --- profiles ---------------------------------------------------------------------------------


@click.group()
def profiles() -> None:
    """List and show NCCL profiles."""


@profiles.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def profiles_list(as_json: bool) -> None:
    """List the built-in profiles."""
    from sglang_eagle_nccl.profile.resolve import resolve
    from sglang_eagle_nccl.profile.sources import builtin_names

    rows = []
    for name in builtin_names():
        p = resolve([name], use_environ=False).profile
        rows.append({"name": name, "description": p.description, "env": p.env_dict(),
                     "tuner_rules": list(p.tuner_rules)})
    if as_json:
        emit_json(rows)
        return
    # Everything a profile sets: its variables and its tuner rules (pcie-8gpu-eagle's choice is a rule).
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        click.echo(f"{r['name']:<{width}}  {r['description']}")
        for k, v in r["env"].items():
            click.echo(f"{'':<{width}}    {k}={v}")
        for line in _rule_lines(r["tuner_rules"]):
            click.echo(f"{'':<{width}}    {line}")


def _rule_lines(rules: Any) -> list[str]:
    """One line per tuner rule, in the order the tuner tries them (first match wins)."""
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import rule_from_dict

    return [f"tuner rule {i}: {rule_from_dict(r).describe()}" for i, r in enumerate(rules, 1)]


@profiles.command("show")
@click.argument("name_or_file", nargs=-1)
@click.option("--nccl-env", "nccl_env", multiple=True, metavar="KEY=VALUE", help=ENV_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (the exact serialised profile).")
def profiles_show(name_or_file: tuple[str, ...], nccl_env: tuple[str, ...], as_json: bool) -> None:
    """Show the resolved profile NAME_OR_FILE (several are layered in order).

    Without arguments: the profile a process started from this shell would apply (the serialised
    SGLANG_EAGLE_NCCL_PROFILE when set, else the SGLANG_EAGLE_NCCL* variables).
    """
    origin = None
    warnings: list[Any] = []
    found = None
    if not (name_or_file or nccl_env):
        from sglang_eagle_nccl.contract.findings import ProfileError

        try:
            found = environment_profile()
        except ProfileError as exc:
            fail_input(f"the SGLANG_EAGLE_NCCL* environment holds a profile that cannot be applied:\n{exc}",
                       as_json=as_json, findings=exc.findings)
    if found is not None:
        p, origin = found
    else:
        resolution = resolve_or_exit(name_or_file, nccl_env, as_json=as_json)
        p, warnings = resolution.profile, list(resolution.warnings)
    if as_json:
        emit_json({**p.to_dict(), "from": origin, "warnings": [w.to_dict() for w in warnings]})
        return
    from sglang_eagle_nccl.knowledge.nccl.variables import lookup

    click.echo(f"Profile: {p.name}" + (f"   (from {origin})" if origin else ""))
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
    if p.tuner_rules:
        click.echo("Tuner rules (the plugin's NCCL tuner; first match wins):")
        for line in _rule_lines(p.tuner_rules):
            click.echo(f"  {line}")
    click.echo("Policy: " + ", ".join(f"{k}={v}" for k, v in p.policy.to_dict().items()))


# --- explain / validate -------------------------------------------------------------------------


@click.command()
@click.argument("variable")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def explain(variable: str, as_json: bool) -> None:
    """What NCCL does with VARIABLE: values, scope, cross-rank rule, version changes."""
    from sglang_eagle_nccl.knowledge.nccl.variables import closest, lookup

    spec = lookup(variable.upper() if variable.upper().startswith(("NCCL_", "TORCH_NCCL_")) else variable)
    if spec is None:
        hints = closest(variable)
        msg = f"{variable}: not a variable this plugin knows." + (f" Did you mean {' or '.join(hints)}?" if hints else "")
        fail_input(msg, as_json=as_json)
    if as_json:
        emit_json(spec.to_dict())
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


@click.command()
@click.argument("name_or_file", nargs=-1)
@click.option("--nccl-env", "nccl_env", multiple=True, metavar="KEY=VALUE", help=ENV_HELP)
@click.option("--allow-unknown", is_flag=True, default=None, help="Accept NCCL_* names this plugin does not know.")
@click.option("--nccl-version", default=None, metavar="X.Y", help="Check against a specific NCCL release (e.g. 2.21 rejects 'func:list' syntax).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def validate(name_or_file: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None, nccl_version: str | None, as_json: bool) -> None:
    """Check profiles/files and --nccl-env settings with NCCL's parsing rules.

    Also runs activation's own checks for a launch from this shell: another NCCL env/tuner
    plugin in the environment, [[tuner.rules]] without the native library, a serialised profile
    too large for Linux to start a process with. Reports every problem at once. Exit 0 when
    valid (warnings allowed), 1 when not.
    """
    import os

    from sglang_eagle_nccl.contract.findings import ProfileError
    from sglang_eagle_nccl.decision.decide import Inputs, decide

    # The one decision a launch from this shell gets (its launcher and every process it starts):
    # the profile's own rules, then what activation would refuse (another NCCL plugin here, rules
    # without the native library, a serialised profile too large to start a process with).
    decision = decide(Inputs(os.environ, tuple(name_or_file), tuple(nccl_env),
                             {"allow_unknown": allow_unknown, "nccl_version": nccl_version}))
    try:
        if decision.resolution_error is not None:
            raise decision.resolution_error
        if decision.refusals:
            raise ProfileError([*decision.warnings, *decision.refusals])
    except ProfileError as exc:
        if as_json:
            emit_json({"ok": False, "findings": [f.to_dict() for f in exc.findings]})
        else:
            click.echo(exc.text(), err=True)  # validate only checks: there is nothing it could have applied
            for f in exc.findings:
                if f.severity == "warning":
                    click.echo(f"  warning: {f.message()}", err=True)
        sys.exit(1)
    profile = decision.profile
    if as_json:
        emit_json({"ok": True, "profile": profile.to_dict(), "findings": [w.to_dict() for w in decision.warnings]})
        return
    for w in decision.warnings:
        click.echo(f"warning: {w.message()}")
    n = len(profile.all_names())
    click.echo(f"OK: profile '{profile.name}' is valid ({n} variable(s), {len(decision.warnings)} warning(s)).")
