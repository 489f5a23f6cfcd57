"""The env plugin's control functions through ctypes, and nothing else (interpreter-start cheap).

Activation hands the env plugin its values at interpreter start, before anything in the process
can call NCCL, so it uses this small binding (``ctypes`` only); :mod:`.library` (tuner, queries,
diagnostics) builds on the same binding once SGLang is imported.
"""

from __future__ import annotations

import ctypes
import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Collection, Mapping

CONTROL_ABI = 1  # SEN_CONTROL_ABI in the C source

_SIGNATURES = {
    "sen_abi_version": (ctypes.c_int, []),
    "sen_library_version": (ctypes.c_char_p, []),
    "sen_env_reset": (None, []),
    "sen_env_set": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p]),
    "sen_env_set_group": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]),
    "sen_env_environment_wins": (ctypes.c_int, [ctypes.c_char_p]),
    "sen_select_group": (ctypes.c_int, [ctypes.c_char_p]),
    "sen_open_reads_log": (ctypes.c_int, [ctypes.c_char_p]),
    "sen_reads_log_status": (ctypes.c_int, []),
    "sen_flush_reads_counts": (ctypes.c_int, []),
}


class ControlError(RuntimeError):
    """The library refused a value (memory) or is not the plugin's own library."""


def encode(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, not {type(text).__name__}")
    data = os.fsencode(text)  # the bytes os.environ would hold for it (surrogateescape)
    if b"\0" in data:
        raise ValueError(f"{what} {text!r} contains a NUL byte")
    return data


def errno_text(code: int) -> str:
    import errno

    return f"{os.strerror(code)} ({errno.errorcode.get(code, code)})"


class EnvControl:
    """The env plugin of one loaded copy of the library."""

    def __init__(self, lib: ctypes.CDLL, path: str) -> None:
        self.lib = lib
        self.path = path
        try:
            for name, (restype, argtypes) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
        except AttributeError:
            raise ControlError(f"{path} is not the sglang-eagle-nccl native library") from None
        found = lib.sen_abi_version()
        if found != CONTROL_ABI:
            raise ControlError(f"{path} has control ABI {found}, this plugin needs {CONTROL_ABI} (reinstall it)")

    def library_version(self) -> str:
        return self.lib.sen_library_version().decode()

    def configure(self, values: Mapping[str, str], groups: Mapping[str, Mapping[str, str]] | None = None,
                  environment_wins: Collection[str] = ()) -> None:
        """Replace what the env plugin serves: process-wide ``values``, per-group values (served while
        that group's label is selected) and the names the real environment wins for."""
        encoded = [(None, encode(k, "variable name"), encode(v, f"value of {k}")) for k, v in values.items()]
        for group, group_values in (groups or {}).items():
            label = encode(group, "group label")
            encoded += [(label, encode(k, "variable name"), encode(v, f"value of {k}")) for k, v in group_values.items()]
        wins = [encode(name, "variable name") for name in environment_wins]
        lib = self.lib
        lib.sen_env_reset()
        for label, name, value in encoded:
            rc = lib.sen_env_set(name, value) if label is None else lib.sen_env_set_group(label, name, value)
            if rc:
                raise ControlError(f"native env plugin could not store {name.decode()}: {errno_text(rc)}")
        for name in wins:
            rc = lib.sen_env_environment_wins(name)
            if rc:
                raise ControlError(f"native env plugin could not store {name.decode()}: {errno_text(rc)}")

    def select_group(self, label: str | None) -> None:
        rc = self.lib.sen_select_group(None if label is None else encode(label, "group label"))
        if rc:
            raise ControlError(f"native plugin could not select group {label!r}: {errno_text(rc)}")

    def open_reads_log(self, path: str | os.PathLike[str]) -> str | None:
        """Open this process's log of what NCCL read. None on success, else the error to report."""
        rc = self.lib.sen_open_reads_log(encode(os.fspath(path), "reads log path"))
        if rc:
            return f"cannot open the NCCL reads log {os.fspath(path)}: {errno_text(rc)}"
        return None

    def reads_log_error(self) -> str | None:
        rc = self.lib.sen_reads_log_status()
        if rc == 0:
            return None
        if rc < 0:
            return "no NCCL reads log was opened in this process"
        return f"writing the NCCL reads log failed: {errno_text(rc)}"

    def flush_reads_counts(self) -> str | None:
        self.lib.sen_flush_reads_counts()
        return self.reads_log_error()


_loaded: dict[str, EnvControl] = {}


def load(path: str) -> EnvControl:
    """The env plugin control of the library at ``path`` (the same instance NCCL's dlopen returns)."""
    control = _loaded.get(path)
    if control is None:
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            raise ControlError(f"cannot load {path}: {exc}") from None
        control = _loaded[path] = EnvControl(lib, path)
    return control
