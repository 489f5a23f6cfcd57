"""The profile's policy: how the plugin behaves, apart from which NCCL values it sets.

Policy comes from a profile's ``[policy]`` table, the plugin's ``SGLANG_EAGLE_NCCL_*`` variables and
command-line flags; every source goes through :func:`policy_from_mapping`, which checks each value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.findings import Finding, error

ConsistencyMode = Literal["error", "warn", "off"]
MechanismChoice = Literal["auto", "wrapt", "hook_registry"]

# Plugin environment variables that set policy (name -> Policy field).
POLICY_ENV = {
    names.ENV_ALLOW_UNKNOWN: "allow_unknown",
    names.ENV_ALLOW_PARTIAL: "allow_partial",
    names.ENV_AUDIT_DIR: "audit_dir",
    names.ENV_AUDIT_REQUIRED: "audit_required",
    names.ENV_SGLANG_WINS: "sglang_wins",
    names.ENV_NCCL_VERSION: "nccl_version",
    names.ENV_CONSISTENCY: "consistency",
    names.ENV_CONSISTENCY_TIMEOUT: "consistency_timeout_s",
    names.ENV_MECHANISM: "mechanism",
    names.ENV_LEDGER: "ledger",
}


@dataclass(frozen=True)
class Policy:
    """How the plugin behaves, apart from which NCCL values it sets."""

    # Variables for which SGLang's own write is kept instead of the profile's value
    # (e.g. NCCL_NVLS_ENABLE when you pass --enable-nccl-nvls on purpose).
    sglang_wins: tuple[str, ...] = ()
    allow_unknown: bool = False
    allow_partial: bool = False
    audit_dir: str | None = None
    audit_required: bool = False
    nccl_version: str | None = None
    consistency: ConsistencyMode = "error"
    consistency_timeout_s: float = 60.0
    # "auto" (= "wrapt"): post-import hooks installed by the plugin itself in every process, whether
    # or not SGLang's plugin loader runs there. "hook_registry": SGLang's HookRegistry on >= 0.5.11,
    # in processes that call load_plugins() (others fall back to wrapt). "wrapt": wrapt
    # everywhere, which skips HookRegistry's per-target scan of every loaded module.
    mechanism: MechanismChoice = "auto"
    # The phase ledger (docs/ledger.md): count every collective SGLang issues by speculative phase,
    # implementation and size, in every process. Off: its hooks are not installed at all.
    ledger: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["sglang_wins"] = list(self.sglang_wins)
        return d

    @classmethod
    def from_validated_data(cls, data: Mapping[str, Any]) -> Policy:
        """From :meth:`to_dict` output a validating process wrote (see ``Profile.from_validated_data``)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["sglang_wins"] = tuple(values.get("sglang_wins", ()))
        return cls(**values)


@dataclass(frozen=True)
class Sourced:
    """A raw policy value that remembers where it came from, so an error names its origin.

    Policy values from a profile file, a plugin environment variable and a flag are merged into
    one mapping before they are checked; wrapping each value lets :func:`policy_from_mapping`
    report ``SGLANG_EAGLE_NCCL_CONSISTENCY_TIMEOUT`` (not ``policy.consistency_timeout_s``) for
    a bad variable, and the file's name for a bad ``[policy]`` entry.
    """

    value: Any
    variable: str  # what the user wrote: the environment variable, or "policy.<key>" in a file
    source: str  # where: "environment", a file path, "builtin:<name>"


# A nccl_version longer than this is not a version; packaging would call int() on every
# component, which raises ValueError (not InvalidVersion) beyond Python's digit limit.
_MAX_VERSION_CHARS = 64
_SECONDS = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})?", re.ASCII)
_BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False, "": False}


def _parse_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii():
        return _BOOL_WORDS.get(value.strip().lower())
    return None


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # as written in TOML
    return value if isinstance(value, str) else repr(value)


def absolute_audit_dir(value: str) -> str:
    """``~`` expanded and made absolute against this process's working directory.

    Done once, where the profile is resolved: the processes SGLang starts may run in another
    working directory and must still write into the same place.
    """
    return os.path.abspath(os.path.expanduser(value))


