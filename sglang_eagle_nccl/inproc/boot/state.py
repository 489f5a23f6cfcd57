"""The plugin's per-process state (one activation per process, possibly reconfigured by flags).

Imported at interpreter start in every process of an enabled launch, so it avoids
``dataclasses``/``threading`` (which pull in ``inspect``, ``re`` ...): a plain class and a
lock from ``_thread``. The :class:`~sglang_eagle_nccl.profile.model.Profile` object is built
lazily from the validated plain data the first time a hook needs it, by which time SGLang has
imported everything that construction needs anyway.
"""

import _thread

from sglang_eagle_nccl.contract.names import ENV_TEST_FAULT

TYPE_CHECKING = False  # typing is not imported at interpreter start (annotations are strings)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from sglang_eagle_nccl.inproc.boot.audit_writer import AuditWriter
    from sglang_eagle_nccl.knowledge.sglang.patchsets import Selection
    from sglang_eagle_nccl.profile.model import Profile


class _RLock:
    """Re-entrant lock from ``_thread`` (``threading`` is not imported at start-up)."""

    def __init__(self) -> None:
        self._lock = _thread.RLock()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class ProcessState:
    def __init__(self) -> None:
        self.active = False
        # Why SGLang is refused in this process (the profile could not be applied), or None.
        self.refused: str | None = None
        self.origin = ""
        self.role = "process"
        self.is_root = False
        # The validated profile as plain data (Profile.to_dict() shape) and its wire text.
        self.data: dict[str, Any] | None = None
        self.wire: str | None = None
        self._profile: Profile | None = None
        self.node_rank: int | None = None
        # The NCCL environment this process must hold from now on (profile + node section, after
        # the sglang_wins decisions inherited from the launcher).
        self.expected_env: dict[str, str] = {}
        # Values of every variable the plugin wrote, as they were before its first write: a
        # profile replaced by launch flags gives back what the user had exported.
        self.saved_before: dict[str, str | None] = {}
        self.run_dir: str | None = None
        # NCCL variables SGLang itself wrote in this process (a launcher: argument resolution and
        # _set_envs_and_config); processes started elsewhere (Ray actors) get their final values.
        self.sglang_written: set[str] = set()
        # The native plugin library once configured: its version and rules digest (ranks compare
        # them), and this process's file of NCCL's own reads.
        self.native_info: dict[str, str] | None = None
        self.reads_log: str | None = None
        self.env_control: Any = None  # the env plugin's ctypes control, once configured
        self.exit_flush: Any = None  # the control whose counts and tuner answers are flushed at exit
        self.audit: AuditWriter | None = None
        self.selection: Selection | None = None
        self.cli_hooks = False
        self.patches_installed = False
        self.uncovered: list[dict[str, Any]] = []
        # id(cpu_group) of groups whose consistency was already checked in this process
        self.checked_groups: set[int] = set()
        # NCCL environment at the first communicator created in this process
        self.first_comm_env: dict[str, str] | None = None
        self.lock = _RLock()

    @property
    def profile(self) -> "Profile | None":
        if self._profile is None and self.data is not None:
            from sglang_eagle_nccl.profile.model import Profile

            self._profile = Profile.from_validated_data(self.data)
        return self._profile

    def set_profile(self, data: "dict[str, Any]", profile: "Profile | None") -> None:
        self.data = data
        self._profile = profile

    @property
    def policy(self) -> "dict[str, Any]":
        return (self.data or {}).get("policy", {})


STATE = ProcessState()

_current_group: "Any" = None


def current_group_var() -> "Any":
    """ContextVar naming the SGLang group whose GroupCoordinator.__init__ is running."""
    global _current_group
    if _current_group is None:
        import contextvars

        _current_group = contextvars.ContextVar("sglang_eagle_nccl_group", default=None)
    return _current_group


def reset() -> None:
    """Forget the activation (tests only: a real process activates once)."""
    STATE.__init__()  # type: ignore[misc]


# Test-only fault points (documented in docs/fail-closed.md): the door tests set this variable to a step
# name to make that step fail as an unexpected error would, in a real process that entered through a
# real door. Read only by code that runs when the plugin is already enabled (a dictionary look-up per
# step); never set by the plugin, never an input of the hand-off.


class InjectedFault(RuntimeError):
    """The failure a fault point raises (an unexpected error, not one of the plugin's deliberate stops)."""


def fault_point(step: str) -> None:
    """Raise :class:`InjectedFault` when ``SGLANG_EAGLE_NCCL_TEST_FAULT`` names ``step`` (tests only)."""
    import os

    if os.environ.get(ENV_TEST_FAULT) == step:
        raise InjectedFault(f"test fault injected at {step}")


def record(event: str, **fields: "Any") -> None:
    """One audit record of this process (kept in memory until the process joins a launch)."""
    if STATE.audit is not None:
        STATE.audit.write(event, **fields)
