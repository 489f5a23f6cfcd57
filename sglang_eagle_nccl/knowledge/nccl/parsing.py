"""Value checks that follow what NCCL itself does with each string.

NCCL accepts almost anything silently: integers go through ``strtoll(str, NULL, 0)`` with no
end check (``4M`` is 4), level names are compared with ``strcmp`` (``nvl`` is ignored), and
from 2.24 an unknown ``NCCL_PROTO``/``NCCL_ALGO`` token fails communicator init on that rank
only. Each check here therefore reproduces NCCL's reading of the value and reports where the
user's intent and NCCL's reading part ways. Every function is pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from packaging.version import Version

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.findings import Finding, error, warning
from sglang_eagle_nccl.contract.names import is_ascii_digits
from sglang_eagle_nccl.knowledge.nccl.c_reading import (  # noqa: F401 - re-exported: the one copy lives there
    LEGACY_LEVELS,
    LEVEL_SINCE,
    LEVELS,
    LLONG_MAX,
    LLONG_MIN,
    Strtoll,
    read_level,
    strtoll0,
)

PROTOCOLS = ("LL", "LL128", "Simple")
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
# First NCCL release that knows each algorithm name (older releases ignore / reject it).
ALGORITHM_SINCE = {"NVLS": "2.17", "NVLSTree": "2.18", "PAT": "2.23"}
FUNCTIONS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "ABORT", "TRACE")
DEBUG_SUBSYS = (
    "INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "CALL", "PROXY",
    "NVLS", "BOOTSTRAP", "REG", "PROFILE", "RAS", "ALL", "ALLOC_HOST", "DESTROY",
)
CTA_POLICIES = {"DEFAULT": 0, "EFFICIENCY": 1, "ZERO": 2}

# Digit counts are bounded so that float()/int() never see strings long enough to overflow or to
# hit Python's int-conversion limit; longer numbers are not sizes anyone means.
_SIZE_SUFFIX = re.compile(r"^\s*([0-9]{1,15}(?:\.[0-9]{1,15})?)\s*([kKmMgGtT])(i?[bB])?\s*$", re.ASCII)
_SUFFIX_POWER = {"k": 1, "m": 2, "g": 3, "t": 4}

def _intended_size(text: str) -> int | None:
    m = _SIZE_SUFFIX.match(text)
    if not m:
        return None
    number = float(m.group(1))
    return int(number * (1024 ** _SUFFIX_POWER[m.group(2).lower()]))


def _version_at_least(nccl_version: Version | None, needed: str) -> bool | None:
    """True/False when the target NCCL version is known, None when it is not."""
    if nccl_version is None:
        return None
    return nccl_version >= Version(needed)


# --- individual kinds -------------------------------------------------------------------------


def check_integer(
    name: str,
    value: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    multiple_of: int | None = None,
    what: str = "an integer",
) -> list[Finding]:
    if value.strip() == "":
        return [error(name, value, "an empty value makes NCCL use its default", f"remove {name} or give {what}")]
    parsed = strtoll0(value)
    if parsed.consumed == "":
        return [
            error(
                name, value,
                f"NCCL parses {name} with strtoll, which reads no number from this text and uses 0",
                f"give {what}, e.g. {name}={minimum if minimum is not None and minimum > 0 else 1}",
            )
        ]
    if parsed.overflow:
        return [overflow_finding(name, value, minimum=minimum, maximum=maximum, what=what)]
    if parsed.rest.strip():
        return [
            error(
                name, value,
                f"NCCL parses {name} with strtoll and silently ignores the trailing {parsed.rest!r}, "
                f"so it would read {parsed.value}",
                f"write the plain integer, e.g. {name}={parsed.value}",
            )
        ]
    if parsed.octal:
        return [
            error(
                name, value,
                f"a leading 0 makes NCCL's strtoll(base 0) read {value!r} as octal = {parsed.value}",
                f"remove the leading zero: {name}={value.strip().lstrip('0') or '0'}",
            )
        ]
    findings: list[Finding] = []
    v = parsed.value
    if minimum is not None and v < minimum or maximum is not None and v > maximum:
        lo = "-inf" if minimum is None else str(minimum)
        hi = "inf" if maximum is None else str(maximum)
        findings.append(
            error(name, value, f"must be between {lo} and {hi}", f"choose {what} in [{lo}, {hi}]")
        )
    if multiple_of and v % multiple_of:
        down = max((v // multiple_of) * multiple_of, minimum or multiple_of)
        findings.append(
            error(
                name, value,
                f"must be a multiple of {multiple_of} (NCCL silently replaces other values)",
                f"use {down} or {down + multiple_of}",
            )
        )
    return findings


def overflow_finding(
    name: str, value: str, *, minimum: int | None = None, maximum: int | None = None, what: str = "an integer"
) -> Finding:
    """A number beyond C's long long: strtoll sets ERANGE and NCCL falls back to its default."""
    if minimum is not None or maximum is not None:
        fix = f"give {what} in [{'-inf' if minimum is None else minimum}, {'inf' if maximum is None else maximum}]"
    else:
        fix = f"give {what} that fits in 64 bits, or remove {name} to keep NCCL's default"
    return error(
        name, value,
        f"the number is outside C's long long range [{LLONG_MIN}, {LLONG_MAX}]: NCCL's strtoll overflows, "
        "NCCL logs 'Invalid value ... using default' and silently keeps its default",
        fix,
    )


