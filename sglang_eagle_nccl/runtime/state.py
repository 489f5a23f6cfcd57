"""The plugin's per-process state (one activation per process).

Imported at interpreter start in every process of an enabled launch, so it avoids
``dataclasses``/``threading`` (which pull in ``inspect``, ``re`` ...): a plain class and a
lock from ``_thread``. The validated :class:`~sglang_eagle_nccl.profile.model.Profile` object is
built lazily from the serialised JSON the first time a hook needs it, by which time SGLang
has imported everything that construction needs anyway.
"""

from __future__ import annotations

import _thread

TYPE_CHECKING = False  # typing is not imported at interpreter start (annotations are strings)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from sglang_eagle_nccl.audit.writer import AuditWriter
    from sglang_eagle_nccl.profile.model import Profile
    from sglang_eagle_nccl.runtime.patchsets import Selection


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
        self.origin = ""
        self.profile_json: str | None = None
        self.profile_data: dict[str, Any] | None = None
        self._profile: Profile | None = None
        self.audit: AuditWriter | None = None
        self.selection: Selection | None = None
        self.node_rank: int | None = None
        self.role = "process"
        self.cli_hooks = False
        self.patches_installed = False
        self.uncovered: list[dict[str, Any]] = []
        # id(cpu_group) of groups whose consistency was already checked in this process
        self.checked_groups: set[int] = set()
        # NCCL environment at the first communicator created in this process
        self.first_comm_env: dict[str, str] | None = None
        self.lock = _RLock()

    @property
    def profile(self) -> Profile | None:
        if self._profile is None and self.profile_json is not None:
            from sglang_eagle_nccl.profile.model import Profile

            self._profile = Profile.from_json(self.profile_json)
        return self._profile

    @profile.setter
    def profile(self, value: Profile | None) -> None:
        self._profile = value
        self.profile_json = value.to_json() if value is not None else None
        self.profile_data = value.to_dict() if value is not None else None


STATE = ProcessState()

_current_group: Any = None


def current_group_var() -> Any:
    """ContextVar naming the SGLang group whose GroupCoordinator.__init__ is running."""
    global _current_group
    if _current_group is None:
        import contextvars

        _current_group = contextvars.ContextVar("sglang_eagle_nccl_group", default=None)
    return _current_group


def reset() -> None:
    """Forget the activation (tests only: a real process activates once)."""
    STATE.__init__()  # type: ignore[misc]
