"""The plugin's per-process state (one activation per process)."""

from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .audit import AuditWriter
    from .patchsets import Selection
    from .profile import Profile


@dataclass
class ProcessState:
    active: bool = False
    origin: str = ""
    profile: Profile | None = None
    audit: AuditWriter | None = None
    selection: Selection | None = None
    node_rank: int | None = None
    role: str = "process"
    cli_hooks: bool = False
    patches_installed: bool = False
    deferred_registry_hooks: list[Any] = field(default_factory=list)
    uncovered: list[dict[str, Any]] = field(default_factory=list)
    # id(cpu_group) of groups whose consistency was already checked in this process
    checked_groups: set[int] = field(default_factory=set)
    # NCCL environment at the first communicator created in this process (process-cached vars)
    first_comm_env: dict[str, str] | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)


STATE = ProcessState()

# Name of the SGLang group whose GroupCoordinator.__init__ is running (read by the PyNccl hook).
CURRENT_GROUP: contextvars.ContextVar[str | None] = contextvars.ContextVar("sglang_eagle_nccl_group", default=None)


def reset() -> None:
    """Forget the activation (tests only: a real process activates once)."""
    global STATE
    STATE.__init__()  # type: ignore[misc]
