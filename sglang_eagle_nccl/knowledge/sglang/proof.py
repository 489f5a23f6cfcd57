"""The proof of one stated behaviour (a manifest's ``relies_on`` entry) on one SGLang source tree.

One checker for the compatibility matrix (``ci/matrix.py``, over every published wheel), the
start-up check and ``doctor`` (over the installed SGLang). What a ✓ means:

- **Definitions, not names.** ``reaches`` / ``precedes`` name one definition: an SGLang function
  or class as ``module:Qualified.name``, or a third-party callable by its dotted import name
  (``torch.distributed.new_group``). The statement holds only when a call on the path resolves,
  through imports, aliases, ``self.`` methods along the class's bases, annotated parameters and
  instance attributes, to exactly that definition. A same-named function elsewhere, or a call that
  cannot be resolved statically, never proves it; the reason names the namesake or the
  unresolved call.
- **Conditions are part of the path.** Every branch, early return, loop guard, ``except``, ``and``
  / ``or`` operand and choice between several callees on the way is a condition (its source text
  and line). A behaviour is proven only where it is reached with no condition, or only with the
  conditions the statement states in ``when``: a test's exact source text (``use_pynccl and
  self.world_size > 1``), or ``--flag`` for a server flag read by the test (``if
  server_args.enable_deterministic_inference:``), which the plugin checks at run time against the
  launch's arguments. Otherwise the reason gives the condition it was found under.
- **Callbacks only where called.** A function passed as an argument counts as called only by a
  process / thread target, an executor, Ray, or an SGLang helper the statement names in
  ``callbacks``; ``atexit``, signal handlers and finalizers are never on the path.
- **Writes** are proven per variable the same way (the write's own conditions and its path's).

Pure: parses nothing itself (a :class:`callgraph.SourceTree` reads the source), imports no SGLang.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl.knowledge.sglang import callgraph
from sglang_eagle_nccl.knowledge.sglang.callgraph import Condition


def normalize_condition(text: str) -> str:
    """The text a condition is compared by: Python's own spelling of the expression (``a  and(b)`` -> ``a and b``)."""
    return ast.unparse(ast.parse(text.strip(), mode="eval").body)


def acceptor(when: Iterable[str]) -> callgraph.Accept:
    """Which conditions a statement accepts: the exact tests it states, and tests reading a ``--flag`` it names."""
    texts, flags = set(), set()
    for item in when:
        if item.startswith("--"):
            flags.add(item[2:].replace("-", "_"))
        else:
            texts.add(normalize_condition(item))

    def accept(condition: Condition) -> bool:
        return condition.text in texts or (condition.flag is not None and condition.flag in flags)

    return accept


@dataclass(frozen=True)
class Proof:
    """A stated behaviour on one source tree: proven (with its path) or not (with the reason)."""

    statement: str
    why: str
    ok: bool
    reason: str = ""
    path: str = ""  # reaches / precedes: target -> ... -> definition
    proofs: tuple[dict[str, Any], ...] = ()  # writes: one per variable proven
    conditions: tuple[str, ...] = ()  # the stated conditions the proof went through, with where
    depth: int = 0
    steps: tuple[str, ...] = ()  # reaches / precedes: the definitions on the path, "module:Qualified.name"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"statement": self.statement, "why": self.why, "ok": self.ok}
        if self.reason:
            out["reason"] = self.reason
        if self.path:
            out["path"] = self.path
        if self.proofs:
            out["proofs"] = list(self.proofs)
        if self.conditions:
            out["conditions"] = list(self.conditions)
        if self.ok:
            out["depth"] = self.depth
        if self.steps:
            out["steps"] = list(self.steps)
        return out


def _path_text(reach: callgraph.Reach, key: str) -> str:
    return " -> ".join(k.split(":", 1)[-1] for k in reach.path_to(key))


def _conditions(conds: Sequence[Condition]) -> tuple[str, ...]:
    out: list[str] = []
    for c in conds:
        if c.where() not in out:
            out.append(c.where())
    return tuple(out)


def _short(name: str) -> str:
    return name.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


@dataclass
class Statement:
    """What :func:`prove` needs of a manifest's ``relies_on`` entry (``patchsets.Reliance`` has these fields)."""

    kind: str
    subject: tuple[str, ...]
    why: str = ""
    start: str | None = None
    when: tuple[str, ...] = ()
    callbacks: tuple[str, ...] = ()
    text: str = field(default="")


def describe(statement: Any) -> str:
    what = f"{statement.kind} {', '.join(statement.subject)}"
    if getattr(statement, "start", None):
        what += f" (from {statement.start})"
    if getattr(statement, "when", ()):
        what += f" when {' and '.join(statement.when)}"
    return what


