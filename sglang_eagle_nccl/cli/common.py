"""Helpers shared by the command modules: JSON output, input errors (exit 2), profile options."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

PROFILE_HELP = (
    "Profile: a built-in name (see `profiles list`) or a TOML file. Repeat to layer profiles "
    "(later ones override earlier ones). Default: $SGLANG_EAGLE_NCCL."
)
ENV_HELP = "KEY=VALUE NCCL setting on top of the profile (repeatable), e.g. --nccl-env NCCL_ALGO=Tree."


def strict(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, Infinity: not JSON) replaced by null."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def emit_json(data: Any) -> None:
    # Strict JSON (RFC 8259): a consumer's parser must never meet NaN, whatever a computation gave.
    click.echo(json.dumps(strict(data), indent=2, sort_keys=True, default=str, allow_nan=False))


def fail_input(message: str, *, as_json: bool = False, findings: Sequence[Any] = ()) -> NoReturn:
    if as_json:
        emit_json({"ok": False, "error": message, "findings": [f.to_dict() for f in findings]})
    else:
        click.echo(message, err=True)
    sys.exit(2)


def resolve_or_exit(profiles: Sequence[str], env_flags: Sequence[str], *, as_json: bool = False, **policy: Any) -> Any:
    from sglang_eagle_nccl.contract.findings import ProfileError
    from sglang_eagle_nccl.profile.resolve import resolve

    try:
        resolution = resolve(list(profiles), env_flags=list(env_flags), policy_flags=policy)
    except ProfileError as exc:
        fail_input(str(exc), as_json=as_json, findings=exc.findings)
    if not as_json:
        for w in resolution.warnings:
            click.echo(f"warning: {w.message()}", err=True)
    return resolution


def decide_or_exit(profiles: Sequence[str], env_flags: Sequence[str], *, as_json: bool = False,
                   node_rank: int | None = None, activation: bool = True, launch: dict[str, Any] | None = None,
                   **policy: Any) -> Any:
    """The launch's decision (decision/decide.py) for these options and this shell; exit 2 when refused.

    ``activation`` False: only the profile itself must be valid (a launch with another interpreter,
    whose own activation decides with its own installation). ``launch``: the launcher's own
    :class:`~sglang_eagle_nccl.decision.decide.Inputs` (``opens_launch``, ``root_pid`` ...).
    """
    import os

    from sglang_eagle_nccl.contract.findings import ProfileError
    from sglang_eagle_nccl.decision.decide import Inputs, decide

    decision = decide(Inputs(os.environ, tuple(profiles), tuple(env_flags), policy, node_rank, **(launch or {})))
    if decision.resolution_error is not None:
        exc = decision.resolution_error
        fail_input(str(exc), as_json=as_json, findings=exc.findings)
    if not as_json:
        for w in decision.warnings:
            click.echo(f"warning: {w.message()}", err=True)
    if activation and decision.refusals:
        fail_input(str(ProfileError(decision.refusals)), as_json=as_json, findings=decision.refusals)
    return decision


def profile_options(func: Any) -> Any:
    func = click.option("--nccl-env", "nccl_env", multiple=True, metavar="KEY=VALUE", help=ENV_HELP)(func)
    func = click.option("--profile", "-p", "profiles", multiple=True, metavar="NAME_OR_FILE", help=PROFILE_HELP)(func)
    func = click.option("--allow-unknown", is_flag=True, default=None, help="Accept NCCL_* names this plugin does not know (new NCCL releases).")(func)
    return func


def environment_profile() -> tuple[Any, str] | None:
    """The profile a process started from this shell would apply, and where it comes from.

    Exactly what activation reads: the serialised ``SGLANG_EAGLE_NCCL_PROFILE`` when set (through the
    one wire decoder, which refuses it when the shell's other ``SGLANG_EAGLE_NCCL*`` variables
    changed since), else the ``SGLANG_EAGLE_NCCL*`` variables. None when the plugin is not enabled.
    Raises ProfileError when that profile cannot be applied.
    """
    import os

    from sglang_eagle_nccl.contract import names

    text = os.environ.get(names.ENV_PROFILE)
    if text:
        from sglang_eagle_nccl.profile.model import Profile
        from sglang_eagle_nccl.profile.resolve import decode_handoff

        decoded = decode_handoff(text, os.environ)
        profile = decoded.profile or Profile.from_validated_data(decoded.data)
        return profile, f"{names.ENV_PROFILE} (serialised by a launcher)"
    if names.is_enabled() or os.environ.get(names.ENV_ENV):
        from sglang_eagle_nccl.profile.resolve import resolve

        return resolve().profile, "the SGLANG_EAGLE_NCCL* variables"
    return None
