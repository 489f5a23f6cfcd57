"""Where profile settings come from: built-in profiles, TOML files (data only), ``KEY=VALUE`` items.

Everything here returns partially built layers plus findings; nothing is validated against
NCCL's rules yet (that is :mod:`sglang_eagle_nccl.profile.resolve`) and nothing is applied.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.findings import Finding, error
from sglang_eagle_nccl.contract.names import NODE_RANK_MAX_DIGITS, parse_node_rank
from sglang_eagle_nccl.profile.policy import Sourced

# A profile is a short file: the built-in ones are under 2 KiB, and a 1000-node cluster with
# per-node interface names fits in about 100 KiB. The cap bounds the TOML parser's time (it is
# linear once nesting is bounded: about 0.25 s for 256 KiB of keys on a slow core).
MAX_PROFILE_BYTES = 256 * 1024
# The deepest legal profile structure is three tables ([groups.<name>.env], [nodes.<rank>.env])
# plus one list ([policy] sglang_wins). 16 leaves room for quoting and floats while keeping the
# TOML parser far from its recursion limit and from its quadratic cost on long dotted keys.
MAX_TOML_NESTING = 16
UTF8_BOM = "\ufeff"


def builtin_names() -> list[str]:
    folder = resources.files("sglang_eagle_nccl.profile").joinpath("builtin")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def builtin_text(name: str) -> str:
    return resources.files("sglang_eagle_nccl.profile").joinpath(f"builtin/{name}.toml").read_text("utf-8")


@dataclass
class _Layer:
    """Partially built profile; values still unchecked strings."""

    env: dict[str, str] = field(default_factory=dict)
    groups: dict[str, dict[str, str]] = field(default_factory=dict)
    nodes: dict[int, dict[str, str]] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # "env:NCCL_X" -> source label
    description: str = ""
    # [[tuner.rules]] as written (checked in resolve), each with the source it came from.
    tuner_rules: list[tuple[Any, str]] = field(default_factory=list)
    # Where each value was written ("env:NCCL_X", "groups.tp:NCCL_X", "nodes.1:NCCL_X" as in origin),
    # in the order the user wrote them: sources in precedence order, each in its own order (a file:
    # as TOML reads it). A value written again moves to its latest place. Problems are listed in
    # this order (resolve.validate_layer).
    order: list[str] = field(default_factory=list)

    def wrote(self, keys: Iterable[str]) -> None:
        """Record that the values at ``keys`` were (re)written now, in this order."""
        keys = list(keys)
        again = set(keys)
        self.order = [k for k in self.order if k not in again] + keys

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
        # First match wins: a later layer's rules (a file on top of a built-in it extends, a second
        # --profile) come first, so they take precedence over the rules they are layered on.
        self.tuner_rules = list(other.tuner_rules) + self.tuner_rules
        self.wrote(other.order)


_TOP_KEYS = {"name", "description", "extends", "env", "groups", "nodes", "policy", "tuner"}


def _value_to_str(name: str, value: Any, where: str, findings: list[Finding]) -> str | None:
    # TOML integers are accepted (NCCL_BUFFSIZE = 16777216); booleans and floats are not,
    # because NCCL would read "true" as 0 and "1.5" as 1.
    if isinstance(value, bool):
        from sglang_eagle_nccl.knowledge.nccl.variables import lookup

        # "1"/"0" only fixes an on/off switch: NCCL_PROTO = true needs a protocol list, not "1".
        spec = lookup(name) if isinstance(name, str) else None
        fix = f'write {name} = "{int(value)}"' if spec is not None and spec.kind == "bool" else f'write {name} = "<value>"'
        findings.append(error(name, str(value).lower(), f"{where}: TOML booleans are not NCCL values", fix))
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


def parse_toml_document(text: str, source: str, *, what: str = "profile") -> tuple[dict[str, Any] | None, list[Finding]]:
    """A TOML document from outside (a profile, a rules file) as data, or None and the one finding why.

    Bounded before the parser sees it (size, nesting: :func:`~sglang_eagle_nccl.knowledge._toml.nesting_problem`),
    and every way the parser can fail ends in a finding that names ``source`` and, where the parser
    or a scan can tell, the line: malformed TOML, an integer beyond Python's digit limit (a bare
    ValueError from ``int()``), a recursion. A UTF-8 byte-order mark at the start is ignored.
    """
    from sglang_eagle_nccl.knowledge._toml import (
        TOMLDecodeError,
        int_digit_limit,
        long_integer_line,
        nesting_problem,
    )
    from sglang_eagle_nccl.knowledge._toml import loads as toml_loads

    if text.startswith(UTF8_BOM):
        text = text[len(UTF8_BOM) :]
    if len(text) > MAX_PROFILE_BYTES:
        return None, [
            error(
                source, None,
                f"the {what} is {len(text)} characters long, over the {MAX_PROFILE_BYTES // 1024} KiB limit",
                f"a {what} is a short TOML file: keep only the NCCL settings and policy it needs",
            )
        ]
    deep = nesting_problem(text, MAX_TOML_NESTING)
    if deep:
        return None, [
            error(
                source, None,
                f"the TOML document nests too deeply: {deep} (a profile needs at most 3 levels, "
                f"the limit is {MAX_TOML_NESTING})",
                "write flat [env], [groups.<name>.env], [nodes.<rank>.env] and [policy] tables",
            )
        ]
    try:
        doc = toml_loads(text)
    except TOMLDecodeError as exc:
        return None, [error(source, None, f"malformed TOML: {exc}", "fix the TOML syntax (see the line/column above)")]
    except ValueError:
        # tomllib converts integers with int(), which refuses more digits than Python's limit
        # (4300 by default) with a ValueError of its own, not a TOMLDecodeError.
        limit = int_digit_limit()
        line = long_integer_line(text, limit) if limit else None
        where = f" on line {line}" if line else ""
        return None, [
            error(
                source, None,
                f"an integer{where} has more than {limit} digits, more than Python reads (and far more than "
                "the 64 bits NCCL reads a number into)",
                "write a number that fits in 64 bits (or quote it as a string if it is not a number)",
            )
        ]
    except RecursionError:  # unreachable after nesting_problem; kept so no input can raise it
        return None, [error(source, None, "the TOML document nests too deeply", "write flat tables")]
    # A hexadecimal, octal or binary integer is read without Python's digit limit (a power-of-two
    # base), but cannot be written back in decimal beyond it: refuse it here, named, like a long
    # decimal one, before anything calls str() on it.
    huge = list(_huge_integers(doc, ""))
    if huge:
        limit = int_digit_limit()
        return None, [
            error(
                where, f"{value:#x}",
                f"an integer of {value.bit_length()} bits has more than {limit} decimal digits, more than Python "
                "writes (and far more than the 64 bits NCCL reads a number into)",
                "write a number that fits in 64 bits (or quote it as a string if it is not a number)",
            ).with_source(source)
            for where, value in huge
        ]
    return doc, []


def _huge_integers(obj: Any, where: str) -> Any:
    """(dotted key, integer) for every integer of ``obj`` whose decimal text Python refuses, in document order."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        here = f"{where}[{key}]" if isinstance(key, int) else (f"{where}.{_shown_key(key)}" if where else _shown_key(key))
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                str(value)
            except ValueError:
                yield here, value
        elif isinstance(value, (dict, list)):
            yield from _huge_integers(value, here)