def check_bytes(name: str, value: str, *, maximum: int | None = None) -> list[Finding]:
    intended = _intended_size(value)
    if intended is not None:
        read = strtoll0(value).value
        return [
            error(
                name, value,
                f"NCCL parses {name} with strtoll and no suffix: {value!r} is read as {read} byte(s)",
                f"write the byte count, e.g. {name}={intended}",
            )
        ]
    findings = check_integer(name, value, what="a positive number of bytes")
    if findings:
        return findings
    count = strtoll0(value).value
    if count <= 0:
        return [
            error(
                name, value,
                "must be a positive number of bytes (zero or negative sizes make NCCL misbehave)",
                f"remove {name} to keep NCCL's default, or give a positive byte count",
            )
        ]
    if maximum is not None and count > maximum:
        return [
            error(
                name, value,
                f"NCCL reads {name} as a 64-bit number but keeps it in a C int, so a size above {maximum} "
                "wraps around to a wrong (often negative) buffer size",
                f"give a byte count up to {maximum}, e.g. {name}={min(1 << 30, maximum)}",
            )
        ]
    return []


def check_bool(name: str, value: str) -> list[Finding]:
    if value in ("0", "1"):
        return []
    read = strtoll0(value).value
    # For NCCL_*_DISABLE switches 1 turns the feature off: say what each value does.
    fix = (f"use {name}=1 to disable or {name}=0 to leave enabled" if name.endswith("_DISABLE")
           else f"use {name}=1 to enable or {name}=0 to disable")
    return [error(name, value, f"must be 0 or 1; NCCL reads it with strtoll, so {value!r} means {read}", fix)]


def check_choice(name: str, value: str, choices: Sequence[str], case_sensitive: bool) -> list[Finding]:
    if value in choices:
        return []
    if not case_sensitive and value.upper() in {c.upper() for c in choices}:
        return []
    fixed = next((c for c in choices if c.upper() == value.upper()), None)
    fix = f"write {name}={fixed} (exact case)" if fixed else f"use one of: {', '.join(choices)}"
    return [error(name, value, f"must be one of {', '.join(choices)}", fix)]


