"""Hooks on SGLang's server-argument parser: the ``--nccl-*`` launch flags.

``ServerArgs.add_cli_args`` (a static method every CLI, custom script and benchmark script of
SGLang calls to build its parser) gets the flags; ``ServerArgs.from_cli_args`` reads them before
SGLang drops unknown attributes, resolves and validates the profile, and activates it in this
process before SGLang resolves its own arguments or spawns anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.inproc.boot import activation, environ
from sglang_eagle_nccl.inproc.boot.state import STATE, fault_point

FLAG_HELP = {
    "--nccl-profile": "NCCL profile for every SGLang process (sglang-eagle-nccl): a built-in name "
    "(sglang-eagle-nccl profiles list) or a TOML file. Repeat to layer profiles.",
    "--nccl-env": "KEY=VALUE NCCL setting on top of the profile (repeatable), validated with NCCL's "
    "own parsing rules, e.g. --nccl-env NCCL_ALGO=Tree.",
    "--nccl-audit-dir": "Directory for the per-process audit of NCCL settings (default: "
    "<tmp>/sglang-eagle-nccl-<uid>); a relative DIR is made absolute against the current working "
    "directory. Read it with `sglang-eagle-nccl audit DIR`.",
    "--nccl-allow-partial": "Run even if this SGLang release is newer than the plugin knows and some "
    "hook targets are missing; the audit records what is uncovered.",
    "--nccl-ledger": "Count every collective SGLang issues, by speculative phase, implementation and size, in "
    "every process (the phase ledger); read it with `sglang-eagle-nccl audit DIR --ledger`.",
}


def cli_add_flags(result: Any, instance: Any, arguments: dict) -> None:
    """After ``ServerArgs.add_cli_args(parser)``: add the plugin's launch flags (idempotent)."""
    parser = arguments.get("parser")
    if parser is None or "--nccl-profile" in getattr(parser, "_option_string_actions", {}):
        return
    group = parser.add_argument_group(
        "NCCL settings (sglang-eagle-nccl)",
        "Apply and audit an NCCL profile in every process SGLang spawns.",
    )
    group.add_argument("--nccl-profile", action="append", default=None, metavar="NAME_OR_FILE", help=FLAG_HELP["--nccl-profile"])
    group.add_argument("--nccl-env", action="append", default=None, metavar="KEY=VALUE", help=FLAG_HELP["--nccl-env"])
    group.add_argument("--nccl-audit-dir", default=None, metavar="DIR", help=FLAG_HELP["--nccl-audit-dir"])
    group.add_argument("--nccl-allow-partial", action="store_true", default=False, help=FLAG_HELP["--nccl-allow-partial"])
    group.add_argument("--nccl-ledger", action="store_true", default=False, help=FLAG_HELP["--nccl-ledger"])


def activate_from_cli(
    profiles: Sequence[str], env_flags: Sequence[str], *, audit_dir: str | None, allow_partial: bool,
    node_rank: int | None = None, ledger: bool = False,
) -> None:
    """The server CLI got --nccl-* flags: resolve, validate, activate; exit 2 on any problem.

    Nothing is written unless every check passed; a flag profile replaces one the environment
    activated at interpreter start (nothing has been spawned yet).
    """
    from sglang_eagle_nccl.profile.resolve import resolve

    saved_rank = os.environ.get(names.ENV_NODE_RANK)
    try:
        if node_rank is not None:
            # --node-rank of this launcher selects [nodes.<rank>.env], here and in every child.
            environ.write({names.ENV_NODE_RANK: str(node_rank)})
        resolution = resolve(
            list(profiles),
            env_flags=list(env_flags),
            policy_flags={"audit_dir": audit_dir, "allow_partial": True if allow_partial else None,
                          "ledger": True if ledger else None},
        )
        for warning in resolution.warnings:
            log(f"warning: {warning.message()}")
        if STATE.active:
            activation.reconfigure(resolution.profile, reason="the --nccl-* flags")
        else:
            activation.apply(activation.plan(resolution.profile), origin="cli")
        if node_rank is not None:
            # Written here, not by activation: a later refusal (the hooks the flags install) puts it back too.
            STATE.saved_before.setdefault(names.ENV_NODE_RANK, saved_rank)
        fault_point("cli_flags.activated")
    except BaseException as exc:  # noqa: BLE001 - fail closed: SGLang must not start unconfigured
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            raise
        from sglang_eagle_nccl.inproc.refusal import refuse

        environ.put_back({names.ENV_NODE_RANK: saved_rank})
        refuse("cli_flags", exc)


def cli_capture(original: Callable[..., Any], instance: Any, args: tuple, kwargs: dict, arguments: dict) -> Any:
    """Around ``ServerArgs.from_cli_args(args)``: read the flags before SGLang drops them."""
    namespace = arguments.get("args")
    profiles = getattr(namespace, "nccl_profile", None) or []
    env_flags = getattr(namespace, "nccl_env", None) or []
    audit_dir = getattr(namespace, "nccl_audit_dir", None)
    allow_partial = bool(getattr(namespace, "nccl_allow_partial", False))
    ledger = bool(getattr(namespace, "nccl_ledger", False))
    if profiles or env_flags or audit_dir or allow_partial or ledger:
        node_rank = getattr(namespace, "node_rank", None)
        activate_from_cli(
            profiles, env_flags, audit_dir=audit_dir, allow_partial=allow_partial,
            node_rank=node_rank if isinstance(node_rank, int) else None, ledger=ledger,
        )
    return original(*args, **kwargs)