def _shown_key(key: str) -> str:
    # A key is shown as a TOML reader would write it back: control characters escaped, never raw.
    return key if key.isprintable() else key.encode("unicode_escape").decode("ascii")


def parse_toml_profile(text: str, source: str, *, allow_extends: bool = True) -> tuple[_Layer, list[Finding]]:
    """Read one TOML profile document (data only: nothing in it is executed; the one placeholder,
    ``{audit_dir}`` at the start of NCCL_DEBUG_FILE, is expanded later by the plugin).

    A UTF-8 byte-order mark at the start is accepted and ignored: Windows editors write one, it
    carries no meaning in TOML, and refusing it would only produce a puzzling "invalid
    statement at line 1, column 1".
    """
    findings: list[Finding] = []
    layer = _Layer()
    doc, problems = parse_toml_document(text, source)
    if doc is None:
        return layer, problems
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
        findings.append(error("groups", None, "[groups] must contain [groups.<name>.env] tables",
                              "write one table per group, e.g. [groups.tp.env] then NCCL_PROTO = \"LL\""))
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
        findings.append(error("nodes", None, "[nodes] must contain [nodes.<rank>.env] tables",
                              "write one table per node rank, e.g. [nodes.0.env] then NCCL_SOCKET_IFNAME = \"eth0\""))
        nodes = {}
    node_ranks, node_findings = check_node_keys(list(nodes))
    findings += node_findings
    for nkey, ntable in nodes.items():
        rank = node_ranks.get(nkey)
        if rank is None:
            continue
        if not isinstance(ntable, dict) or set(ntable) - {"env"}:
            findings.append(error(f"nodes.{nkey}", None, "a node section may only contain an env table", f"write [nodes.{nkey}.env]"))
            continue
        nenv = _env_table(ntable.get("env", {}), f"nodes.{nkey}.env", source, findings)
        layer.nodes.setdefault(rank, {}).update(nenv)
        layer.origin.update({f"nodes.{rank}:{k}": source for k in nenv})
    policy = doc.get("policy", {})
    if not isinstance(policy, dict):
        findings.append(error("policy", None, "[policy] must be a table", "write [policy] then key = value"))
    else:
        # Each value remembers its file, so a bad one is reported with the file's name even after
        # the layers are merged (see Sourced).
        layer.policy.update({k: Sourced(v, f"policy.{k}", source) for k, v in policy.items()})
    tuner = doc.get("tuner", {})
    if not isinstance(tuner, dict) or set(tuner) - {"rules"}:
        findings.append(error("tuner", None, "the tuner section holds only [[tuner.rules]] blocks",
                              "write each rule as a [[tuner.rules]] block (see `sglang-eagle-nccl tuner --help`)"))
    elif "rules" in tuner:
        rules = tuner["rules"]
        if not isinstance(rules, list):
            findings.append(error("tuner.rules", None, "must be a list of rules", "write each rule as a [[tuner.rules]] block"))
        else:
            # A file's own rules replace those of the built-in it extends only by coming first.
            layer.tuner_rules = [(r, source) for r in rules] + layer.tuner_rules
    layer.wrote(_document_order(doc, node_ranks, layer))
    return layer, [f.with_source(source) for f in findings]