def check_level(name: str, value: str, nccl_version: Version | None) -> list[Finding]:
    if value == "":
        return [error(name, value, "an empty level is ignored by NCCL", f"remove {name} or give a level name")]
    reading = read_level(value)
    if reading.how == "undefined":
        return [
            error(
                name, value,
                f"NCCL reads a legacy level with strtol into a C int, which makes {value!r} {reading.number}; a "
                "negative level passes NCCL's range check and indexes outside its level table (undefined behaviour)",
                f"use one of {', '.join(LEVELS)}",
            )
        ]
    if reading.how == "legacy":
        parsed = strtoll0(value)
        plain = not (parsed.rest or parsed.octal or parsed.overflow) and reading.number == parsed.value
        if not plain:
            # "09" is octal 0, "2x" is 2, 4294967296 wraps to 0 in a C int: NCCL reads a level
            # nobody wrote, and says only which one in its debug log.
            return [
                error(
                    name, value,
                    f"a legacy level must be a plain integer 0-5: NCCL reads {value!r} with strtol into a C int as "
                    f"{reading.number}, i.e. {reading.level}",
                    f"write the level name, e.g. {name}={reading.level}",
                )
            ]
        return [
            warning(
                name, value,
                f"legacy integer level; NCCL maps {reading.number} to {reading.level}",
                f"write {name}={reading.level} to say what you mean",
            )
        ]
    if value in LEVELS:
        since = LEVEL_SINCE.get(value)
        if since:
            ok = _version_at_least(nccl_version, since)
            if ok is False:
                return [
                    error(
                        name, value,
                        f"NCCL {nccl_version} does not know level {value} (added in {since}) and ignores it silently",
                        "use a level this NCCL knows, e.g. PXB or SYS",
                    )
                ]
            if ok is None:
                return [
                    warning(
                        name, value,
                        f"level {value} exists only from NCCL {since}; older NCCL ignores it silently",
                        f"make sure the NCCL in use is >= {since}, or set nccl_version in the profile",
                    )
                ]
        return []
    upper = value.upper()
    if upper in LEVELS:
        return [
            error(
                name, value,
                "NCCL compares level names with strcmp, so a non-UPPERCASE name is silently ignored "
                "(the level stays unset and no log line says so)",
                f"write {name}={upper}",
            )
        ]
    return [
        error(
            name, value,
            "unknown level name; NCCL silently ignores it",
            f"use one of {', '.join(LEVELS)} or a legacy integer 0-5",
        )
    ]


def _check_token_list(
    name: str,
    value: str,
    tokens: Sequence[str],
    nccl_version: Version | None,
    token_kind: str,
) -> tuple[list[Finding], list[tuple[str | None, bool, list[str]]]]:
    """Parse NCCL's ``[^]a,b;func:[^]c`` syntax (parseList in graph/tuning.cc, NCCL >= 2.24).

    Returns findings and the parsed sections ``(function or None, excluded, tokens)``.
    """
    findings: list[Finding] = []
    sections: list[tuple[str | None, bool, list[str]]] = []
    if value.strip() == "":
        return [error(name, value, f"an empty {name} means NCCL's default", f"remove {name}")], sections
    raw_sections = [s for s in value.split(";") if s != ""]  # strtok skips empty fields
    uses_func_syntax = ";" in value or ":" in value
    if uses_func_syntax:
        ok = _version_at_least(nccl_version, "2.24")
        if ok is False:
            findings.append(
                error(
                    name, value,
                    f"the per-collective 'func:list' syntax needs NCCL >= 2.24; NCCL {nccl_version} "
                    "treats the whole string as unknown tokens and ignores it",
                    f"use a flat list such as {name}={tokens[0]} for this NCCL",
                )
            )
            return findings, sections
    for index, section in enumerate(raw_sections):
        parts = section.split(":")
        if len(parts) > 2:
            findings.append(
                error(
                    name, value,
                    f"section {section!r} has more than one ':'; NCCL reads only up to the second one "
                    "and drops the rest silently",
                    "write one 'function:list' per section, sections separated by ';'",
                )
            )
            continue
        if len(parts) == 2:
            prefix, elems = parts
            if elems == "":
                findings.append(
                    error(name, value, f"{prefix!r}: has an empty list", f"give {token_kind}s after '{prefix}:'")
                )
                continue
            match = next((f for f in FUNCTIONS if f.lower() == prefix.lower()), None)
            if match is None:
                findings.append(
                    error(
                        name, value,
                        f"unknown collective {prefix!r}: NCCL fails communicator init with "
                        "'Unrecognized prefix token'",
                        f"use one of {', '.join(FUNCTIONS)} (case-insensitive)",
                    )
                )
                continue
            function: str | None = match
        else:
            if index > 0:
                findings.append(
                    error(
                        name, value,
                        f"only the first section may omit the 'function:' prefix, {section!r} does not "
                        "have one; NCCL fails communicator init",
                        f"prefix it, e.g. AllReduce:{section}",
                    )
                )
                continue
            function, elems = None, parts[0]
        excluded = elems.startswith("^")
        body = elems[1:] if excluded else elems
        items = [t for t in body.split(",") if t != ""]
        if not items:
            findings.append(
                error(
                    name, value,
                    "'^' must be followed by the tokens to exclude; an empty exclusion enables everything",
                    f"list what to exclude, e.g. {name}=^{tokens[0]}",
                )
            )
            continue
        known: list[str] = []
        for item in items:
            if "^" in item:
                findings.append(
                    error(
                        name, value,
                        f"'^' is only allowed at the start of a list, not in {item!r}",
                        f"exclude with a leading '^' before the whole list, e.g. {name}=^{item.replace('^', '')}",
                    )
                )
                continue
            match = next((t for t in tokens if t.lower() == item.lower()), None)
            if match is None:
                findings.append(
                    error(
                        name, value,
                        f"unknown {token_kind} {item!r}: NCCL >= 2.24 fails communicator init on this rank "
                        "(older NCCL ignores it silently)",
                        f"use {token_kind}s from: {', '.join(tokens)}",
                    )
                )
                continue
            known.append(match)
        sections.append((function, excluded, known))
    if uses_func_syntax and _version_at_least(nccl_version, "2.24") is None and not findings:
        findings.append(
            warning(
                name, value,
                "the per-collective syntax needs NCCL >= 2.24; older NCCL ignores the whole value",
                "make sure the NCCL in use is >= 2.24, or set nccl_version in the profile",
            )
        )
    return findings, sections


