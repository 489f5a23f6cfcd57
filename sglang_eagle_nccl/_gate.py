"""The gate between interpreter start and the plugin.

``sglang_eagle_nccl.pth`` (installed at the root of site-packages) holds one line that every
Python interpreter of the environment executes at start-up, multiprocessing ``spawn``
children included. When the plugin is not enabled that line is one ``os.environ.get``; this
module is imported only when ``SGLANG_EAGLE_NCCL`` is set, or by SGLang's own plugin loader
(>= 0.5.11), which imports every installed plugin's entry point. It imports nothing beyond
``os`` and ``sys``; the plugin proper (:mod:`sglang_eagle_nccl.inproc.boot.bootstrap`) is imported only when
enabled, or when SGLang's server CLI runs with ``--nccl-*`` flags or ``--help``.
"""

import os
import sys

from sglang_eagle_nccl.contract.names import ENV_ENABLE, is_enabled, is_sglang_server_cli

OWN_COMMAND = "sglang-eagle-nccl"


def wants_cli_flags(argv: list[str]) -> bool:
    """True when this interpreter runs SGLang's server CLI with --nccl-* flags or --help.

    ``python -m sglang.launch_server`` and the ``sglang serve`` console script are the two
    entry points that get the plugin's launch flags; any other program is left alone.
    """
    if not is_sglang_server_cli(argv):
        return False
    return any(a.startswith("--nccl") or a in ("--help", "-h") for a in argv)


def _is_own_cli(argv: list[str]) -> bool:
    # The plugin's own CLI resolves profiles itself and must run even when the environment
    # holds a profile that cannot be applied (that is what `doctor` and `validate` are for).
    return len(argv) > 1 and os.path.basename(argv[1]) == OWN_COMMAND


def pth_entry() -> None:
    """Called from the ``.pth`` line when the gate or the command line asked for the plugin."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if _is_own_cli(argv):
        return
    enabled = is_enabled()
    cli = wants_cli_flags(argv)
    if not (enabled or cli):
        return
    from sglang_eagle_nccl.inproc.boot import bootstrap

    bootstrap.interpreter_start(enabled=enabled, cli_flags=cli)


def start() -> None:
    """PEP 829 ``.start`` entry point (Python >= 3.15): same gate as the ``.pth`` line."""
    if os.environ.get(ENV_ENABLE):
        pth_entry()


def sglang_plugin() -> None:
    """``sglang.srt.plugins`` entry point (SGLang >= 0.5.11 calls it in its processes).

    SGLang's loader imports the entry point's module in every process where it loads plugins,
    enabled or not; this tiny module is that import, and the plugin proper is imported only
    when the gate is set (or the CLI flags already activated it in this process).
    """
    state = sys.modules.get("sglang_eagle_nccl.inproc.boot.state")
    if not is_enabled() and not (state is not None and state.STATE.active):
        if wants_cli_flags(list(getattr(sys, "orig_argv", sys.argv))):
            # SGLang's server CLI with --nccl-* or --help: add the launch flags through SGLang's
            # HookRegistry (its plugin loader runs before the arguments are parsed).
            from sglang_eagle_nccl.inproc.boot import bootstrap

            bootstrap.install_cli_hooks(mechanism="hook_registry")
        return
    from sglang_eagle_nccl.inproc.boot import bootstrap

    bootstrap.sglang_plugin()
