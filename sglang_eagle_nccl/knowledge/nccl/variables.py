"""Knowledge about each NCCL / PyTorch-NCCL variable, read from ``data/nccl_vars.toml``.

The table is data (readable without this code); this module turns a (name, value) pair into
findings using the checks in :mod:`sglang_eagle_nccl.knowledge.nccl.parsing`, and answers scope / cross-rank questions for
the rest of the plugin. The table is loaded lazily: processes that only re-apply an already
validated profile never parse it.
"""

from __future__ import annotations

import difflib
import functools
import unicodedata
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from packaging.version import Version

from sglang_eagle_nccl.contract.findings import Finding, error, warning
from sglang_eagle_nccl.contract.names import (
    ALLOWED_PREFIXES,
    MAX_ARG_STRLEN,
    env_entry_bytes,
    is_allowed_name,
)
from sglang_eagle_nccl.knowledge._toml import loads as toml_loads
from sglang_eagle_nccl.knowledge.nccl import local_files
from sglang_eagle_nccl.knowledge.nccl import parsing as p

__all__ = ["ALLOWED_PREFIXES", "is_allowed_name"]

Scope = Literal["process", "communicator", "torch_pg"]
RankRule = Literal["must_match", "node_local", "free"]



@dataclass(frozen=True)
class VarSpec:
    name: str
    kind: str
    scope: Scope
    ranks: RankRule
    summary: str
    values: str
    changes: tuple[str, ...] = ()
    since: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    multiple_of: int | None = None
    choices: tuple[str, ...] = ()
    case_sensitive: bool = False
    warning: str | None = None
    plugin: str | None = None  # kind plugin_lib: which NCCL plugin (net, tuner, profiler, env)

    @property
    def per_communicator(self) -> bool:
        """True when NCCL re-reads it at each communicator init (may be overridden per group)."""
        return self.scope == "communicator"

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "scope": self.scope,
            "ranks": self.ranks,
            "summary": self.summary,
            "values": self.values,
            "changes": list(self.changes),
            "since": self.since,
            "warning": self.warning,
        }


@functools.cache
def table() -> dict[str, VarSpec]:
    """All known variables, by name."""
    text = resources.files("sglang_eagle_nccl.knowledge.nccl").joinpath("data/nccl_vars.toml").read_text("utf-8")
    raw = toml_loads(text)
    specs: dict[str, VarSpec] = {}
    for name, row in raw.items():
        specs[name] = VarSpec(
            name=name,
            kind=row["kind"],
            scope=row["scope"],
            ranks=row["ranks"],
            summary=row["summary"],
            values=row["values"],
            changes=tuple(row.get("changes", ())),
            since=row.get("since"),
            minimum=row.get("min"),
            maximum=row.get("max"),
            multiple_of=row.get("multiple_of"),
            choices=tuple(row.get("choices", ())),
            case_sensitive=row.get("case_sensitive", False),
            warning=row.get("warning"),
            plugin=row.get("plugin"),
        )
    return specs


def lookup(name: str) -> VarSpec | None:
    return table().get(name)


def closest(name: str, n: int = 3) -> list[str]:
    return difflib.get_close_matches(name.upper(), list(table()), n=n, cutoff=0.6)


def check_name(name: str, *, allow_unknown: bool) -> list[Finding]:
    """Refuse anything outside NCCL_*/TORCH_NCCL_*; flag unknown NCCL names with a suggestion."""
    if not is_allowed_name(name):
        upper = name.upper()
        if upper != name and is_allowed_name(upper):
            return [
                error(
                    name, None,
                    "environment variable names are case-sensitive and NCCL only reads UPPERCASE names",
                    f"write {upper}",
                )
            ]
        return [
            error(
                name, None,
                "a profile may only set NCCL_* and TORCH_NCCL_* variables (anything else could change how "
                "programs run, e.g. LD_PRELOAD or PATH)",
                "set other variables in your shell or service definition, not in an NCCL profile",
            )
        ]
    if name in table():
        return []
    suggestions = closest(name)
    hint = f"did you mean {' or '.join(suggestions)}? " if suggestions else ""
    if allow_unknown:
        return [
            warning(
                name, None,
                "not a variable this plugin knows; it is passed through unchecked (allow_unknown is on)",
                f"{hint}check the name against your NCCL release notes",
            )
        ]
    return [
        error(
            name, None,
            "unknown NCCL variable (a typo is silently ignored by NCCL)",
            f"{hint}if it is new in your NCCL release, allow it with allow_unknown = true "
            "(profile [policy]) or --allow-unknown",
        )
    ]


# Kinds NCCL parses as numbers (strtoll) or compares with names byte by byte (strcmp,
# strcasecmp): a non-ASCII character there is never read the way Python's int() or
# str.upper() would read it ("٣" is 3 to int(), nothing to strtoll; "ınıt".upper() is "INIT").
ASCII_KINDS = frozenset({
    "bytes", "int", "bool", "choice", "level", "proto_list", "algo_list", "thread_thresholds", "debug_level",
    "debug_subsys", "cta_policy", "host_port", "name_list", "hca_list", "ifname_list",
})