def policy_from_mapping(raw: Mapping[str, Any], source: str) -> tuple[Policy, list[Finding]]:
    """Check every policy value (each may be wrapped in :class:`Sourced`); errors name the origin."""
    findings: list[Finding] = []
    values: dict[str, Any] = {}
    known = {f.name for f in fields(Policy)}
    for key, wrapped in raw.items():
        if isinstance(wrapped, Sourced):
            value, variable, where = wrapped.value, wrapped.variable, wrapped.source
        else:
            value, variable, where = wrapped, f"policy.{key}", source

        def bad(rule: str, fix: str, shown: Any = value, variable: str = variable, where: str = where) -> None:
            findings.append(error(variable, _shown(shown), rule, fix).with_source(where))

        is_env = variable.startswith("SGLANG_EAGLE_NCCL")
        if key not in known:
            findings.append(
                error(variable, None, "unknown policy option", f"use one of: {', '.join(sorted(known))}").with_source(where)
            )
            continue
        if key in ("allow_unknown", "allow_partial", "audit_required", "ledger"):
            b = _parse_bool(value)
            if b is None:
                bad("must be a boolean", f"set {variable}=1 or {variable}=0" if is_env else f"write {key} = true or false")
            else:
                values[key] = b
        elif key == "sglang_wins":
            items = value.split(",") if isinstance(value, str) else value
            if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
                bad("must be a list of variable names",
                    f"set {variable}=NCCL_NVLS_ENABLE,NCCL_ALGO" if is_env else 'write sglang_wins = ["NCCL_NVLS_ENABLE"]')
                continue
            wins = tuple(sorted({i.strip() for i in items if i.strip()}))
            for n in wins:
                if not names.is_allowed_name(n):
                    bad("only NCCL_* / TORCH_NCCL_* names make sense here", "remove it", shown=n)
            values[key] = wins
        elif key == "audit_dir":
            if value is None or value == "":
                values[key] = None
            elif not isinstance(value, str):
                bad("must be a path string", f"set {variable}=/path" if is_env else 'write audit_dir = "/path"')
            elif "\x00" in value or "\n" in value:
                bad("a directory name cannot contain NUL or newline characters", "choose a plain directory path")
            else:
                try:
                    values[key] = absolute_audit_dir(value)
                except OSError as exc:  # a relative path and a working directory that is gone
                    bad(f"a relative directory needs the working directory, which cannot be read ({exc.strerror})",
                        "give an absolute path")
        elif key == "nccl_version":
            if value is None or value == "":
                values[key] = None
                continue
            from packaging.version import InvalidVersion, Version

            text = str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
            try:
                if text is None or len(text) > _MAX_VERSION_CHARS or not text.isascii():
                    raise InvalidVersion(text)
                Version(text)
                values[key] = text
            except (InvalidVersion, ValueError):
                bad("not a version number", f"set {variable}=2.27" if is_env else 'write nccl_version = "2.27"')
        elif key == "mechanism":
            if value not in ("auto", "wrapt", "hook_registry"):
                bad("must be auto, wrapt or hook_registry", f"set {variable}=auto" if is_env else 'write mechanism = "auto"')
            else:
                values[key] = value
        elif key == "consistency":
            if value not in ("error", "warn", "off"):
                bad("must be error, warn or off", f"set {variable}=error" if is_env else 'write consistency = "error"')
            else:
                values[key] = value
        elif key == "consistency_timeout_s":
            t = _seconds(value)
            if t is None or not 0 < t <= 3600:
                bad(
                    "must be a number of seconds in (0, 3600], written with ASCII digits",
                    f"set {variable}=60" if is_env else "write consistency_timeout_s = 60",
                )
            else:
                values[key] = t
    return Policy(**values), findings


def _seconds(value: Any) -> float | None:
    # float() would accept "٣", "1_0", "nan", "inf" and 5000-digit strings; only plain decimals pass.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value) if -(10**9) < value < 10**9 else None
    if isinstance(value, float):
        return value if value == value else None
    if isinstance(value, str) and _SECONDS.fullmatch(value.strip()):
        return float(value.strip())
    return None


def policy_from_environ(environ: Mapping[str, str]) -> dict[str, Any]:
    """The policy set by the plugin's own environment variables, each value tagged with its variable."""
    return {
        field_name: Sourced(environ[var], var, "environment")
        for var, field_name in POLICY_ENV.items()
        if environ.get(var, "") != ""
    }
