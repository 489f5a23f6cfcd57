"""`tuner`: what the shipped tuner plugin itself answers for a collective call under a profile's rules.

The answer comes from the compiled library (the exported ``ncclTunerPlugin_v<abi>``, called the way
NCCL calls it), not from a Python model of it, so it is what NCCL would be told.
"""

from __future__ import annotations

import re
from typing import Any

import click

from sglang_eagle_nccl.cli.common import emit_json, fail_input, profile_options, resolve_or_exit
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import SIZE_T_MAX

# At most 20 ASCII digits (a 64-bit size_t has 20): int() never sees a number long enough to be
# slow or to pass Python's 4300-digit limit (a traceback, not a message).
_SIZE = re.compile(r"^\s*([0-9]{1,20})\s*(|k|ki|kib|m|mi|mib|g|gi|gib|b)\s*$", re.IGNORECASE)
_POWER = {"": 0, "b": 0, "k": 1, "ki": 1, "kib": 1, "m": 2, "mi": 2, "mib": 2, "g": 3, "gi": 3, "gib": 3}


def parse_size(text: str) -> int | None:
    """``14336``, ``64KiB``, ``16M`` (binary multiples) -> bytes; None when unreadable."""
    m = _SIZE.match(text)
    if not m:
        return None
    return int(m.group(1)) * 1024 ** _POWER[m.group(2).lower()]


def rules_from_file(path: str, *, as_json: bool = False) -> tuple[list[Any], list[Any]]:
    """``[[tuner.rules]]`` of a TOML file -> (rules, findings); input errors exit 2, naming the file.

    Read like a profile: a regular file only (a FIFO or a device is refused at once, never waited
    on or read without end), at most a profile's size, and parsed by the same bounded TOML reader.
    """
    from sglang_eagle_nccl.contract.files import UnreadableFile, read_regular_file
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import parse_rules
    from sglang_eagle_nccl.profile.sources import MAX_PROFILE_BYTES, parse_toml_document

    try:
        text = read_regular_file(path, MAX_PROFILE_BYTES, follow_symlinks=True).decode("utf-8")
    except UnreadableFile as exc:
        fail_input(f"--rules {path}: cannot read it: {exc.reason}. Fix: give a readable TOML file", as_json=as_json)
    except UnicodeDecodeError as exc:
        fail_input(f"--rules {path}: not UTF-8 text (byte {exc.start}). Fix: save it as UTF-8 TOML", as_json=as_json)
    data, problems = parse_toml_document(text, f"--rules {path}", what="rules file")
    if data is None:
        fail_input(problems[0].message(), as_json=as_json, findings=problems)
    raw = data.get("tuner", {}).get("rules") if isinstance(data.get("tuner"), dict) else None
    if raw is None:
        fail_input(f"--rules {path}: no [[tuner.rules]] in it. Fix: add at least one [[tuner.rules]] block", as_json=as_json)
    return parse_rules(raw, f"rules:{path}")


def _profile_rules(profile: Any) -> list[Any]:
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import rule_from_dict

    return [rule_from_dict(r, f"profile {profile.name}") for r in profile.tuner_rules]