def _document_order(doc: dict[str, Any], node_ranks: dict[str, int], layer: _Layer) -> list[str]:
    """The values this document wrote (as origin keys), in the order TOML reads them: tables in
    the order they first appear, each table's names in the order written."""
    out: list[str] = []
    for key, table in doc.items():
        if key == "env" and isinstance(table, dict):
            out += [f"env:{k}" for k in table if k in layer.env]
        elif key == "groups" and isinstance(table, dict):
            for gname, gtable in table.items():
                env = gtable.get("env") if isinstance(gtable, dict) else None
                if isinstance(env, dict):
                    out += [f"groups.{gname}:{k}" for k in env if k in layer.groups.get(gname, {})]
        elif key == "nodes" and isinstance(table, dict):
            for nkey, ntable in table.items():
                env = ntable.get("env") if isinstance(ntable, dict) else None
                rank = node_ranks.get(nkey)
                if rank is not None and isinstance(env, dict):
                    out += [f"nodes.{rank}:{k}" for k in env if k in layer.nodes.get(rank, {})]
    return out


def check_node_keys(keys: Iterable[str]) -> tuple[dict[str, int], list[Finding]]:
    """Node ranks of ``[nodes.<key>]`` sections: plain ASCII digits, and no two keys for one rank.

    ``"007"`` and ``"7"`` are different TOML keys but the same node rank; merging them silently
    would let one section override the other depending on key order.
    """
    ranks: dict[str, int] = {}
    findings: list[Finding] = []
    by_rank: dict[int, list[str]] = {}
    for key in keys:
        rank = parse_node_rank(key)
        if rank is None:
            findings.append(
                error(
                    f"nodes.{key}", None,
                    f"node sections are keyed by node rank: plain digits 0-9, at most {NODE_RANK_MAX_DIGITS} "
                    "(SGLang's --node-rank)",
                    "write [nodes.0.env], [nodes.1.env], ...",
                )
            )
            continue
        ranks[key] = rank
        by_rank.setdefault(rank, []).append(key)
    for rank, same in by_rank.items():
        if len(same) > 1:
            findings.append(
                error(
                    " and ".join(f"nodes.{k}" for k in same), None,
                    f"these sections all mean node rank {rank}; one would silently override the other",
                    f"keep one section, written [nodes.{rank}.env]",
                )
            )
            for key in same:
                ranks.pop(key, None)
    return ranks, findings


