"""Resolving a profile from every source, in precedence order, and validating it.

Precedence, lowest first (later sources override earlier ones, variable by variable):

1. profiles named with ``--profile`` / ``--nccl-profile`` / ``SGLANG_EAGLE_NCCL`` -- a built-in
   name (``sglang-eagle-nccl profiles list``) or a TOML file; several are layered in order;
2. the plugin's own environment variables (``SGLANG_EAGLE_NCCL_ENV`` and the policy variables
   in :data:`~sglang_eagle_nccl.profile.policy.POLICY_ENV`);
3. ``--nccl-env KEY=VALUE`` flags and policy flags.

Every source is checked before anything is applied; all problems are reported together
(:class:`~sglang_eagle_nccl.contract.findings.ProfileError`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.contract.findings import Finding, ProfileError, error, warning
from sglang_eagle_nccl.contract.handoff import Decoded
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import rule_to_dict
from sglang_eagle_nccl.profile.model import KNOWN_GROUPS, Profile
from sglang_eagle_nccl.profile.policy import policy_from_environ, policy_from_mapping
from sglang_eagle_nccl.profile.sources import _Layer, load_spec, parse_env_flags, split_env_string


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
    environ = os.environ if environ is None else environ
    findings: list[Finding] = []
    merged = _Layer()
    layer_names: list[str] = []
    spec_list = list(specs)
    if not spec_list and use_environ:
        gate_value = environ.get(names.ENV_ENABLE, "").strip()
        if gate_value and gate_value.lower() not in names.ENABLE_WORDS:
            spec_list = [gate_value]
    from_gate = not specs
    for spec in spec_list:
        layer, f = load_spec(spec, names.ENV_ENABLE) if from_gate else load_spec(spec)
        findings += f
        merged.merge(layer)
        layer_names.append(spec)
    sources = [f"profile:{s}" for s in spec_list]

    if use_environ:
        env_text = environ.get(names.ENV_ENV, "")
        if env_text.strip():
            env_env, f = parse_env_flags(split_env_string(env_text), names.ENV_ENV)
            findings += f
            merged.env.update(env_env)
            merged.origin.update({f"env:{k}": names.ENV_ENV for k in env_env})
            merged.wrote(f"env:{k}" for k in env_env)
            sources.append(names.ENV_ENV)
        env_policy = policy_from_environ(environ)
        if env_policy:
            merged.policy.update(env_policy)
            sources.append("plugin environment variables")
    flag_env, f = parse_env_flags(env_flags, "--nccl-env")
    findings += f
    merged.env.update(flag_env)
    merged.origin.update({f"env:{k}": "--nccl-env" for k in flag_env})
    merged.wrote(f"env:{k}" for k in flag_env)
    if env_flags:
        sources.append("--nccl-env")
        layer_names.append("flags")
    if policy_flags:
        merged.policy.update({k: v for k, v in policy_flags.items() if v is not None})

    return validate_layer(
        merged,
        name="+".join(layer_names) if layer_names else "(environment)",
        sources=sources,
        findings=findings,
    )


def validate_layer(
    merged: _Layer, *, name: str, sources: Sequence[str], findings: Sequence[Finding] = (), policy_source: str = "policy"
) -> Resolution:
    """Every value rule a profile must pass, on a merged layer; raise ProfileError listing all errors.

    :func:`resolve` and the wire decoder (:func:`validate_data`) both end here, so a profile read
    back from the environment is held to exactly the rules of one resolved from files and flags.
    """
    from sglang_eagle_nccl.knowledge.nccl import variables as nccl_vars

    findings = list(findings)
    policy, f = policy_from_mapping(merged.policy, policy_source)
    findings += f
    from packaging.version import Version

    nccl_version = Version(policy.nccl_version) if policy.nccl_version else None

    # The problems of each value, listed at the end in the order the user wrote the values
    # (merged.order: sources in precedence order, a file in its own order), not the order of the
    # tables a profile extends.
    per_value: list[tuple[str, Finding]] = []

    def check_pairs(pairs: Mapping[str, str], where: str, origin_prefix: str) -> None:
        for k, v in pairs.items():
            src = merged.origin.get(f"{origin_prefix}:{k}", where)
            per_value.extend(
                (f"{origin_prefix}:{k}", x.with_source(src))
                for x in nccl_vars.check(k, v, allow_unknown=policy.allow_unknown, nccl_version=nccl_version)
            )

    check_pairs(merged.env, "env", "env")
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import GROUP_LABEL_CHARS, is_group_label

    for gname, genv in merged.groups.items():
        if not is_group_label(gname):
            # Refused here, not by the native library at activation: a label that cannot be one (a NUL,
            # a control character, a space) is a profile problem every command names the same way.
            shown = gname if gname.isprintable() else gname.encode("unicode_escape").decode("ascii")
            first = next((f"groups.{gname}:{k}" for k in genv), f"groups.{gname}")
            per_value.append((first, error(
                f"groups.{shown[:80]}", None,
                f"a group label is {GROUP_LABEL_CHARS} (SGLang's group names; the native library takes it as a C string)",
                "name the section after an SGLang group, e.g. [groups.tp.env]",
            ).with_source(merged.origin.get(first))))
            continue
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
                per_value.append((f"groups.{gname}:{k}",
                    error(
                        k, v, f"[groups.{gname}.env]: {why}",
                        f"move {k} to [env] (same value in every group); only per-communicator variables "
                        f"({', '.join(sorted(n for n, s in nccl_vars.table().items() if s.per_communicator))}) "
                        "may differ per group",
                    ).with_source(merged.origin.get(f"groups.{gname}:{k}"))
                ))
    for nrank, nenv in merged.nodes.items():
        check_pairs(nenv, f"nodes.{nrank}.env", f"nodes.{nrank}")
        for k, v in nenv.items():
            if nccl_vars.is_allowed_name(k) and nccl_vars.rank_rule(k) == "must_match":
                per_value.append((f"nodes.{nrank}:{k}",
                    error(
                        k, v,
                        f"[nodes.{nrank}.env]: every rank of a communicator must hold the same {k}; a per-node "
                        "value would make nodes disagree (NCCL never checks: hang or silent corruption)",
                        f"move {k} to [env]; per-node sections are for node-local variables such as "
                        "NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_TOPO_FILE",
                    ).with_source(merged.origin.get(f"nodes.{nrank}:{k}"))
                ))
    written = {key: i for i, key in enumerate(merged.order)}
    # Stable: one value's own problems keep their order; a value no source wrote (none today) goes last.
    per_value.sort(key=lambda kf: written.get(kf[0], len(written)))
    findings += [f for _, f in per_value]
    for kept in policy.sglang_wins:
        if kept not in merged.env:
            findings.append(
                warning(
                    "policy.sglang_wins", kept,
                    "the profile does not set this variable, so there is nothing for SGLang to win against",
                    "remove it from sglang_wins or set it in [env]",
                )
            )

    rules = _check_tuner_rules(merged, findings)
    for owned in ("NCCL_ENV_PLUGIN", "NCCL_TUNER_PLUGIN"):
        if owned in merged.env and (owned == "NCCL_ENV_PLUGIN" or rules):
            findings.append(
                error(
                    owned, merged.env[owned],
                    "sglang-eagle-nccl sets this itself, in every process, to its own native plugin "
                    + ("(it serves the profile to NCCL and records what NCCL read)" if owned == "NCCL_ENV_PLUGIN"
                       else "(the profile's [[tuner.rules]] run in it)"),
                    f"remove {owned} from the profile" + ("" if owned == "NCCL_ENV_PLUGIN" else " or drop its [[tuner.rules]]"),
                ).with_source(merged.origin.get(f"env:{owned}"))
            )

    errors = [x for x in findings if x.severity == "error"]
    if errors:
        raise ProfileError(findings)
    profile = Profile(
        name=name,
        env=tuple(sorted(merged.env.items())),
        groups=tuple(sorted((g, tuple(sorted(e.items()))) for g, e in merged.groups.items() if e)),
        nodes=tuple(sorted((n, tuple(sorted(e.items()))) for n, e in merged.nodes.items() if e)),
        policy=policy,
        sources=tuple(sources),
        description=merged.description,
        tuner_rules=tuple(rule_to_dict(r) for r in rules),
    )
    return Resolution(profile, tuple(x for x in findings if x.severity == "warning"))


def _check_tuner_rules(merged: _Layer, findings: list[Finding]) -> list[Any]:
    """Parse and check the ``[[tuner.rules]]`` of a merged layer (against the profile's own
    NCCL_PROTO / NCCL_ALGO, and each group's where a rule names a group that overrides them)."""
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import ShadowBudget, check_rules, parse_rules

    rules: list[Any] = []
    for raw, source in merged.tuner_rules:
        parsed, f = parse_rules([raw], source)
        rules += parsed
        findings += f
    if len(rules) != len(merged.tuner_rules):
        return rules
    env = merged.env
    budget = ShadowBudget()  # one bound for the whole profile, group re-checks included
    findings += check_rules(rules, env.get("NCCL_PROTO"), env.get("NCCL_ALGO"), budget)
    for group, genv in merged.groups.items():
        mine = [r for r in rules if r.group == group]
        if mine and ("NCCL_PROTO" in genv or "NCCL_ALGO" in genv):
            findings += [
                f for f in check_rules(mine, genv.get("NCCL_PROTO", env.get("NCCL_PROTO")),
                                       genv.get("NCCL_ALGO", env.get("NCCL_ALGO")), budget)
                if f.severity == "error"
            ]
    return rules


def validate_data(data: Mapping[str, Any], *, source: str) -> Profile:
    """A profile read back as plain data (``Profile.to_dict()`` shape), held to every rule of resolve().

    Used for a serialised profile that no validating process provably wrote. Node keys must be
    ASCII decimal node ranks; everything else is checked by :func:`validate_layer`.
    """
    layer = _Layer()
    layer.env = dict(data.get("env", {}))
    layer.groups = {str(g): dict(e) for g, e in data.get("groups", {}).items()}
    bad_nodes = [str(n) for n in data.get("nodes", {}) if not (str(n).isascii() and str(n).isdigit())]
    if bad_nodes:
        raise ProfileError([
            error(f"nodes.{n}", None, "node sections are keyed by node rank (0, 1, ...)", "write [nodes.0.env]").with_source(source)
            for n in bad_nodes
        ])
    layer.nodes = {int(n): dict(e) for n, e in data.get("nodes", {}).items()}
    layer.policy = dict(data.get("policy", {}))
    rules = data.get("tuner_rules", [])
    layer.tuner_rules = [(r, source) for r in rules] if isinstance(rules, list) else [(rules, source)]
    description = data.get("description", "")
    layer.description = description if isinstance(description, str) else ""
    for prefix, pairs in (("env", layer.env), *((f"groups.{g}", e) for g, e in layer.groups.items()),
                          *((f"nodes.{n}", e) for n, e in layer.nodes.items())):
        layer.origin.update({f"{prefix}:{k}": source for k in pairs})
    sources = data.get("sources", [])
    return validate_layer(
        layer,
        name=str(data.get("name", "(serialised)")),
        sources=[str(x) for x in sources] if isinstance(sources, list) else [],
        policy_source=source,
    ).profile


def decode_handoff(text: str, environ: Mapping[str, str] | None = None, *, check_inputs: bool = True) -> Decoded:
    """The serialised profile in ``text`` (``SGLANG_EAGLE_NCCL_PROFILE``), re-validated when unsigned.

    The one decoder (:func:`sglang_eagle_nccl.contract.handoff.decode`) with this module's checks.
    """
    from sglang_eagle_nccl.contract import handoff

    return handoff.decode(text, environ, check_inputs=check_inputs,
                          validate=lambda data: validate_data(data, source=names.ENV_PROFILE))