def check_proto(name: str, value: str, nccl_version: Version | None) -> list[Finding]:
    findings, sections = _check_token_list(name, value, PROTOCOLS, nccl_version, "protocol")
    if any(f.severity == "error" for f in findings):
        return findings
    forced_by = [
        "an exclusion list ('^...')" if excluded else "naming LL128 explicitly"
        for _, excluded, items in sections
        if (excluded and "LL128" not in items) or (not excluded and "LL128" in items)
    ]
    if forced_by:
        findings.append(
            warning(
                name, value,
                f"{forced_by[0]} forces LL128 on, skipping NCCL's hardware check that normally disables it; "
                "on unsupported topologies LL128 can corrupt data silently (NVIDIA/nccl#790)",
                "list only the protocols you want without '^' and without LL128 (e.g. LL,Simple) unless "
                "LL128 is known to be safe on this hardware",
            )
        )
    return findings


def check_algo(name: str, value: str, nccl_version: Version | None) -> list[Finding]:
    findings, sections = _check_token_list(name, value, ALGORITHMS, nccl_version, "algorithm")
    for _, _, items in sections:
        for algo in items:
            since = ALGORITHM_SINCE.get(algo)
            if since and _version_at_least(nccl_version, since) is False:
                findings.append(
                    error(
                        name, value,
                        f"algorithm {algo} needs NCCL >= {since}; NCCL {nccl_version} does not know it",
                        "remove it or use Ring/Tree",
                    )
                )
    return findings


def enable_row(
    value: str | None, tokens: Sequence[str], function: str, defaults: Mapping[str, int] | None = None
) -> dict[str, int] | None:
    """NCCL's enable flags of one collective under an ``NCCL_PROTO``/``NCCL_ALGO`` value.

    Follows parseList in src/graph/tuning.cc (2.24+; a flat list means the same in older releases):
    each token starts at its default (1, or e.g. 2 for LL128: "on where the hardware allows"); a
    section without prefix applies to all functions, a ``func:`` section replaces that function's
    row: listed tokens 1, the others 0, or with ``^`` listed tokens 0 and the others 1. Returns
    None for a value NCCL would reject (its own validation reports why).
    """
    row = {t: (defaults or {}).get(t, 1) for t in tokens}
    if value is None:
        return row
    findings, sections = _check_token_list("value", value, tokens, None, "token")
    if any(f.severity == "error" for f in findings):
        return None
    for section_function, excluded, items in sections:
        if section_function is not None and section_function.lower() != function.lower():
            continue
        row = {t: int((t in items) != excluded) for t in tokens}
    return row

_THRESHOLD = re.compile(r"-?[0-9]{1,18}", re.ASCII)