def read_profile_file(path: str) -> tuple[_Layer, list[Finding]]:
    from sglang_eagle_nccl.contract.files import UnreadableFile, read_regular_file

    label = path
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        return _Layer(), [
            error(path, None, "profile file not found", f"check the path, or use a built-in name ({', '.join(builtin_names())})")
        ]
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        return _Layer(), [error(path, None, f"cannot read profile file ({getattr(exc, 'strerror', None) or exc})", "check the path and permissions")]
    if not p.is_file():
        return _Layer(), [error(path, None, "profile path is not a regular file", "give a .toml file")]
    if st.st_size > MAX_PROFILE_BYTES:
        return _Layer(), [
            error(path, None, f"profile file is larger than {MAX_PROFILE_BYTES // 1024} KiB", "a profile is a short TOML file")
        ]
    try:
        # Non-blocking, regular files only: the name may have been swapped for a FIFO since stat.
        data = read_regular_file(path, MAX_PROFILE_BYTES, follow_symlinks=True)
    except UnreadableFile as exc:
        if "ermission denied" in exc.reason:
            return _Layer(), [error(path, None, "profile file is not readable (permission denied)", f"chmod a+r {path}")]
        return _Layer(), [error(path, None, f"cannot read profile file ({exc.reason})", "check the file")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _Layer(), [error(path, None, "profile file is not UTF-8 text", "save it as UTF-8 TOML")]
    return parse_toml_profile(text, label)


def load_spec(spec: str, variable: str = "profile") -> tuple[_Layer, list[Finding]]:
    """A built-in profile name or a TOML file path.

    ``variable`` is what the user wrote the spec in, named when it matches nothing: pass
    ``SGLANG_EAGLE_NCCL`` for the gate's value, so the error says which variable to fix.
    """
    spec = spec.strip()
    if spec in builtin_names() and "/" not in spec:
        return parse_toml_profile(builtin_text(spec), f"builtin:{spec}", allow_extends=False)
    if "/" in spec or spec.endswith(".toml") or os.path.exists(spec):
        return read_profile_file(spec)
    # The Fix lists every built-in there is (the registry, not a literal), and the closest one.
    available = builtin_names()
    from difflib import get_close_matches

    closest = get_close_matches(spec, available, n=1)
    return _Layer(), [
        error(
            variable, spec,
            "no built-in profile has this name and no such file exists",
            f"use a built-in profile ({', '.join(available)}"
            + (f"; closest: {closest[0]}" if closest else "") + ") or a path to a .toml file",
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