def prove(tree: callgraph.SourceTree, target: str, statement: Any, *,
          elsewhere: Any = None) -> Proof:
    """Prove ``statement`` (kind, subject, why, start, when) from ``statement.start or target``.

    ``elsewhere(variables)``, when given, lists the writes of those variables anywhere in the package,
    to say where a write that is not reachable went.
    """
    start = statement.start or target
    base = {"statement": describe(statement), "why": statement.why}
    accept = acceptor(getattr(statement, "when", ()))
    if statement.kind == "writes":
        r = callgraph.reach(tree, start, writes=statement.subject, accept=accept)
        if not r.found:
            return Proof(**base, ok=False, reason=f"{start} not found")
        proofs, missing, conds = [], [], []
        for variable in statement.subject:
            hits = r.writes_of(variable)
            if hits:
                write, depth = min(hits, key=lambda h: (len(h[0].conditions), h[1]))
                conds += write.conditions
                proofs.append({"variable": variable, "depth": depth, "at": write.where(),
                               "path": _path_text(r, write.function), "steps": r.path_to(write.function),
                               **({"conditions": list(_conditions(write.conditions))} if write.conditions else {})})
            else:
                missing.append(variable)
        if missing:
            return Proof(**base, ok=False, proofs=tuple(proofs),
                         reason=_why_no_write(tree, start, missing, accept, elsewhere))
        return Proof(**base, ok=True, proofs=tuple(proofs), conditions=_conditions(conds),
                     depth=max(p["depth"] for p in proofs))
    name = statement.subject[0]
    r = callgraph.reach(tree, start, calls=[name], accept=accept)
    if not r.found:
        return Proof(**base, ok=False, reason=f"{start} not found")
    hit = r.reaches(name)
    if hit is None:
        return Proof(**base, ok=False, reason=_why_not_reached(tree, start, name, accept))
    depth, caller, conds = hit
    return Proof(**base, ok=True, depth=depth, path=f"{_path_text(r, caller)} -> {_short(name)}",
                 conditions=_conditions(conds), steps=(*r.path_to(caller), name))


def _unresolved_note(r: callgraph.Reach, name: str | None = None) -> str:
    named = [u for u in r.unresolved if name is not None and u[0].rsplit(".", 1)[-1] == _short(name)]
    if named:
        text, caller, line = named[0]
        return (f"; the call `{text}` in {caller.split(':', 1)[1]} (line {line}) cannot be resolved statically to a "
                "definition, so it proves nothing")
    if r.unresolved:
        return f" ({len(r.unresolved)} call(s) on the way cannot be resolved statically)"
    return ""


def _unstated(conds: Sequence[Condition], accept: callgraph.Accept) -> str:
    return "; ".join(_conditions([c for c in conds if not accept(c)]))


def _why_not_reached(tree: callgraph.SourceTree, start: str, name: str, accept: callgraph.Accept) -> str:
    anywhere = callgraph.reach(tree, start, calls=[name], accept=callgraph._accept_all)
    hit = anywhere.reaches(name)
    if hit is not None:
        depth, caller, conds = hit
        return (f"{name} is reached only under a condition the statement does not state: "
                f"{_unstated(conds, accept)} (path {_path_text(anywhere, caller)} -> {_short(name)})")
    namesakes = [k for k in anywhere.calls if _short(k) == _short(name)]
    if namesakes:
        depth, caller, _ = anywhere.calls[namesakes[0]]
        return (f"{name} is not called from {start}; the call named {_short(name)} in {caller.split(':', 1)[1]} "
                f"resolves to {namesakes[0]}, a namesake, not the stated definition")
    return (f"{name} is not called from {start} within {callgraph.MAX_DEPTH} calls (through SGLang's own calls)"
            + _unresolved_note(anywhere, name))


def _why_no_write(tree: callgraph.SourceTree, start: str, missing: list[str], accept: callgraph.Accept,
                  elsewhere: Any) -> str:
    anywhere = callgraph.reach(tree, start, writes=missing, accept=callgraph._accept_all)
    parts = []
    for variable in missing:
        hits = anywhere.writes_of(variable)
        if hits:
            write, _ = min(hits, key=lambda h: (sum(not accept(c) for c in h[0].conditions), h[1]))
            parts.append(f"{variable} is written at {write.where()} only under a condition the statement does not "
                         f"state: {_unstated(write.conditions, accept)}")
    unconditional = [v for v in missing if not anywhere.writes_of(v)]
    if unconditional:
        found = list(elsewhere(unconditional)) if elsewhere is not None else []
        moved = "; ".join(f"{w.variable} is written at {w.where()}" for w in found) or "SGLang writes it nowhere"
        parts.append(f"no write of {', '.join(unconditional)} reachable from {start} within {callgraph.MAX_DEPTH} "
                     f"calls ({moved})" + _unresolved_note(anywhere))
    return "; ".join(parts)