@click.command("tuner")
@profile_options
@click.option("--rules", "rules_file", default=None, type=click.Path(dir_okay=False), help="TOML file with [[tuner.rules]] (replaces the profile's rules).")
@click.option("--collective", default="allreduce", show_default=True, help="broadcast, reduce, allgather, reducescatter or allreduce.")
@click.option("--bytes", "size", default=None, metavar="N", help="NCCL's nBytes of the call, e.g. 14336 or 64KiB.")
@click.option("--nranks", "--tp", "nranks", type=click.IntRange(min=1, max=SIZE_T_MAX), default=None, help="Communicator size (the TP size for SGLang's tp group).")
@click.option("--model-config", default=None, metavar="PATH", help="Instead of --bytes: the model's config.json; shows the all-reduce bytes of decode, EAGLE verify and a prefill chunk, the path SGLang gives each, and the tuner's answer for each.")
@click.option("--batch-size", type=click.IntRange(min=1), default=1, show_default=True, help="With --model-config: running requests per step.")
@click.option("--speculative-num-draft-tokens", type=int, default=None, help="With --model-config: SGLang's --speculative-num-draft-tokens.")
@click.option("--speculative-eagle-topk", type=int, default=None, help="With --model-config: SGLang's --speculative-eagle-topk.")
@click.option("--chunked-prefill-size", type=int, default=None, help="With --model-config: SGLang's --chunked-prefill-size.")
@click.option("--sglang-version", default=None, metavar="VERSION", help="With --model-config: predict paths for this SGLang release (default: the installed one).")
@click.option("--nnodes", type=click.IntRange(min=1, max=SIZE_T_MAX), default=1, show_default=True, help="Nodes in the communicator.")
@click.option("--group", default=None, help="SGLang group label selected when the communicator was created (e.g. tp).")
@click.option("--abi", type=click.IntRange(2, 6), default=6, show_default=True, help="Tuner ABI to ask (v6: NCCL 2.30+, v5: 2.28, v4: 2.24, v3: 2.22, v2: 2.21).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def tuner_cmd(
    profiles: tuple[str, ...], nccl_env: tuple[str, ...], allow_unknown: bool | None, rules_file: str | None,
    collective: str, size: str | None, nranks: int | None, model_config: str | None, batch_size: int,
    speculative_num_draft_tokens: int | None, speculative_eagle_topk: int | None, chunked_prefill_size: int | None,
    sglang_version: str | None, nnodes: int, group: str | None, abi: int, as_json: bool,
) -> None:
    """Ask the shipped tuner plugin which algorithm/protocol it picks for a collective call.

    \b
      sglang-eagle-nccl tuner --profile pcie-8gpu-eagle --bytes 14336 --nranks 8 --group tp
      sglang-eagle-nccl tuner --profile pcie-8gpu-eagle --model-config M/config.json --tp 8 \\
          --batch-size 8 --speculative-num-draft-tokens 4 --chunked-prefill-size 8192

    The answer comes from the compiled library NCCL loads (called the way NCCL calls it). Exit 2
    when the input is bad or the native library is not available (the message says why).
    """
    from sglang_eagle_nccl.contract.findings import ProfileError
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import (
        COLLECTIVES,
        check_rules,
        rule_label,
        rules_digest,
    )
    from sglang_eagle_nccl.native import library

    if (size is None) == (model_config is None):
        fail_input("give either --bytes N (one call) or --model-config PATH (the sizes of a model). "
                   "Fix: e.g. --bytes 14336 --nranks 8", as_json=as_json)
    if nranks is None:
        fail_input("--nranks (or --tp) is required: the communicator size. Fix: e.g. --nranks 8", as_json=as_json)
    nbytes = parse_size(size) if size is not None else 0
    if nbytes is None:
        from sglang_eagle_nccl.contract.findings import shown_value

        fail_input(f"--bytes {shown_value(size or '')}: not a size. Fix: give a byte count such as 14336 or 64KiB",
                   as_json=as_json)
    if nbytes > SIZE_T_MAX:
        # NCCL passes nBytes as size_t: a larger call cannot happen, and C would see it wrapped.
        fail_input(f"--bytes {nbytes}: larger than NCCL's size_t ({SIZE_T_MAX}), so NCCL can never ask it. "
                   "Fix: give a byte count NCCL can pass", as_json=as_json)
    name = next((c for c in COLLECTIVES if c.lower() == collective.lower()), None)
    if name is None:
        fail_input(f"--collective {collective!r}: unknown collective. Fix: use one of {', '.join(COLLECTIVES)}", as_json=as_json)
    profile = resolve_or_exit(profiles, nccl_env, as_json=as_json, allow_unknown=allow_unknown).profile
    from sglang_eagle_nccl.decision.plan import process_env

    env = process_env(profile.to_dict(), None)
    if rules_file:
        rules, findings = rules_from_file(rules_file, as_json=as_json)
    else:
        rules, findings = _profile_rules(profile), []
    findings += check_rules(rules, env.get("NCCL_PROTO"), env.get("NCCL_ALGO"))
    if any(f.severity == "error" for f in findings):
        err = ProfileError(findings)
        fail_input(str(err), as_json=as_json, findings=err.findings)
    if model_config is not None:
        _model_sizes(rules, abi, model_config, nranks=nranks, nnodes=nnodes, group=group or "tp",
                     batch_size=batch_size, num_draft_tokens=speculative_num_draft_tokens,
                     eagle_topk=speculative_eagle_topk, chunked_prefill_size=chunked_prefill_size,
                     sglang_version=sglang_version, as_json=as_json)
        return
    try:
        result = library.query_rules(rules, abi, name, nbytes, nranks, nnodes, group)
    except library.NativeUnavailable as exc:
        fail_input(f"the native tuner plugin is not available: {exc}", as_json=as_json)
    warnings = [f for f in findings if f.severity == "warning"]
    if as_json:
        emit_json({
            "ok": True, "query": result.to_dict(), "library": str(library.library_path()),
            "rules": [{"label": rule_label(i), "rule": r.describe()} for i, r in enumerate(rules)],
            "rules_digest": rules_digest(rules), "warnings": [w.to_dict() for w in warnings],
        })
        return
    for w in warnings:
        click.echo(f"warning: {w.message()}", err=True)
    if rules:
        click.echo(f"Tuner rules ({len(rules)}, digest {rules_digest(rules)[:12]}; first match wins):")
        for i, r in enumerate(rules):
            click.echo(f"  {rule_label(i):<16} {r.describe()}")
    else:
        click.echo("No tuner rules (give --rules FILE.toml): the tuner leaves every choice to NCCL.")
    where = f"{nranks} rank(s), {nnodes} node(s)" + (f", group {group}" if group else ", no group label")
    click.echo(f"Query: {name} of {nbytes} bytes, {where}, tuner ABI v{abi} (NCCL {library.TUNER_ABI_SINCE[abi]}+)")
    click.echo(f"Answer of {library.library_path().name} {result.library_version}: {result.describe()}")


