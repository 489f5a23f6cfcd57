"""Profiles: validated, immutable sets of NCCL settings, and where they come from.

Precedence, lowest first (later sources override earlier ones, variable by variable):

1. profiles named with ``--profile`` / ``--nccl-profile`` / ``SGLANG_EAGLE_NCCL`` — a built-in
   name (``sglang-eagle-nccl profiles list``) or a TOML file; several are layered in order;
2. the plugin's own environment variables (``SGLANG_EAGLE_NCCL_ENV`` and the policy variables
   in :data:`POLICY_ENV`);
3. ``--nccl-env KEY=VALUE`` flags and policy flags.

Every source is checked before anything is applied; all problems are reported together
(:class:`~sglang_eagle_nccl.findings.ProfileError`). A resolved profile serialises to one
JSON string (``SGLANG_EAGLE_NCCL_PROFILE``) from which every spawned process rebuilds exactly
the same profile without re-reading files.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from . import _gate
from .findings import Finding, ProfileError, error, warning

SERIAL_VERSION = 1
MAX_PROFILE_BYTES = 1 << 20

# SGLang's GroupCoordinator group names, any version (sglang-internals.md §7b). A group section
# for another name is allowed (new SGLang releases add groups) but warned about.
KNOWN_GROUPS = (
    "world", "tp", "pp", "attention_tp", "attn_tp", "moe_ep", "moe_tp", "moe_dp", "pdmux_prefill_tp",
    "attn_cp", "dcp", "self_pp", "shared_experts_tp",
)

ConsistencyMode = Literal["error", "warn", "off"]
MechanismChoice = Literal["auto", "wrapt"]

# Plugin environment variables that set policy (name -> Policy field).
POLICY_ENV = {
    _gate.ENV_ALLOW_UNKNOWN: "allow_unknown",
    _gate.ENV_ALLOW_PARTIAL: "allow_partial",
    _gate.ENV_AUDIT_DIR: "audit_dir",
    _gate.ENV_AUDIT_REQUIRED: "audit_required",
    _gate.ENV_SGLANG_WINS: "sglang_wins",
    _gate.ENV_NCCL_VERSION: "nccl_version",
    _gate.ENV_CONSISTENCY: "consistency",
    _gate.ENV_CONSISTENCY_TIMEOUT: "consistency_timeout_s",
    _gate.ENV_MECHANISM: "mechanism",
}

Pairs = tuple[tuple[str, str], ...]


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
    # "auto": the patch set's mechanism (SGLang's HookRegistry from 0.5.11). "wrapt": wrapt
    # everywhere, which skips HookRegistry's per-target scan of every loaded module.
    mechanism: MechanismChoice = "auto"

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["sglang_wins"] = list(self.sglang_wins)
        return d


@dataclass(frozen=True)
class Profile:
    """A validated, immutable NCCL profile."""

    name: str
    env: Pairs = ()
    groups: tuple[tuple[str, Pairs], ...] = ()
    nodes: tuple[tuple[int, Pairs], ...] = ()
    policy: Policy = field(default_factory=Policy)
    sources: tuple[str, ...] = ()
    description: str = ""

    # -- views -------------------------------------------------------------------------------
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def group_env(self, group: str) -> dict[str, str]:
        return dict(dict(self.groups).get(group, ()))

    def node_env(self, node_rank: int | None) -> dict[str, str]:
        if node_rank is None:
            return {}
        return dict(dict(self.nodes).get(node_rank, ()))

    def process_env(self, node_rank: int | None = None) -> dict[str, str]:
        """What a process of node ``node_rank`` must have in its environment."""
        env = self.env_dict()
        env.update(self.node_env(node_rank))
        return env

    def expected_env(self, group: str | None = None, node_rank: int | None = None) -> dict[str, str]:
        """What a communicator of ``group`` created eagerly in scope should see."""
        env = self.process_env(node_rank)
        if group is not None:
            env.update(self.group_env(group))
        return env

    def all_names(self) -> set[str]:
        names = {k for k, _ in self.env}
        for _, pairs in self.groups:
            names.update(k for k, _ in pairs)
        for _, pairs in self.nodes:
            names.update(k for k, _ in pairs)
        return names

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "v": SERIAL_VERSION,
            "name": self.name,
            "description": self.description,
            "env": dict(self.env),
            "groups": {g: dict(p) for g, p in self.groups},
            "nodes": {str(n): dict(p) for n, p in self.nodes},
            "policy": self.policy.to_dict(),
            "sources": list(self.sources),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Profile:
        """Rebuild a profile serialised by :meth:`to_json` (the ``SGLANG_EAGLE_NCCL_PROFILE`` value).

        Structure and variable names are checked again here: the string comes from the
        environment, so nothing outside ``NCCL_*``/``TORCH_NCCL_*`` may slip in through it.
        Values were validated by the launcher that produced the string.
        """
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ProfileError([_bad_serial(f"not valid JSON ({exc})")]) from None
        if not isinstance(data, dict) or data.get("v") != SERIAL_VERSION:
            raise ProfileError([_bad_serial(f"expected an object with v={SERIAL_VERSION}")])
        allowed = {"v", "name", "description", "env", "groups", "nodes", "policy", "sources"}
        extra = set(data) - allowed
        if extra:
            raise ProfileError([_bad_serial(f"unknown keys {sorted(extra)}")])
        findings: list[Finding] = []
        env = _serial_pairs(data.get("env", {}), "env", findings)
        groups_raw = data.get("groups", {})
        nodes_raw = data.get("nodes", {})
        if not isinstance(groups_raw, dict) or not isinstance(nodes_raw, dict):
            raise ProfileError([_bad_serial("groups and nodes must be objects")])
        groups = tuple(
            sorted((str(g), _serial_pairs(p, f"groups.{g}", findings)) for g, p in groups_raw.items())
        )
        nodes: list[tuple[int, Pairs]] = []
        for n, p in nodes_raw.items():
            if not str(n).isdigit():
                findings.append(_bad_serial(f"node key {n!r} is not a node rank"))
                continue
            nodes.append((int(n), _serial_pairs(p, f"nodes.{n}", findings)))
        policy, policy_findings = _policy_from_mapping(data.get("policy", {}), "serialised profile")
        findings += policy_findings
        if any(f.severity == "error" for f in findings):
            raise ProfileError(findings)
        name = data.get("name")
        sources = data.get("sources", [])
        if not isinstance(name, str) or not isinstance(sources, list):
            raise ProfileError([_bad_serial("name must be a string and sources a list")])
        return cls(
            name=name,
            env=env,
            groups=groups,
            nodes=tuple(sorted(nodes)),
            policy=policy,
            sources=tuple(str(s) for s in sources),
            description=str(data.get("description", "")),
        )


def _bad_serial(why: str) -> Finding:
    return error(
        _gate.ENV_PROFILE, None,
        f"the serialised profile is malformed: {why}",
        f"unset {_gate.ENV_PROFILE}; it is written by sglang-eagle-nccl for the processes it starts",
    )


def _serial_pairs(obj: Any, where: str, findings: list[Finding]) -> Pairs:
    from .names import is_allowed_name

    if not isinstance(obj, dict):
        findings.append(_bad_serial(f"{where} must be an object"))
        return ()
    pairs = []
    for k, v in obj.items():
        if not isinstance(k, str) or not is_allowed_name(k):
            findings.append(
                error(
                    str(k), None,
                    f"{where}: a profile may only set NCCL_* and TORCH_NCCL_* variables",
                    f"remove it from {_gate.ENV_PROFILE}",
                )
            )
            continue
        if not isinstance(v, str) or "\x00" in v or "\n" in v:
            findings.append(_bad_serial(f"{where}.{k} must be a one-line string"))
            continue
        pairs.append((k, v))
    return tuple(sorted(pairs))


# --- sources ------------------------------------------------------------------------------------


def builtin_names() -> list[str]:
    folder = resources.files("sglang_eagle_nccl").joinpath("profiles")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def builtin_text(name: str) -> str:
    return resources.files("sglang_eagle_nccl").joinpath(f"profiles/{name}.toml").read_text("utf-8")


@dataclass
class _Layer:
    """Partially built profile; values still unchecked strings."""

    env: dict[str, str] = field(default_factory=dict)
    groups: dict[str, dict[str, str]] = field(default_factory=dict)
    nodes: dict[int, dict[str, str]] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # "env:NCCL_X" -> source label
    description: str = ""

    def merge(self, other: _Layer) -> None:
        self.env.update(other.env)
        for g, e in other.groups.items():
            self.groups.setdefault(g, {}).update(e)
        for n, e in other.nodes.items():
            self.nodes.setdefault(n, {}).update(e)
        self.policy.update(other.policy)
        self.origin.update(other.origin)
        if other.description:
            self.description = other.description


_TOP_KEYS = {"name", "description", "extends", "env", "groups", "nodes", "policy"}


def _value_to_str(name: str, value: Any, where: str, findings: list[Finding]) -> str | None:
    # TOML integers are accepted (NCCL_BUFFSIZE = 16777216); booleans and floats are not,
    # because NCCL would read "true" as 0 and "1.5" as 1.
    if isinstance(value, bool):
        findings.append(
            error(name, str(value).lower(), f"{where}: TOML booleans are not NCCL values", f'write {name} = "{int(value)}"')
        )
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    findings.append(
        error(
            name, repr(value),
            f"{where}: values must be strings or integers, not {type(value).__name__}",
            f'write {name} = "<value>"',
        )
    )
    return None


def _env_table(obj: Any, where: str, source: str, findings: list[Finding]) -> dict[str, str]:
    if not isinstance(obj, dict):
        findings.append(error(where, None, f"[{where}] must be a table of NAME = value", f"write [{where}] then NAME = \"value\" lines"))
        return {}
    out: dict[str, str] = {}
    for k, v in obj.items():
        if isinstance(v, dict):
            findings.append(
                error(k, None, f"[{where}] holds a nested table; only NAME = value pairs are allowed", "flatten it")
            )
            continue
        s = _value_to_str(k, v, where, findings)
        if s is not None:
            out[k] = s
    return out


def parse_toml_profile(text: str, source: str, *, allow_extends: bool = True) -> tuple[_Layer, list[Finding]]:
    """Read one TOML profile document (data only: nothing in it is executed or expanded)."""
    from ._toml import TOMLDecodeError
    from ._toml import loads as toml_loads

    findings: list[Finding] = []
    layer = _Layer()
    try:
        doc = toml_loads(text)
    except TOMLDecodeError as exc:
        return layer, [error(source, None, f"malformed TOML: {exc}", "fix the TOML syntax (see the line/column above)")]
    for key in doc:
        if key not in _TOP_KEYS:
            findings.append(
                error(
                    key, None,
                    "unknown key/section in a profile file",
                    f"use only: {', '.join(sorted(_TOP_KEYS))} (NCCL variables go under [env])",
                )
            )
    if "extends" in doc:
        base = doc["extends"]
        if not allow_extends:
            findings.append(error("extends", str(base), "built-in profiles cannot extend others", "remove extends"))
        elif not isinstance(base, str) or base not in builtin_names():
            findings.append(
                error(
                    "extends", str(base),
                    "extends must name a built-in profile (files are never read from inside a profile)",
                    f"use one of: {', '.join(builtin_names())}, or pass several --profile options",
                )
            )
        else:
            base_layer, base_findings = parse_toml_profile(builtin_text(base), f"builtin:{base}", allow_extends=False)
            findings += base_findings
            layer.merge(base_layer)
    desc = doc.get("description", "")
    if not isinstance(desc, str):
        findings.append(error("description", repr(desc), "must be a string", 'write description = "..."'))
    else:
        layer.description = desc
    if "name" in doc and not isinstance(doc["name"], str):
        findings.append(error("name", repr(doc["name"]), "must be a string", 'write name = "..."'))
    env = _env_table(doc.get("env", {}), "env", source, findings)
    layer.env.update(env)
    layer.origin.update({f"env:{k}": source for k in env})
    groups = doc.get("groups", {})
    if not isinstance(groups, dict):
        findings.append(error("groups", None, "[groups] must contain [groups.<name>.env] tables", "see README"))
        groups = {}
    for gname, gtable in groups.items():
        if not isinstance(gtable, dict) or set(gtable) - {"env"}:
            findings.append(
                error(f"groups.{gname}", None, "a group section may only contain an env table", f"write [groups.{gname}.env]")
            )
            continue
        genv = _env_table(gtable.get("env", {}), f"groups.{gname}.env", source, findings)
        layer.groups.setdefault(gname, {}).update(genv)
        layer.origin.update({f"groups.{gname}:{k}": source for k in genv})
    nodes = doc.get("nodes", {})
    if not isinstance(nodes, dict):
        findings.append(error("nodes", None, "[nodes] must contain [nodes.<rank>.env] tables", "see README"))
        nodes = {}
    for nkey, ntable in nodes.items():
        if not str(nkey).isdigit():
            findings.append(error(f"nodes.{nkey}", None, "node sections are keyed by node rank (0, 1, ...)", "write [nodes.0.env]"))
            continue
        if not isinstance(ntable, dict) or set(ntable) - {"env"}:
            findings.append(error(f"nodes.{nkey}", None, "a node section may only contain an env table", f"write [nodes.{nkey}.env]"))
            continue
        nenv = _env_table(ntable.get("env", {}), f"nodes.{nkey}.env", source, findings)
        layer.nodes.setdefault(int(nkey), {}).update(nenv)
        layer.origin.update({f"nodes.{nkey}:{k}": source for k in nenv})
    policy = doc.get("policy", {})
    if not isinstance(policy, dict):
        findings.append(error("policy", None, "[policy] must be a table", "write [policy] then key = value"))
    else:
        layer.policy.update(policy)
    return layer, [f.with_source(source) for f in findings]


def read_profile_file(path: str) -> tuple[_Layer, list[Finding]]:
    label = path
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        return _Layer(), [
            error(path, None, "profile file not found", f"check the path, or use a built-in name ({', '.join(builtin_names())})")
        ]
    except OSError as exc:
        return _Layer(), [error(path, None, f"cannot read profile file ({exc.strerror})", "check the path and permissions")]
    if not p.is_file():
        return _Layer(), [error(path, None, "profile path is not a regular file", "give a .toml file")]
    if st.st_size > MAX_PROFILE_BYTES:
        return _Layer(), [error(path, None, "profile file is larger than 1 MiB", "a profile is a short TOML file")]
    try:
        text = p.read_text("utf-8")
    except PermissionError:
        return _Layer(), [error(path, None, "profile file is not readable (permission denied)", f"chmod a+r {path}")]
    except UnicodeDecodeError:
        return _Layer(), [error(path, None, "profile file is not UTF-8 text", "save it as UTF-8 TOML")]
    except OSError as exc:
        return _Layer(), [error(path, None, f"cannot read profile file ({exc.strerror})", "check the file")]
    return parse_toml_profile(text, label)


def load_spec(spec: str) -> tuple[_Layer, list[Finding]]:
    """A built-in profile name or a TOML file path."""
    spec = spec.strip()
    if spec in builtin_names() and "/" not in spec:
        return parse_toml_profile(builtin_text(spec), f"builtin:{spec}", allow_extends=False)
    if "/" in spec or spec.endswith(".toml") or os.path.exists(spec):
        return read_profile_file(spec)
    close = [n for n in builtin_names() if n.startswith(spec[:3])] or builtin_names()
    return _Layer(), [
        error(
            "profile", spec,
            "no built-in profile has this name and no such file exists",
            f"use a built-in profile ({', '.join(close)}) or a path to a .toml file",
        )
    ]


_PAIR_SPLIT = re.compile(r"\s+(?=[A-Za-z_][A-Za-z0-9_]*=)")


def parse_env_flags(items: Iterable[str], source: str) -> tuple[dict[str, str], list[Finding]]:
    """``KEY=VALUE`` items (``--nccl-env``); the value may contain '=', ',' and ';'."""
    env: dict[str, str] = {}
    findings: list[Finding] = []
    for item in items:
        if "=" not in item:
            findings.append(
                error(
                    item, None,
                    "expected KEY=VALUE",
                    f"write {item if item.startswith('NCCL_') else 'NCCL_X'}=<value>, e.g. --nccl-env NCCL_PROTO=LL",
                ).with_source(source)
            )
            continue
        key, value = item.split("=", 1)
        key = key.strip()
        if not key:
            findings.append(error(item, None, "missing variable name before '='", "write KEY=VALUE").with_source(source))
            continue
        env[key] = value
    return env, findings


def split_env_string(text: str) -> list[str]:
    """Split ``SGLANG_EAGLE_NCCL_ENV``: KEY=VALUE items separated by whitespace or newlines.

    A new item starts only where whitespace is followed by ``NAME=``, so values containing
    spaces (``NCCL_THREAD_THRESHOLDS=64 256 256 64 256 256``) stay whole.
    """
    text = text.strip()
    return [part for part in _PAIR_SPLIT.split(text) if part] if text else []


def _parse_bool(key: str, value: Any, source: str) -> tuple[bool | None, list[Finding]]:
    if isinstance(value, bool):
        return value, []
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
        return value.strip().lower() in ("1", "true", "yes", "on"), []
    return None, [error(key, str(value), "must be a boolean", f"write {key} = true or false").with_source(source)]


def _policy_from_mapping(raw: Mapping[str, Any], source: str) -> tuple[Policy, list[Finding]]:
    from .names import is_allowed_name

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
            if value not in ("auto", "wrapt"):
                findings.append(error("policy.mechanism", str(value), "must be auto or wrapt", 'write mechanism = "auto"').with_source(source))
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


# --- resolution ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resolution:
    profile: Profile
    warnings: tuple[Finding, ...]


def resolve(
    specs: Sequence[str] = (),
    *,
    env_flags: Sequence[str] = (),
    policy_flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    use_environ: bool = True,
) -> Resolution:
    """Build and validate a profile from every source; raise ProfileError listing all errors.

    ``specs`` are profile names/files in layering order. When ``use_environ`` is true, the
    plugin's own variables in ``environ`` (default ``os.environ``) are a source too:
    ``SGLANG_EAGLE_NCCL`` (used when ``specs`` is empty), ``SGLANG_EAGLE_NCCL_ENV`` and the
    policy variables. Nothing is applied here.
    """
    from . import nccl_vars

    environ = os.environ if environ is None else environ
    findings: list[Finding] = []
    merged = _Layer()
    names: list[str] = []
    spec_list = list(specs)
    if not spec_list and use_environ:
        gate_value = environ.get(_gate.ENV_ENABLE, "").strip()
        if gate_value and gate_value.lower() not in _gate.ENABLE_WORDS:
            spec_list = [gate_value]
    for spec in spec_list:
        layer, f = load_spec(spec)
        findings += f
        merged.merge(layer)
        names.append(spec)
    sources = [f"profile:{s}" for s in spec_list]

    if use_environ:
        env_text = environ.get(_gate.ENV_ENV, "")
        if env_text.strip():
            env_env, f = parse_env_flags(split_env_string(env_text), _gate.ENV_ENV)
            findings += f
            merged.env.update(env_env)
            merged.origin.update({f"env:{k}": _gate.ENV_ENV for k in env_env})
            sources.append(_gate.ENV_ENV)
        env_policy = policy_from_environ(environ)
        if env_policy:
            merged.policy.update(env_policy)
            sources.append("plugin environment variables")
    flag_env, f = parse_env_flags(env_flags, "--nccl-env")
    findings += f
    merged.env.update(flag_env)
    merged.origin.update({f"env:{k}": "--nccl-env" for k in flag_env})
    if env_flags:
        sources.append("--nccl-env")
        names.append("flags")
    if policy_flags:
        merged.policy.update({k: v for k, v in policy_flags.items() if v is not None})

    policy, f = _policy_from_mapping(merged.policy, "policy")
    findings += f
    from packaging.version import Version

    nccl_version = Version(policy.nccl_version) if policy.nccl_version else None

    def check_pairs(pairs: Mapping[str, str], where: str, origin_prefix: str) -> None:
        for k, v in pairs.items():
            src = merged.origin.get(f"{origin_prefix}:{k}", where)
            findings.extend(
                x.with_source(src)
                for x in nccl_vars.check(k, v, allow_unknown=policy.allow_unknown, nccl_version=nccl_version)
            )

    check_pairs(merged.env, "env", "env")
    for gname, genv in merged.groups.items():
        check_pairs(genv, f"groups.{gname}.env", f"groups.{gname}")
        if gname not in KNOWN_GROUPS:
            findings.append(
                warning(
                    f"groups.{gname}", None,
                    "no SGLang version known to this plugin creates a group with this name; the section "
                    "applies only if the installed SGLang creates it",
                    f"check the name (known: {', '.join(KNOWN_GROUPS)})",
                )
            )
        for k, v in genv.items():
            spec = nccl_vars.lookup(k)
            if nccl_vars.is_allowed_name(k) and (spec is None or not spec.per_communicator):
                why = (
                    f"NCCL reads {k} once per process and caches it, so a per-group value cannot take effect"
                    if spec is None or spec.scope == "process"
                    else f"{k} is read by PyTorch per process group, not by NCCL per communicator"
                )
                findings.append(
                    error(
                        k, v, f"[groups.{gname}.env]: {why}",
                        f"move {k} to [env] (same value in every group); only per-communicator variables "
                        f"({', '.join(sorted(n for n, s in nccl_vars.table().items() if s.per_communicator))}) "
                        "may differ per group",
                    ).with_source(merged.origin.get(f"groups.{gname}:{k}"))
                )
    for nrank, nenv in merged.nodes.items():
        check_pairs(nenv, f"nodes.{nrank}.env", f"nodes.{nrank}")
        for k, v in nenv.items():
            if nccl_vars.is_allowed_name(k) and nccl_vars.rank_rule(k) == "must_match":
                findings.append(
                    error(
                        k, v,
                        f"[nodes.{nrank}.env]: every rank of a communicator must hold the same {k}; a per-node "
                        "value would make nodes disagree (NCCL never checks: hang or silent corruption)",
                        f"move {k} to [env]; per-node sections are for node-local variables such as "
                        "NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_TOPO_FILE",
                    ).with_source(merged.origin.get(f"nodes.{nrank}:{k}"))
                )
    for name in policy.sglang_wins:
        if name not in merged.env:
            findings.append(
                warning(
                    "policy.sglang_wins", name,
                    "the profile does not set this variable, so there is nothing for SGLang to win against",
                    "remove it from sglang_wins or set it in [env]",
                )
            )

    errors = [x for x in findings if x.severity == "error"]
    if errors:
        raise ProfileError(findings)
    profile = Profile(
        name="+".join(names) if names else "(environment)",
        env=tuple(sorted(merged.env.items())),
        groups=tuple(sorted((g, tuple(sorted(e.items()))) for g, e in merged.groups.items() if e)),
        nodes=tuple(sorted((n, tuple(sorted(e.items()))) for n, e in merged.nodes.items() if e)),
        policy=policy,
        sources=tuple(sources),
        description=merged.description,
    )
    return Resolution(profile, tuple(x for x in findings if x.severity == "warning"))


def with_policy(profile: Profile, **changes: Any) -> Profile:
    return replace(profile, policy=replace(profile.policy, **changes))
