"""The one writer of ``os.environ``: every variable the plugin sets, changes or removes goes through here.

``os.environ[k] = v`` calls ``putenv``, so what is written here is what NCCL's ``getenv`` sees in this
process and what every process spawned afterwards inherits (NCCL reads its parameters with getenv). One guard, one order:

1. every name is one the plugin may write (``NCCL_*`` / ``TORCH_NCCL_*`` of a profile, and its own
   ``SGLANG_EAGLE_NCCL*``), and every name and value can be put into the C environment (``putenv``
   refuses a NUL; a name or value that cannot be encoded fails half-way) -- checked before anything is
   written, so a refusal changes nothing;
2. then all of it is written, in name order; if anything still fails, everything written is put back.

Imported at interpreter start (activation writes through it): ``os`` only.
"""

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

PLUGIN_PREFIXES = ("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# preflight's own rank processes: SGLang's CPU engine needs its cores named (offline/launch/preflight.py).
# Never a profile value; written only with harness=True.
HARNESS = ("OMP_NUM_THREADS", "SGLANG_CPU_OMP_THREADS_BIND")


class EnvironmentWriteError(ValueError):
    """A write the plugin may not or cannot make; nothing was written."""


def _writable(name: str, harness: bool) -> bool:
    if harness and name in HARNESS:
        return True
    return (isinstance(name, str) and name.startswith(PLUGIN_PREFIXES) and len(name) > 5
            and _NAME_CHARS.issuperset(name))


def check(updates: "Mapping[str, str | None]", *, harness: bool = False) -> None:
    """Raise EnvironmentWriteError naming every update that cannot be made (nothing is written)."""
    bad = sorted(str(k) for k in updates if not _writable(k, harness))
    if bad:  # unreachable through validated profiles; kept so no caller can bypass it
        raise EnvironmentWriteError(f"refusing to write variables outside NCCL_*/TORCH_NCCL_*/SGLANG_EAGLE_NCCL*: {bad}")
    problems = []
    for name, value in updates.items():
        if value is None:
            continue
        if not isinstance(value, str):
            problems.append(f"{name}: not a string ({type(value).__name__})")
            continue
        try:
            raw = os.fsencode(value)
        except UnicodeError:
            problems.append(f"{name}: the value cannot be encoded for the C environment")
            continue
        if b"\0" in raw:
            problems.append(f"{name}: the value contains a NUL byte (the C environment cannot hold it)")
    if problems:
        raise EnvironmentWriteError("cannot write to the process environment: " + "; ".join(problems))


def write(updates: "Mapping[str, str | None]", *, harness: bool = False) -> "list[tuple[str, str | None, str | None]]":
    """Write (None: unset) every variable, or none of them. Returns ``(name, before, after)`` in name order.

    Checks first (:func:`check`); if a write still fails half-way, every variable is put back and the
    error re-raised.
    """
    check(updates, harness=harness)
    before = {k: os.environ.get(k) for k in updates}
    try:
        for name in sorted(updates):
            value = updates[name]
            if value is None:
                os.environ.pop(name, None)
            elif os.environ.get(name) != value:
                os.environ[name] = value
    except BaseException:
        _restore(before)
        raise
    return [(k, before[k], updates[k]) for k in sorted(updates)]


def _restore(saved: "Mapping[str, str | None]") -> None:
    for name, value in saved.items():
        try:
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        except Exception:  # noqa: BLE001 - putting back what was there: the best that can be done
            pass


def put_back(saved: "Mapping[str, str | None]", *, harness: bool = False) -> None:
    """Return variables to the values in ``saved`` (None: unset): the end of a temporary change."""
    write(saved, harness=harness)


def withdraw() -> bool:
    """Refused: put back every variable the plugin wrote in this process, and forget the activation.

    Returns whether anything was put back. Called by every door's refusal
    (:func:`sglang_eagle_nccl.inproc.refusal.refuse`), so a refused process's environment is the one
    it started with, whichever check failed and whenever.
    """
    from sglang_eagle_nccl.inproc.boot.state import STATE

    with STATE.lock:
        changed = {k: v for k, v in STATE.saved_before.items() if os.environ.get(k) != v}
        if changed:
            put_back(changed)
        STATE.active = False
        STATE.expected_env = {}
        STATE.saved_before = {}
        return bool(changed)
