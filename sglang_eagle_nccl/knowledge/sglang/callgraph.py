"""A static call graph over SGLang's source: what a hook target reaches, and which NCCL writes it makes.

A hook is only as good as the behaviour it wraps: a method that still exists but no longer does
the work (SGLang 0.5.19 kept ``ServerArgs.__post_init__`` and moved argument resolution, with
deterministic inference's ``NCCL_ALGO`` write, into ``resolve_once``) passes every check by name.
This module answers, from source alone (parsed with :mod:`ast`, never imported), the two
questions a manifest's ``relies_on`` statements ask of a target:

- which ``os.environ`` writes happen inside the call (``os.environ[K] = v``, ``del
  os.environ[K]``, ``os.environ.setdefault/pop/update/__setitem__``, ``os.putenv/unsetenv``,
  ``environ`` imported from :mod:`os`, SGLang's ``envs.NAME.set/override/clear`` fields, and any
  SGLang function that writes the variable named by one of its own parameters, called with a
  constant name: an env helper is found by what it does, not by a list of names);
- which functions and classes it reaches (to prove order: a ``before`` hook on a call that
  reaches ``init_distributed_environment`` runs before the scheduler's communicators exist).

Name resolution (what a call reaches) is :mod:`.callgraph_names`; the conditions under which each
call and write runs are :mod:`.callgraph_conditions`; this module is the graph over them.

How deep: :data:`MAX_DEPTH` calls from the target. The deepest statement any published release
needs is ``Scheduler.__init__`` -> ``init_distributed_environment`` in 0.5.16-0.5.20:
``init_model_worker`` -> ``init_tp_model_worker`` -> ``TpModelWorker.__init__`` ->
``_init_model_runner`` -> ``ModelRunner.__init__`` -> ``init_torch_distributed`` ->
``bootstrap.init_torch_distributed`` -> ``_init_parallel_groups`` -> ``init_distributed_environment``:
9 calls (``ci/matrix.py`` prints the deepest proof of each run; ``--json`` has each one's
``depth``). The bound leaves 3 calls of room for SGLang's next refactor, while a search that fails
(and so explores everything within the bound: a model runner reaches much of SGLang, ~800
functions in 0.5.20) stays at a few seconds per target.

Cost: parsing dominates (``ast.parse`` of the modules a search touches, ~200 per release for the
scheduler's search); a :class:`SourceTree` parses each module once, and ``ci/matrix.py`` reuses
the parsed modules of byte-identical files from the previous release.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sglang_eagle_nccl.knowledge.sglang import callgraph_conditions
from sglang_eagle_nccl.knowledge.sglang.callgraph_names import (  # noqa: F401 - the graph's public names
    PACKAGE,
    ClassInfo,
    Condition,
    EnvWrite,
    Function,
    Module,
    Reader,
    SourceTree,
    _absolute,
    _distinct,
    _string,
)

MAX_DEPTH = 12


# --- reachability -----------------------------------------------------------------------------------


Accept = Callable[[Condition], bool]


def _accept_none(condition: Condition) -> bool:
    return False


def _accept_all(condition: Condition) -> bool:
    return True


@dataclass
class Reach:
    """Everything reachable from one target within ``depth`` calls, and under which conditions."""

    target: str
    found: bool  # the target itself exists
    depth: int
    # function key -> (depth, parent key, conditions on the path from the target)
    functions: dict[str, tuple[int, str | None, tuple[Condition, ...]]] = field(default_factory=dict)
    # definition reached -> (depth, caller key, conditions): a function or class "module:Qual", or a
    # third-party dotted name resolved through imports ("torch.distributed.new_group")
    calls: dict[str, tuple[int, str, tuple[Condition, ...]]] = field(default_factory=dict)
    writes: list[tuple[EnvWrite, int]] = field(default_factory=list)  # (write with path conditions, depth)
    where: dict[str, tuple[str, int]] = field(default_factory=dict)  # function key -> (file, line of def)
    unresolved: list[tuple[str, str, int]] = field(default_factory=list)  # (call as written, caller key, line)

    def path_to(self, key: str) -> list[str]:
        """The chain of functions from the target to ``key``."""
        chain = []
        current: str | None = key
        while current is not None and len(chain) < 64:
            chain.append(current)
            current = self.functions.get(current, (0, None, ()))[1]
        return list(reversed(chain))

    def writes_of(self, variable: str) -> list[tuple[EnvWrite, int]]:
        return [(w, d) for w, d in self.writes if w.variable == variable]

    def reaches(self, name: str) -> tuple[int, str, tuple[Condition, ...]] | None:
        """(depth, caller, conditions) of the first call of exactly the definition ``name``, or None."""
        return self.calls.get(name)


def reach(tree: SourceTree, target: str, depth: int = MAX_DEPTH, *, writes: Iterable[str] = (),
          calls: Iterable[str] = (), accept: Accept = _accept_none) -> Reach:
    """Breadth first from ``target`` through SGLang's resolved calls, at most ``depth`` calls deep.

    Only paths whose every condition ``accept`` accepts are followed (by default: unconditional
    paths only; ``accept=lambda c: True`` follows every path, to say under which condition a
    behaviour happens). A call whose callee may be several definitions (``W = A if c else B;
    W()``, an attribute assigned two classes) is a condition too: which one runs is decided at
    run time. With ``writes`` / ``calls`` the search stops as soon as each named variable has a
    write and each named definition a call; without, it explores everything within the bound.
    """
    start = tree.function(target)
    result = Reach(target, start is not None, depth)
    if start is None:
        return result
    want_writes, want_calls = set(writes), set(calls)
    result.functions[start.key] = (0, None, ())
    queue: deque[tuple[Function, int, tuple[Condition, ...]]] = deque([(start, 0, ())])
    seen = {id(start.node)}

    def ok(conds: tuple[Condition, ...]) -> bool:
        return all(accept(c) for c in conds)

    def add_write(write: EnvWrite, level: int, path: tuple[Condition, ...]) -> None:
        full = (*path, *write.conditions)
        if ok(full):
            result.writes.append((EnvWrite(write.variable, write.how, write.file, write.line, write.function, full),
                                  level))

    def done() -> bool:
        if not want_writes and not want_calls:
            return False
        have = {w.variable for w, _ in result.writes}
        return want_writes <= have and want_calls <= set(result.calls)

    while queue and not done():
        fn, level, path = queue.popleft()
        result.where.setdefault(fn.key, (fn.module.path, fn.node.lineno))
        summary = callgraph_conditions.summary(tree, fn)
        for w in summary.writes:
            add_write(w, level, path)
        if level >= depth:
            continue
        for edge in summary.calls:
            callees = _distinct(edge.callees)
            conds = (*path, *edge.conditions)
            if not callees:
                if ok(conds):
                    result.unresolved.append((edge.text, fn.key, edge.line))
                continue
            for callee in callees:
                if len(callees) > 1:
                    # Which of several definitions runs is decided at run time: each is a condition of its own,
                    # written as the choice (``TpWorkerClass is TpModelWorker``).
                    chosen = callee.qualname if isinstance(callee, (Function, ClassInfo)) else str(callee)
                    choice = Condition(f"{edge.text} is {chosen}", fn.module.path, edge.line)
                    conds_here = (*path, *edge.conditions, choice)
                else:
                    conds_here = conds
                if not ok(conds_here):
                    continue
                conds = conds_here
                targets: list[Function] = []
                if isinstance(callee, Function):
                    targets = [callee]
                elif isinstance(callee, ClassInfo):
                    result.calls.setdefault(callee.key, (level + 1, fn.key, conds))
                    targets = tree.constructors(callee)
                elif isinstance(callee, str):
                    result.calls.setdefault(callee, (level + 1, fn.key, conds))
                    continue
                for t in targets:
                    if edge.call is not None:
                        for w in _helper_writes(tree, t, edge.call, fn):
                            add_write(w, level + 1, conds)
                    result.calls.setdefault(t.key, (level + 1, fn.key, conds))
                    if id(t.node) in seen:
                        continue
                    seen.add(id(t.node))
                    result.functions.setdefault(t.key, (level + 1, fn.key, conds))
                    queue.append((t, level + 1, conds))
    return result


def _helper_writes(tree: SourceTree, callee: Function, call: ast.Call, caller: Function) -> list[EnvWrite]:
    """Writes an env helper makes for this call: ``set_env("NCCL_X", v)`` writes NCCL_X (under the helper's conditions)."""
    summary = callgraph_conditions.summary(tree, callee)
    out = []
    is_method = callee.cls is not None and callee.node.args.args and callee.node.args.args[0].arg in ("self", "cls")
    for index, name, _how, conds in summary.param_writes:
        position = index - (1 if is_method else 0)
        value = None
        if 0 <= position < len(call.args):
            value = _string(call.args[position])
        for kw in call.keywords:
            if kw.arg == name:
                value = _string(kw.value)
        out.append(EnvWrite(value or "?", f"helper:{callee.qualname}", caller.module.path, call.lineno, caller.key,
                            conds))
    return out


def writes_in_module(tree: SourceTree, module_name: str, variables: Iterable[str]) -> list[EnvWrite]:
    """Every write of ``variables`` made by a function or method defined in one module (nested ones too)."""
    module = tree.module(module_name)
    if module is None:
        return []
    wanted = set(variables)
    out: list[EnvWrite] = []

    def visit(body: list[ast.stmt], prefix: str, cls: ClassInfo | None) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.", ClassInfo(module, f"{prefix}{node.name}", node))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fn = Function(module, f"{prefix}{node.name}", node, cls)
                out.extend(w for w in callgraph_conditions.summary(tree, fn).writes if w.variable in wanted)
                visit(node.body, f"{prefix}{node.name}.<locals>.", cls)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in (getattr(node, "body", []), getattr(node, "orelse", []), getattr(node, "finalbody", []),
                              *(h.body for h in getattr(node, "handlers", []))):
                    visit(block, prefix, cls)

    visit(module.tree.body, "", None)
    return out