def check_thread_thresholds(name: str, value: str) -> list[Finding]:
    parts = value.split(" ")
    if len(parts) != 6 or any(not _THRESHOLD.fullmatch(p) for p in parts):
        return [
            error(
                name, value,
                "NCCL reads six integers separated by single spaces (Tree LL/LL128/Simple, Ring LL/LL128/Simple)",
                f"write six numbers, e.g. {name}='64 256 256 64 256 256' (-2 keeps a default)",
            )
        ]
    bad = [p for p in parts if int(p) < -2]
    if bad:
        return [error(name, value, "thresholds must be >= 0 (or -2 for default)", "fix the negative entries")]
    return []


def check_debug_level(name: str, value: str) -> list[Finding]:
    if value.upper() in DEBUG_LEVELS:
        return []
    return [error(name, value, "unknown debug level", f"use one of {', '.join(DEBUG_LEVELS)}")]


def check_debug_subsys(name: str, value: str) -> list[Finding]:
    body = value[1:] if value.startswith("^") else value
    items = [s for s in body.split(",")]
    findings = []
    for item in items:
        if item.upper() not in DEBUG_SUBSYS:
            findings.append(
                error(
                    name, value,
                    f"unknown subsystem {item!r}",
                    f"use a comma list of {', '.join(DEBUG_SUBSYS)} (a leading ^ inverts the list)",
                )
            )
    return findings


# The one placeholder the plugin expands (sglang_eagle_nccl.profile.placeholders): the launch's
# audit directory, allowed only as the leading path component of NCCL_DEBUG_FILE, so NCCL's
# debug output lands next to the audit records in a private 0700 directory.
# Defined in names (import-free) so a process can test for it without importing this module.
AUDIT_DIR_PLACEHOLDER = names.AUDIT_DIR_PLACEHOLDER
PLACEHOLDER_VARIABLES = ("NCCL_DEBUG_FILE",)


def placeholder_prefix_rest(value: str) -> str | None:
    """The part after ``{audit_dir}/`` when ``value`` starts with it, else None."""
    prefix = AUDIT_DIR_PLACEHOLDER + "/"
    return value[len(prefix) :] if value.startswith(prefix) else None


def check_placeholder_use(name: str, value: str) -> list[Finding]:
    """``{audit_dir}`` only as the leading path component of NCCL_DEBUG_FILE, nowhere else."""
    if AUDIT_DIR_PLACEHOLDER not in value:
        return []
    rest = placeholder_prefix_rest(value)
    if name not in PLACEHOLDER_VARIABLES or rest is None or AUDIT_DIR_PLACEHOLDER in rest:
        return [
            error(
                name, value,
                f"the placeholder {AUDIT_DIR_PLACEHOLDER} is expanded only as the leading path component of "
                f"{', '.join(PLACEHOLDER_VARIABLES)}; anywhere else NCCL would read it literally",
                f"write NCCL_DEBUG_FILE={AUDIT_DIR_PLACEHOLDER}/nccl.%h.%p.log, or use a literal path in {name}",
            )
        ]
    parts = rest.split("/")
    if rest == "" or rest.startswith("/") or ".." in parts or "" in parts:
        return [
            error(
                name, value,
                f"after {AUDIT_DIR_PLACEHOLDER}/ must come a file name inside the launch's audit directory "
                "(no '..', no empty or absolute components)",
                f"write {name}={AUDIT_DIR_PLACEHOLDER}/nccl.%h.%p.log",
            )
        ]
    return []


def check_debug_file(name: str, value: str) -> list[Finding]:
    if value.strip() == "":
        return [error(name, value, "an empty file name sends output to stdout", f"remove {name} or give a path")]
    if "~" in value:
        return [
            error(
                name, value,
                "NCCL does not expand '~' in NCCL_DEBUG_FILE (the file would be created in a directory named '~')",
                "write an absolute path such as <log dir>/nccl.%h.%p.log",
            )
        ]
    findings: list[Finding] = check_placeholder_use(name, value)
    if findings:
        return findings
    for m in re.finditer(r"%(.)?", value):
        code = m.group(1)
        if code not in ("h", "p", "%"):
            findings.append(
                error(
                    name, value,
                    f"NCCL only expands %h (hostname), %p (pid) and %%; {m.group(0)!r} is kept literally",
                    "use only %h, %p or %%",
                )
            )
    if "%p" not in value:
        findings.append(
            warning(
                name, value,
                "without %p every process of a host opens the same file with mode 'w' and truncates "
                "the others' output",
                f"add %p, e.g. {name}=<log dir>/nccl.%h.%p.log",
            )
        )
    if not value.startswith("/") and placeholder_prefix_rest(value) is None:
        findings.append(
            warning(
                name, value,
                "a relative path is resolved in each process's working directory",
                f"use an absolute path, or {AUDIT_DIR_PLACEHOLDER}/nccl.%h.%p.log for the launch's audit directory",
            )
        )
    return findings


