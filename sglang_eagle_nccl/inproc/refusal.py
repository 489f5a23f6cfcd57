"""How the plugin refuses: fail closed, loudly, without hurting unrelated programs.

Two situations:

- at interpreter start (or from SGLang's plugin loader) the requested profile cannot be applied:
  :func:`refuse_sglang` prints one line once, leaves ``os.environ`` as it was, and makes
  ``import sglang`` fail in this process with the full message. Any other Python program started
  from the same environment (pip, a notebook kernel ...) keeps running;
- a hook finds a conflict while SGLang starts (e.g. the profile would override a value SGLang
  sets for deterministic inference): :func:`stop` ends SGLang's server CLI with exit status 2,
  or raises the error to the caller of the Engine API.
"""

import sys

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.contract.names import is_sglang_server_cli
from sglang_eagle_nccl.inproc.boot.state import STATE

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, NoReturn


class RefusedError(PluginStop, RuntimeError):
    """SGLang may not run in this process: the NCCL profile the user asked for is not in force."""


def message_of(exc: BaseException) -> str:
    if isinstance(exc, PluginStop):
        return str(exc)
    return f"internal error while applying the NCCL profile ({exc!r}); nothing was applied"


def summary_line(message: str) -> str:
    """One line for stderr: the first problem of a possibly long message."""
    lines = [ln.strip(" -") for ln in message.splitlines() if ln.strip()]
    if not lines:
        return "the NCCL profile cannot be applied"
    if len(lines) > 1 and lines[0].endswith("nothing was applied:"):
        more = len(lines) - 2
        return lines[1] + (f" (and {more} more problem(s))" if more > 0 else "")
    return lines[0] + (" ..." if len(lines) > 1 else "")


def refuse_sglang(exc: BaseException) -> None:
    """Leave this process running, but make SGLang refuse to start in it (see module docstring)."""
    from sglang_eagle_nccl.inproc.boot.import_trigger import after_import

    message = message_of(exc)
    STATE.refused = message
    log(
        f"NCCL profile not applied: {summary_line(message)}. SGLang will refuse to start in this process; "
        f"fix it or unset SGLANG_EAGLE_NCCL (`sglang-eagle-nccl validate` lists every problem)",
        once="refused",
    )

    def refuse(_module: "Any") -> None:
        raise RefusedError(
            f"sglang-eagle-nccl: the requested NCCL profile cannot be applied, so SGLang is not started "
            f"without it:\n{message}"
        )

    after_import("sglang", refuse)


def stop(exc: "PluginStop") -> "NoReturn":
    """End SGLang's start-up: exit 2 with the message from the server CLI, raise it elsewhere."""
    if is_sglang_server_cli(list(getattr(sys, "orig_argv", sys.argv))):
        log(str(exc))
        raise SystemExit(2)
    raise exc