def check_environment_value(name: str, value: str) -> list[Finding]:
    """Rules every value must meet to be put in a process environment at all."""
    if "\x00" in value or "\n" in value:
        return [error(name, value, "values cannot contain NUL or newline characters", "remove them")]
    try:
        value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return [
            error(
                name, value,
                "the value holds characters that cannot be written into a process environment (lone surrogates)",
                "write it as plain text",
            )
        ]
    size = env_entry_bytes(name, value)
    if size > MAX_ARG_STRLEN:
        return [
            error(
                name, value,
                f"{name}=<value> takes {size} bytes with its terminating NUL; Linux refuses any single environment "
                f"entry over MAX_ARG_STRLEN ({MAX_ARG_STRLEN} bytes), so every process started with it would fail "
                "with 'Argument list too long' (E2BIG)",
                f"shorten the value to under {MAX_ARG_STRLEN - len(name) - 2} bytes",
            )
        ]
    return p.check_placeholder_use(name, value)


def _non_ascii(name: str, value: str) -> list[Finding]:
    bad = next(c for c in value if not c.isascii())
    digits_only = all(c.isascii() or unicodedata.decimal(c, None) is not None for c in value)
    if digits_only:
        fixed = "".join(c if c.isascii() else str(unicodedata.decimal(c)) for c in value)
        fix = f"write the digits in ASCII: {name}={fixed}"
    else:
        fix = f"write {name} with ASCII characters only"
    return [
        error(
            name, value,
            f"contains the non-ASCII character {bad!r} (U+{ord(bad):04X}); NCCL reads {name} byte by byte "
            "(strtoll / strcmp), so it is never taken as a digit or as part of a known name",
            fix,
        )
    ]


def check_value(spec: VarSpec, value: str, nccl_version: Version | None = None) -> list[Finding]:
    """Check one value against NCCL's own reading of it."""
    name = spec.name
    kind = spec.kind
    basic = check_environment_value(name, value)
    if basic:
        return basic
    if kind in ASCII_KINDS and not value.isascii():
        return _non_ascii(name, value)
    if kind == "bytes":
        findings = p.check_bytes(name, value, maximum=spec.maximum)
    elif kind == "int":
        findings = p.check_integer(
            name, value, minimum=spec.minimum, maximum=spec.maximum, multiple_of=spec.multiple_of
        )
    elif kind == "bool":
        findings = p.check_bool(name, value)
    elif kind == "choice":
        findings = p.check_choice(name, value, spec.choices, spec.case_sensitive)
    elif kind == "level":
        findings = p.check_level(name, value, nccl_version)
    elif kind == "proto_list":
        findings = p.check_proto(name, value, nccl_version)
    elif kind == "algo_list":
        findings = p.check_algo(name, value, nccl_version)
    elif kind == "thread_thresholds":
        findings = p.check_thread_thresholds(name, value)
    elif kind == "debug_level":
        findings = p.check_debug_level(name, value)
    elif kind == "debug_subsys":
        findings = p.check_debug_subsys(name, value)
    elif kind == "debug_file":
        findings = p.check_debug_file(name, value)
        if not any(f.severity == "error" for f in findings):
            findings += local_files.check_debug_file_directory(name, value)
    elif kind == "ifname_list":
        findings = p.check_ifname_list(name, value)
    elif kind == "hca_list":
        findings = p.check_hca_list(name, value)
    elif kind == "cta_policy":
        findings = p.check_cta_policy(name, value, nccl_version)
    elif kind == "host_port":
        findings = p.check_host_port(name, value)
    elif kind == "name_list":
        findings = p.check_name_list(name, value)
    elif kind == "text":
        findings = p.check_text(name, value)
    elif kind == "plugin_lib":
        findings = local_files.check_plugin_library(name, value, spec.plugin or "net")
    else:  # pragma: no cover - guarded by test_table_kinds_are_known
        raise ValueError(f"unknown kind {kind!r} for {name}")
    if spec.since and nccl_version is not None and nccl_version < Version(spec.since):
        findings.append(
            warning(
                name, value,
                f"NCCL {nccl_version} does not read {name} (added in {spec.since}); it has no effect",
                f"remove it or upgrade NCCL to >= {spec.since}",
            )
        )
    if spec.warning and not any(f.severity == "error" for f in findings):
        findings.append(warning(name, value, spec.warning, "see `sglang-eagle-nccl explain " + name + "`"))
    return findings


def check(
    name: str, value: str, *, allow_unknown: bool = False, nccl_version: Version | None = None
) -> list[Finding]:
    """Every finding about setting ``name=value``."""
    findings = check_name(name, allow_unknown=allow_unknown)
    if any(f.severity == "error" for f in findings):
        return findings
    spec = lookup(name)
    if spec is None:
        return findings + check_environment_value(name, value)
    return findings + check_value(spec, value, nccl_version)


def scope_of(name: str) -> Scope:
    spec = lookup(name)
    # Unknown variables are treated as read once per process: the safe assumption.
    return spec.scope if spec else "process"


def rank_rule(name: str) -> RankRule:
    spec = lookup(name)
    # Unknown variables must match across ranks: a false alarm is cheaper than a hang.
    return spec.ranks if spec else "must_match"