def check_ifname_list(name: str, value: str) -> list[Finding]:
    if len(value) <= 1:
        return [
            error(
                name, value,
                "NCCL ignores a value of one character or less and auto-selects interfaces",
                "give interface name prefixes such as eth0 or ^docker,lo",
            )
        ]
    body = value.lstrip("^").lstrip("=")
    items = body.split(",")
    findings = []
    for item in items:
        host = item.split(":", 1)[0]
        if not host or not re.fullmatch(r"[A-Za-z0-9_.\-@]+", host):
            findings.append(
                error(
                    name, value,
                    f"{item!r} is not an interface name",
                    "write a comma list of interface names or prefixes (^ to exclude, = for exact match)",
                )
            )
        if ":" in item and not is_ascii_digits(item.split(":", 1)[1]):
            findings.append(error(name, value, f"port in {item!r} must be a number", "write name:port"))
    return findings


def check_hca_list(name: str, value: str) -> list[Finding]:
    body = value
    if body.startswith("^"):
        body = body[1:]
    if body.startswith("="):
        body = body[1:]
    if not body:
        return [error(name, value, "no HCA names given", "write e.g. mlx5_0:1,mlx5_1:1")]
    findings = []
    for item in body.split(","):
        fields = item.split(":")
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", fields[0]):
            findings.append(error(name, value, f"{item!r} is not an HCA name", "write hca[:port] entries"))
            continue
        if any(not is_ascii_digits(f) for f in fields[1:]) or len(fields) > 4:
            findings.append(
                error(name, value, f"{item!r}: port (and 2.30 rail:plane) must be numbers", "write hca:port")
            )
    if not value.startswith(("=", "^=")):
        findings.append(
            warning(
                name, value,
                "without a leading '=' NCCL matches prefixes: mlx5_1 also selects mlx5_10..mlx5_19",
                f"write {name}={'^' if value.startswith('^') else ''}={body} for exact names",
            )
        )
    return findings


def check_cta_policy(name: str, value: str, nccl_version: Version | None) -> list[Finding]:
    if value in ("0", "1"):
        return []
    if value == "2":
        if _version_at_least(nccl_version, "2.28") is False:
            return [error(name, value, "policy 2 (ZERO) needs NCCL >= 2.28", "use 0 or 1")]
        return []
    names = value.split("|")
    if all(n in CTA_POLICIES for n in names):
        if _version_at_least(nccl_version, "2.29") is False:
            return [error(name, value, "policy names need NCCL >= 2.29", "use the digits 0, 1 or 2")]
        return []
    return [
        error(
            name, value,
            "unknown CTA policy",
            "use 0 (DEFAULT), 1 (EFFICIENCY), 2 (ZERO) or from NCCL 2.29 names joined by '|'",
        )
    ]


def check_host_port(name: str, value: str) -> list[Finding]:
    m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):([0-9]{1,5})", value, re.ASCII)
    if not m or not 0 < int(m.group(2)) < 65536:
        return [error(name, value, "must be host:port or [ipv6]:port", f"write e.g. {name}=10.0.0.1:29500")]
    return []


def check_name_list(name: str, value: str) -> list[Finding]:
    if value == "ALL":
        return []
    bad = [n for n in value.split(",") if not re.fullmatch(r"NCCL_[A-Z0-9_]+", n)]
    if bad:
        return [error(name, value, f"not NCCL variable names: {', '.join(bad)}", "list NCCL_* names or ALL")]
    return []


def check_text(name: str, value: str) -> list[Finding]:
    if value == "":
        return [error(name, value, "an empty value means NCCL's default", f"remove {name}")]
    return []


Checker = Callable[..., list[Finding]]
