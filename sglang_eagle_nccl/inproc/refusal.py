"""The door table: every way the plugin's code enters a process, and what a refusal does at each one.

A *door* is a way the plugin's code enters a process. Whatever door a problem is found at (a value
that cannot be applied, hooks that cannot be installed, a native library that cannot be configured,
an audit that is required but cannot be written, an internal error), the door catches it and calls
:func:`refuse` -- the one function that ends a refusal; no door exits, raises a refusal or writes a
``refused`` record itself (tests/unit/inproc/test_door_table.py holds that against the source). It
does the same three things, in this order:

1. records the refusal in the process's audit (when it can) and puts back every variable the plugin
   wrote in this process (:func:`~sglang_eagle_nccl.inproc.boot.environ.withdraw`): a refusal
   leaves ``os.environ`` exactly as it was, whatever raised and whenever;
2. says so once on stderr, one line (the plugin says nothing positive before SGLang's launch, so no
   "applied" line ever precedes it);
3. takes the door's action from :data:`DOORS`: SGLang never runs unconfigured in that process, and
   any other program started from the same environment (pip, a notebook kernel) keeps running.

A second refusal in a process already refused (a later door meets the same profile) takes only the
door's action: the refusal is recorded and said once.

docs/fail-closed.md's table is :func:`table_rows` (tests/unit/inproc/test_door_table.py compares them).

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


# What a refusal does at a door (the door's action):
ARM = "arm"  # return; a later `import sglang` raises (the program that started keeps running)
RAISE = "raise"  # raise RefusedError now
RAISE_OR_EXIT = "raise_or_exit"  # raise; SGLang's server CLI exits 2 with the message instead of a traceback
EXIT = "exit"  # SystemExit(2) with the message (a caller that would swallow an exception)

# door -> (where the plugin's code enters, what a refusal there does, the action)
DOORS: dict[str, tuple[str, str, str]] = {
    "interpreter_start": ("interpreter start: the `.pth` line / `.start` file, in every interpreter with the gate set",
                          "a later `import sglang` raises with the whole message; this program keeps running (exit 0)",
                          ARM),
    "ray_actor": ("a Ray actor's start: the `.pth` line in the worker Ray starts with the actor's `runtime_env`",
                  "a later `import sglang` raises: the actor's construction fails and the driver reports it",
                  ARM),
    "native_late": ("the first `import ctypes` (torch does it): the native library is configured then",
                    "a later `import sglang` raises with the whole message; this program keeps running", ARM),
    "sglang_import": ("`import sglang`: the hooks are installed and the native library synced while it runs",
                      "`import sglang` raises; SGLang's server CLI exits 2", RAISE_OR_EXIT),
    "entry_point": ("SGLang's plugin loader (`sglang.srt.plugins` entry point, SGLang >= 0.5.11)",
                    "exit 2 (SGLang's loader would swallow an exception)", EXIT),
    "cli_flags": ("the `--nccl-*` flags of SGLang's server CLI (`ServerArgs.from_cli_args`)",
                  "exit 2 before SGLang resolves its arguments", EXIT),
    "cli_hooks": ("the launch-flag hook installer: `--nccl-*` added to SGLang's parser, the patch set installed once "
                  "the flags activated", "exit 2 before SGLang resolves its arguments", EXIT),
    "preflight_rank": ("a rank of `sglang-eagle-nccl preflight`",
                       "the rank reports the error and ends; `preflight` fails (exit 1) naming it", RAISE),
}

# The test-only fault points (inproc/boot/state.py fault_point) after the first write, by the door whose
# entry function reaches them first in a process of a launch. The door tests inject each one in a real process.
FAULT_STEPS: dict[str, tuple[str, ...]] = {
    "interpreter_start": ("activation.written", "activation.recorded", "bootstrap.activated"),
    "native_late": ("native.late",),
    "sglang_import": ("import.hooks", "import.native"),
    "entry_point": ("entry_point.activated", "entry_point.hooks", "entry_point.native"),
    "cli_flags": ("cli_flags.activated",),
    "cli_hooks": ("cli_hooks.added", "cli_hooks.installed"),
}

RAY_WORKER = "default_worker.py"


def start_door(argv: "list[str]") -> str:
    """The door of interpreter start: a Ray worker (the process of an actor) is its own row of the table."""
    return "ray_actor" if any(a.endswith(RAY_WORKER) for a in argv[:3]) else "interpreter_start"


def table_rows() -> "list[tuple[str, str]]":
    """docs/fail-closed.md's table: ``(door, refusal)`` per door, in the table's order."""
    return [(where, action) for where, action, _kind in DOORS.values()]


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
    """Refuse at ``door`` (a key of :data:`DOORS`): record, withdraw, say it once, act. Raises for every door
    that must stop now; returns for the doors that only arm the refusal of a later ``import sglang``."""
    if door not in DOORS:  # a programming error must not become a silent pass
        raise ValueError(f"unknown door {door!r}")
    first = STATE.refused is None
    message = message_of(exc) if first else STATE.refused
    if first and STATE.audit is not None:
        try:
            STATE.audit.write("refused", door=door, message=message)
        except Exception:  # noqa: BLE001 - the audit may be what failed; the refusal still happens
            pass
    from sglang_eagle_nccl.inproc.boot.environ import withdraw

    # Always: whatever was written since an earlier refusal goes back too.
    put_back = withdraw()
    if first:
        STATE.refused = message
        log(
            f"NCCL profile not applied: {summary_line(message)}"
            + (" (the variables it had written were put back)" if put_back else "")
            + ". SGLang will refuse to start in this process; fix it or unset SGLANG_EAGLE_NCCL "
              "(`sglang-eagle-nccl validate` lists every problem)",
            once="refused",
        )
    action = DOORS[door][2]
    if action == ARM:
        _raise_on_sglang_import(message)
        return
    if action == RAISE_OR_EXIT:
        if isinstance(exc, PluginStop) and is_sglang_server_cli(list(getattr(sys, "orig_argv", sys.argv))):
            # SGLang's own server CLI is a launcher: exit 2 with the message, not a traceback.
            log(message)
            raise SystemExit(2) from None
        raise RefusedError(message) from exc
    if action == EXIT:
        log(message)
        raise SystemExit(2) from None
    raise RefusedError(message) from exc  # RAISE


def stop(exc: "PluginStop") -> "NoReturn":
    """End SGLang's start-up for a conflict a hook found: exit 2 from the server CLI, raise it elsewhere."""
    if is_sglang_server_cli(list(getattr(sys, "orig_argv", sys.argv))):
        log(str(exc))
        raise SystemExit(2)
    raise exc
