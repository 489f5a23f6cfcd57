"""How the plugin refuses, at every door into a process: one table, one function.

A *door* is a way the plugin's code enters a process. Whatever door a problem is found at (a value
that cannot be applied, hooks that cannot be installed, a native library that cannot be configured,
an audit that is required but cannot be written), :func:`refuse` does the same three things, in
this order:

1. records the refusal in the process's audit (when it can) and puts back every variable the plugin
   wrote in this process (:func:`~sglang_eagle_nccl.inproc.boot.environ.withdraw`): a refusal
   leaves ``os.environ`` exactly as it was, whatever raised and whenever;
2. says so once on stderr (never "applied" for a profile that is then refused);
3. takes the door's action from :data:`DOORS`: SGLang never runs unconfigured in that process, and
   any other program started from the same environment (pip, a notebook kernel) keeps running.

Imported only when something is refused (every SGLang child runs the doors at start).
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


# door -> (where the plugin's code enters, what a refusal there does)
DOORS: dict[str, tuple[str, str]] = {
    "interpreter_start": ("the .pth line / .start file, in every interpreter with the gate set",
                          "later: `import sglang` raises; this program keeps running"),
    "native_late": ("the native library, configured when ctypes is first imported (torch does)",
                    "later: `import sglang` raises; this program keeps running"),
    "sglang_import": ("the hooks, installed while `import sglang` runs",
                      "`import sglang` raises (SGLang's server CLI: exit 2)"),
    "entry_point": ("SGLang's plugin loader (sglang.srt.plugins, SGLang >= 0.5.11)",
                    "exit 2 (SGLang's loader would swallow an exception)"),
    "cli_flags": ("the --nccl-* flags of SGLang's server CLI", "exit 2 before SGLang resolves its arguments"),
    "preflight_rank": ("a rank of `sglang-eagle-nccl preflight`", "the rank reports the error and ends; preflight fails"),
}


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


def _raise_on_sglang_import(message: str) -> None:
    from sglang_eagle_nccl.inproc.boot.import_trigger import after_import

    def refuse_import(_module: "Any") -> None:
        raise RefusedError(
            f"sglang-eagle-nccl: the requested NCCL profile cannot be applied, so SGLang is not started "
            f"without it:\n{message}"
        )

    after_import("sglang", refuse_import)


def refuse(door: str, exc: BaseException) -> None:
    """Refuse at ``door`` (a key of :data:`DOORS`): withdraw, say it once, act. Raises for every door that
    must stop now; returns for the doors that only arm the refusal of a later ``import sglang``."""
    if door not in DOORS:  # a programming error must not become a silent pass
        raise ValueError(f"unknown door {door!r}")
    message = message_of(exc)
    if STATE.audit is not None:
        try:
            STATE.audit.write("refused", door=door, message=message)
        except Exception:  # noqa: BLE001 - the audit may be what failed; the refusal still happens
            pass
    from sglang_eagle_nccl.inproc.boot.environ import withdraw

    put_back = withdraw()
    STATE.refused = message
    log(
        f"NCCL profile not applied: {summary_line(message)}"
        + (" (the variables it had written were put back)" if put_back else "")
        + ". SGLang will refuse to start in this process; fix it or unset SGLANG_EAGLE_NCCL "
          "(`sglang-eagle-nccl validate` lists every problem)",
        once="refused",
    )
    if door in ("interpreter_start", "native_late"):
        _raise_on_sglang_import(message)
        return
    if door == "sglang_import":
        if isinstance(exc, PluginStop) and is_sglang_server_cli(list(getattr(sys, "orig_argv", sys.argv))):
            # SGLang's own server CLI is a launcher: exit 2 with the message, not a traceback.
            log(message)
            raise SystemExit(2) from None
        raise RefusedError(message) from exc
    if door in ("entry_point", "cli_flags"):
        log(message)
        raise SystemExit(2) from None
    raise RefusedError(message) from exc  # preflight_rank


def stop(exc: "PluginStop") -> "NoReturn":
    """End SGLang's start-up for a conflict a hook found: exit 2 from the server CLI, raise it elsewhere."""
    if is_sglang_server_cli(list(getattr(sys, "orig_argv", sys.argv))):
        log(str(exc))
        raise SystemExit(2)
    raise exc