def _model_sizes(rules: list[Any], abi: int, model_config: str, *, nranks: int, nnodes: int, group: str,
                 batch_size: int, num_draft_tokens: int | None, eagle_topk: int | None,
                 chunked_prefill_size: int | None, sglang_version: str | None, as_json: bool) -> None:
    """The all-reduces of a model's decode / EAGLE / prefill steps, their path, and the tuner's answer."""
    from sglang_eagle_nccl.contract.versions import installed_sglang_version
    from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import fmt_bytes
    from sglang_eagle_nccl.native import library
    from sglang_eagle_nccl.offline.sizes.render import format_size_report
    from sglang_eagle_nccl.offline.sizes.report import size_report
    from sglang_eagle_nccl.offline.sizes.shape import SizesError

    installed = sglang_version if sglang_version is not None else installed_sglang_version()
    try:
        report = size_report(model_config, batch_size=batch_size, tp_size=nranks, num_draft_tokens=num_draft_tokens,
                             eagle_topk=eagle_topk, chunked_prefill_size=chunked_prefill_size, sglang_version=installed,
                             flags={"nnodes": nnodes})
    except SizesError as exc:
        fail_input(str(exc), as_json=as_json, findings=exc.findings)
    answers = []
    try:
        for phase in report["phases"]:
            result = library.query_rules(rules, abi, "AllReduce", phase["bytes"], nranks, nnodes, group)
            answers.append({"phase": phase["label"], "bytes": phase["bytes"], "tuner": result.to_dict(),
                            "answer": result.describe()})
    except library.NativeUnavailable as exc:
        fail_input(f"the native tuner plugin is not available: {exc}", as_json=as_json)
    if as_json:
        emit_json({"ok": True, "sizes": report, "tuner": answers, "group": group})
        return
    click.echo(format_size_report(report))
    click.echo("")
    click.echo(f"Tuner plugin's answer for each all-reduce (group label {group}, {nranks} rank(s), {nnodes} node(s); "
               "it matters only where the path above reaches NCCL):")
    width = max(len(a["phase"]) for a in answers)
    for a in answers:
        click.echo(f"  {a['phase']:<{width}}  {fmt_bytes(a['bytes']):>10}  {a['answer']}")
