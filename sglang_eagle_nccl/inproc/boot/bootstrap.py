"""Ways into a process: interpreter start, SGLang's plugin loader, and the refusal when they fail.

- the ``.pth`` line (every process of every SGLang version, multiprocessing ``spawn`` children
  included) calls :func:`interpreter_start` through :mod:`sglang_eagle_nccl._gate`;
- SGLang's plugin loader (``sglang.srt.plugins`` entry point, >= 0.5.11) calls
  :func:`sglang_plugin`, which also registers the hooks through SGLang's HookRegistry;
- SGLang's server CLI flags (``--nccl-profile`` ...) activate through
  :mod:`sglang_eagle_nccl.inproc.hooks.hook_cli`.

All of them apply the profile with :mod:`~sglang_eagle_nccl.inproc.boot.activation` (check
everything, then write) and install the hooks with :mod:`~sglang_eagle_nccl.inproc.hooks.installer`
once SGLang is imported. Any failure refuses SGLang in that process (fail closed).
"""

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.inproc.boot import activation
from sglang_eagle_nccl.inproc.boot.state import STATE, fault_point

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any


def _when_sglang_imported(callback: "Any") -> None:
    from sglang_eagle_nccl.inproc.boot.import_trigger import after_import

    after_import("sglang", callback)


def _install_after_import(_module: "Any") -> None:
    # Runs inside `import sglang`: an error here makes that import fail, which is the point
    # (SGLang must not run with hooks missing), so say why first. The installer (wrapt,
    # inspect ...) is imported only now: processes that never import SGLang never pay for it.
    from sglang_eagle_nccl.inproc.boot import native
    from sglang_eagle_nccl.inproc.hooks import installer

    try:
        installer.install_patches()
        fault_point("import.hooks")
        native.sync()
        fault_point("import.native")
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        from sglang_eagle_nccl.inproc.refusal import refuse

        refuse("sglang_import", exc)


def activate(*, origin: str) -> None:
    """Apply the profile of this process's environment (idempotent); hooks follow SGLang's import."""
    if STATE.active or STATE.refused is not None:
        # Once refused, a process stays refused: a second pass of the .pth line (a venv with lib64 -> lib),
        # or a later door, must not write the profile again.
        return
    activation.apply(activation.plan(), origin=origin)
    # No "applied" line here: a later door (the first `import ctypes`, `import sglang`, SGLang's plugin
    # loader, the launch flags) can still refuse this profile, and stderr must never say "applied" before
    # "not applied". The launcher says the profile is in force when SGLang opens its launch.
    fault_point("bootstrap.activated")
    _when_sglang_imported(_install_after_import)


def interpreter_start(*, enabled: bool, cli_flags: bool) -> None:
    """Called by the ``.pth`` gate. Never lets an error stop an unrelated program."""
    try:
        if enabled:
            activate(origin="pth")
    except BaseException as exc:  # noqa: BLE001 - fail closed for SGLang, keep every other program running
        if isinstance(exc, KeyboardInterrupt):
            raise
        # Imported only on failure: every SGLang child runs this at interpreter start.
        import sys

        from sglang_eagle_nccl.inproc.refusal import refuse, start_door

        refuse(start_door(list(getattr(sys, "orig_argv", sys.argv))), exc)
        return
    # Launch flags wherever SGLang's server arguments are parsed in a launch's root: SGLang's own
    # CLI, custom scripts calling prepare_server_args / ServerArgs.add_cli_args, and SGLang's
    # benchmark scripts, which never call load_plugins().
    if cli_flags or (enabled and STATE.is_root):
        _when_sglang_imported(lambda _m: install_cli_hooks(mechanism="wrapt"))


def install_cli_hooks(*, mechanism: str) -> None:
    """Add the launch flags to SGLang's parser in this process (see installer.install_cli_hooks)."""
    from sglang_eagle_nccl.inproc.hooks import installer

    try:
        installer.install_cli_hooks(mechanism=mechanism)
        fault_point("cli_hooks.added")
    except BaseException as exc:  # noqa: BLE001 - launch flags SGLang's parser would not know: fail closed
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            raise
        from sglang_eagle_nccl.inproc.refusal import refuse

        refuse("cli_hooks", exc)


def sglang_plugin() -> None:
    """``sglang.srt.plugins`` entry point: SGLang >= 0.5.11 calls it in its processes.

    SGLang's loader swallows exceptions from plugins, so a profile that cannot be applied ends
    the process with SystemExit(2) instead: the user asked for it, so it must not be lost in a log.
    """
    if STATE.refused is not None:
        # Refused at an earlier door of this process: SGLang's loader would swallow the armed exception.
        from sglang_eagle_nccl.inproc.refusal import refuse

        refuse("entry_point", RuntimeError(STATE.refused))
    if not STATE.active and not names.is_enabled():
        return
    from sglang_eagle_nccl.inproc.boot import native
    from sglang_eagle_nccl.inproc.hooks import installer

    try:
        activate(origin="entry_point")
        fault_point("entry_point.activated")
        installer.install_patches(from_entry_point=True)
        fault_point("entry_point.hooks")
        native.sync()
        fault_point("entry_point.native")
    except BaseException as exc:  # noqa: BLE001 - fail closed
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            raise
        from sglang_eagle_nccl.inproc.refusal import refuse

        refuse("entry_point", exc)
