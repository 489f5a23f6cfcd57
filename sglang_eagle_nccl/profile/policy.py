"""The profile's policy: how the plugin behaves, apart from which NCCL values it sets.

Policy comes from a profile's ``[policy]`` table, the plugin's ``SGLANG_EAGLE_NCCL_*`` variables and
command-line flags; every source goes through :func:`policy_from_mapping`, which checks each value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from sglang_eagle_nccl import names
from sglang_eagle_nccl.findings import Finding, error

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


def _parse_bool(key: str, value: Any, source: str) -> tuple[bool | None, list[Finding]]:
    if isinstance(value, bool):
        return value, []
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
        return value.strip().lower() in ("1", "true", "yes", "on"), []
    return None, [error(key, str(value), "must be a boolean", f"write {key} = true or false").with_source(source)]


def policy_from_mapping(raw: Mapping[str, Any], source: str) -> tuple[Policy, list[Finding]]:
    from sglang_eagle_nccl.names import is_allowed_name

    findings: list[Finding] = []
    values: dict[str, Any] = {}
    known = {f.name for f in fields(Policy)}
    for key, value in raw.items():
        if key not in known:
            findings.append(
                error(f"policy.{key}", None, "unknown policy option", f"use one of: {', '.join(sorted(known))}").with_source(source)
            )
            continue
        if key in ("allow_unknown", "allow_partial", "audit_required"):
            b, f = _parse_bool(f"policy.{key}", value, source)
            findings += f
            if b is not None:
                values[key] = b
        elif key == "sglang_wins":
            items = value.split(",") if isinstance(value, str) else value
            if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
                findings.append(error("policy.sglang_wins", str(value), "must be a list of variable names", 'write sglang_wins = ["NCCL_NVLS_ENABLE"]').with_source(source))
                continue
            names = tuple(sorted({i.strip() for i in items if i.strip()}))
            for n in names:
                if not is_allowed_name(n):
                    findings.append(error("policy.sglang_wins", n, "only NCCL_* / TORCH_NCCL_* names make sense here", "remove it").with_source(source))
            values[key] = names
        elif key == "audit_dir":
            if value is None or value == "":
                values[key] = None
            elif not isinstance(value, str):
                findings.append(error("policy.audit_dir", str(value), "must be a path string", 'write audit_dir = "/path"').with_source(source))
            else:
                values[key] = value
        elif key == "nccl_version":
            if value is None or value == "":
                values[key] = None
                continue
            from packaging.version import InvalidVersion, Version

            try:
                Version(str(value))
                values[key] = str(value)
            except InvalidVersion:
                findings.append(error("policy.nccl_version", str(value), "not a version number", 'write nccl_version = "2.27"').with_source(source))
        elif key == "mechanism":
            if value not in ("auto", "wrapt", "hook_registry"):
                findings.append(error("policy.mechanism", str(value), "must be auto, wrapt or hook_registry", 'write mechanism = "auto"').with_source(source))
            else:
                values[key] = value
        elif key == "consistency":
            if value not in ("error", "warn", "off"):
                findings.append(error("policy.consistency", str(value), "must be error, warn or off", 'write consistency = "error"').with_source(source))
            else:
                values[key] = value
        elif key == "consistency_timeout_s":
            try:
                t = float(value)
                if not 0 < t <= 3600 or isinstance(value, bool):
                    raise ValueError
                values[key] = t
            except (TypeError, ValueError):
                findings.append(error("policy.consistency_timeout_s", str(value), "must be a number of seconds in (0, 3600]", "write consistency_timeout_s = 60").with_source(source))
    return Policy(**values), findings


def policy_from_environ(environ: Mapping[str, str]) -> dict[str, Any]:
    return {field_name: environ[var] for var, field_name in POLICY_ENV.items() if environ.get(var, "") != ""}
