"""The conditions walker of the static call graph (:mod:`.callgraph`): one function's calls and writes, each with when it runs.

Conditions (:class:`_Walker` states the rules): every call and write carries the conditions under
which it runs (``if`` tests, early returns, ``while``, ``except``, ``match``, ``and`` / ``or``
operands, conditional expressions), with source text and line; a branch that never runs (``if
False:``, ``if TYPE_CHECKING:``, a loop over a literal empty collection) is not walked; what both
branches of an ``if`` do is unconditional. A callee that may be one of several definitions is a
condition of its own (``TpWorkerClass is TpModelWorker``). :func:`reach` follows only the paths
whose conditions its ``accept`` accepts (by default none). A function passed as an argument is
followed only for APIs that call it (:data:`CALLBACK_APIS`: process and thread targets,
executors, Ray) and for SGLang helpers a manifest names; ``atexit``, signal handlers and
finalizers are never followed. :mod:`~sglang_eagle_nccl.knowledge.sglang.proof` turns this into
the verdict on a manifest's statement.
"""

from __future__ import annotations

import ast
import re

from sglang_eagle_nccl.knowledge.sglang.callgraph_names import (
    ClassInfo,
    Condition,
    EnvWrite,
    Function,
    SourceTree,
    _collect_imports,
    _distinct,
    _Edge,
    _last_name,
    _statements,
    _string,
    _Summary,
)

# The methods of ``os.environ`` that change it, and what each does with its first argument.
_ENVIRON_WRITERS = {"setdefault": "setdefault", "pop": "pop", "__setitem__": "assign", "__delitem__": "del"}
# SGLang's typed environment fields (``sglang.srt.environ``, ``envs.NAME.set(v)``) write ``NAME``.
_ENV_FIELD_WRITERS = ("set", "override", "clear")


def summary(tree: SourceTree, fn: Function) -> _Summary:
    """The calls and environment writes of one function's own body, each with its conditions (memoised)."""
    cached = tree._summaries.get(id(fn.node))
    if cached is not None:
        return cached
    summary = _Summary()
    _collect_imports(fn.node.body, fn.module.package, summary.imports)
    tree._summaries[id(fn.node)] = summary
    params = [a.arg for a in (*fn.node.args.posonlyargs, *fn.node.args.args, *fn.node.args.kwonlyargs)]
    local: dict[str, list[ast.expr]] = {}
    nested: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = {}
    for node in _statements(fn.node.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            local.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            nested[node.name] = node
    _Walker(tree, fn, summary, local, nested, params).block(fn.node.body, ())
    return summary


def _negate(test: ast.expr) -> ast.expr:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    return ast.copy_location(ast.UnaryOp(op=ast.Not(), operand=test), test)


def _constant(test: ast.expr) -> bool | None:
    """The truth of a test known without running it (``if False:``, ``if TYPE_CHECKING:``), else None."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if _last_name(test) == "TYPE_CHECKING":
        return False  # typing.TYPE_CHECKING is False at run time
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _constant(test.operand)
        return None if inner is None else not inner
    return None


def _empty_iterable(it: ast.expr) -> bool:
    """A loop over nothing: a literal empty collection or ``range(0)``."""
    if isinstance(it, (ast.List, ast.Tuple, ast.Set)) and not it.elts:
        return True
    if isinstance(it, ast.Dict) and not it.keys:
        return True
    if isinstance(it, ast.Constant) and it.value in ("", b""):
        return True
    return (isinstance(it, ast.Call) and _last_name(it.func) == "range" and len(it.args) == 1
            and isinstance(it.args[0], ast.Constant) and it.args[0].value == 0)


# Library APIs that call a function they are given (process and thread targets, executors, Ray): a
# function passed to any other call is an argument, not a call. atexit.register, signal.signal and
# weakref.finalize are deliberately absent: what they register does not run on the launch's path.
CALLBACK_APIS = {
    "multiprocessing": {"Process", "Pool.apply", "Pool.apply_async", "Pool.map", "Pool.starmap"},
    "torch": {"multiprocessing.Process", "multiprocessing.spawn", "multiprocessing.start_processes"},
    "threading": {"Thread", "Timer"},
    "concurrent": {"futures.ThreadPoolExecutor.submit", "futures.ProcessPoolExecutor.submit",
                   "futures.ThreadPoolExecutor.map", "futures.ProcessPoolExecutor.map"},
    "ray": {"remote"},
}


def _calls_its_arguments(name: str) -> bool:
    """``multiprocessing.Process`` / ``multiprocessing.get_context().Process`` / ``ray.remote``: a callback API."""
    root, _, rest = name.partition(".")
    rest = re.sub(r"[A-Za-z_][A-Za-z0-9_]*\(\)\.", "", rest)  # get_context().Process -> Process
    if root == "asyncio" and rest.endswith("run_in_executor"):
        return True
    return rest in CALLBACK_APIS.get(root, ())


class _Walker:
    """One function's statements in order, with the conditions under which each runs.

    Rules (each a condition on what follows, never a guess): an ``if`` puts its test on its body
    and the negated test on its ``else``; a test known without running it (``if False:``, ``if
    TYPE_CHECKING:``) drops the branch that never runs; after ``if c: return`` (or ``continue`` /
    ``break``) the rest of the block runs only under ``not c``, while ``if c: raise`` adds nothing
    (a launch that raises has no path to prove); ``while c`` puts ``c`` on its body (``while
    True`` nothing); a ``for`` body counts as run, except over a literal empty collection or
    ``range(0)``, which never runs; ``except`` handlers and ``match`` cases are conditions; the
    right operands of ``and`` / ``or`` and the branches of ``x if c else y`` are conditional; code
    after an unconditional ``return`` / ``raise`` never runs.
    """

    def __init__(self, tree: SourceTree, fn: Function, summary: _Summary, local: dict[str, list[ast.expr]],
                 nested: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef], params: list[str]) -> None:
        self.tree, self.fn, self.summary, self.local, self.nested, self.params = tree, fn, summary, local, nested, params

    def condition(self, test: ast.expr) -> Condition:
        flag = test.attr if isinstance(test, ast.Attribute) else test.id if isinstance(test, ast.Name) else None
        return Condition(ast.unparse(test), self.fn.module.path, test.lineno, flag)

    # Returns the conditions for the statements after the block, or None when the block never falls through
    # (with why: "return" for return / continue / break, "raise" for raise).
    def block(self, body: list[ast.stmt], conds: tuple[Condition, ...]) -> tuple[tuple[Condition, ...] | None, str]:
        current: tuple[Condition, ...] | None = conds
        for stmt in body:
            current, why = self.stmt(stmt, current)  # type: ignore[arg-type]
            if current is None:
                return None, why
        return current, ""

    def stmt(self, node: ast.stmt, conds: tuple[Condition, ...]) -> tuple[tuple[Condition, ...] | None, str]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return conds, ""  # a nested definition runs when called
        if isinstance(node, ast.If):
            self.expr(node.test, conds)
            known = _constant(node.test)
            if known is True:
                return self.block(node.body, conds)
            if known is False:
                return self.block(node.orelse, conds)
            yes, no = self.condition(node.test), self.condition(_negate(node.test))
            marks = (len(self.summary.calls), len(self.summary.writes))
            after_body, why_body = self.block(node.body, (*conds, yes))
            middle = (len(self.summary.calls), len(self.summary.writes))
            after_else, why_else = self.block(node.orelse, (*conds, no))
            self.both_branches(marks, middle, conds)
            if after_body is not None and after_else is not None:
                return conds, ""
            if after_body is None and after_else is None:
                return None, "return" if "return" in (why_body, why_else) else "raise"
            if after_body is None:
                return ((*conds, no), "") if why_body == "return" else (conds, "")
            return ((*conds, yes), "") if why_else == "return" else (conds, "")
        if isinstance(node, ast.While):
            self.expr(node.test, conds)
            known = _constant(node.test)
            if known is not False:
                self.block(node.body, conds if known else (*conds, self.condition(node.test)))
            self.block(node.orelse, conds)
            return conds, ""
        if isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter, conds)
            if not _empty_iterable(node.iter):
                self.block(node.body, conds)
            self.block(node.orelse, conds)
            return conds, ""
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            after, why = self.block(node.body, conds)
            falls = after is not None
            for handler in node.handlers:
                text = f"except {ast.unparse(handler.type)}" if handler.type is not None else "except"
                handled, _ = self.block(handler.body, (*conds, Condition(text, self.fn.module.path, handler.lineno)))
                falls = falls or handled is not None
            if after is not None:
                self.block(node.orelse, conds)
            final, final_why = self.block(node.finalbody, conds)
            if final is None:
                return None, final_why
            return (conds, "") if falls else (None, why)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.expr(item.context_expr, conds)
            return self.block(node.body, conds)
        if isinstance(node, ast.Match):
            self.expr(node.subject, conds)
            for case in node.cases:
                text = f"match {ast.unparse(node.subject)} case {ast.unparse(case.pattern)}"
                self.block(case.body, (*conds, Condition(text, self.fn.module.path, case.pattern.lineno)))
            return conds, ""
        if isinstance(node, ast.Return):
            if node.value is not None:
                self.expr(node.value, conds)
            return None, "return"
        if isinstance(node, (ast.Continue, ast.Break)):
            return None, "return"
        if isinstance(node, ast.Raise):
            for part in (node.exc, node.cause):
                if part is not None:
                    self.expr(part, conds)
            return None, "raise"
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and self.tree._is_environ(self.fn, target.value, self.summary):
                    how = "del" if isinstance(node, ast.Delete) else "assign"
                    self.record_key(target.slice, how, node.lineno, conds)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, conds)
        return conds, ""

    def both_branches(self, start: tuple[int, int], middle: tuple[int, int], conds: tuple[Condition, ...]) -> None:
        """What both branches of an ``if`` do runs whichever branch is taken: the same definition called (or
        constructed: ``A(...)`` / ``B(...)`` running one inherited ``__init__``), the same variable written."""
        calls, writes = self.summary.calls, self.summary.writes

        def reached(edges: list[_Edge]) -> dict[str, tuple[object, _Edge]]:
            out: dict[str, tuple[object, _Edge]] = {}
            for edge in edges:
                callees = _distinct(edge.callees)
                if len(callees) != 1:
                    continue
                callee = callees[0]
                targets: list[object] = [callee]
                if isinstance(callee, ClassInfo):
                    targets += self.tree.constructors(callee)
                for t in targets:
                    key = t.key if isinstance(t, (Function, ClassInfo)) else str(t)
                    out.setdefault(key, (t, edge))
            return out

        first, second = reached(calls[start[0]:middle[0]]), reached(calls[middle[0]:])
        for key in first.keys() & second.keys():
            callee, edge = first[key]
            calls.append(_Edge([callee], edge.call, edge.line, edge.text, conds))
        seen = {w.variable for w in writes[middle[1]:]}
        for w in list(writes[start[1]:middle[1]]):
            if w.variable in seen and w.variable != "?":
                writes.append(EnvWrite(w.variable, w.how, w.file, w.line, w.function, conds))
                seen.discard(w.variable)

    def expr(self, node: ast.expr, conds: tuple[Condition, ...]) -> None:
        if isinstance(node, ast.Lambda):
            return  # runs when called, which the graph does not follow
        if isinstance(node, ast.IfExp):
            self.expr(node.test, conds)
            self.expr(node.body, (*conds, self.condition(node.test)))
            self.expr(node.orelse, (*conds, self.condition(_negate(node.test))))
            return
        if isinstance(node, ast.BoolOp):
            current = conds
            for value in node.values:
                self.expr(value, current)
                test = value if isinstance(node.op, ast.And) else _negate(value)
                current = (*current, self.condition(test))
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            current = conds
            for gen in node.generators:
                self.expr(gen.iter, current)
                if _empty_iterable(gen.iter):
                    return
                for test in gen.ifs:
                    self.expr(test, current)
                    current = (*current, self.condition(test))
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for part in parts:
                self.expr(part, current)
            return
        if isinstance(node, ast.Call):
            self.call(node, conds)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, conds)
            elif isinstance(child, ast.keyword):
                self.expr(child.value, conds)

    def record_key(self, key: ast.expr, how: str, line: int, conds: tuple[Condition, ...]) -> None:
        name = _string(key)
        if name is None and isinstance(key, ast.Name):
            if key.id in self.params:
                self.summary.param_writes.append((self.params.index(key.id), key.id, how, conds))
                return
            name = _string(self.fn.module.aliases.get(key.id))
        self.summary.writes.append(EnvWrite(name or "?", how, self.fn.module.path, line, self.fn.key, conds))

    def resolve(self, expr: ast.expr) -> list[object]:
        """What a callee expression is; a function or class defined in this function's body included."""
        owner = expr.value if isinstance(expr, ast.Attribute) else expr
        if isinstance(owner, ast.Name) and owner.id in self.nested and owner.id not in self.local:
            node = self.nested[owner.id]
            qualname = f"{self.fn.qualname}.<locals>.{owner.id}"
            if isinstance(node, ast.ClassDef):
                cls = ClassInfo(self.fn.module, qualname, node)
                if owner is expr:
                    return [cls]
                method = self.tree.method(cls, expr.attr)  # type: ignore[union-attr]
                if method is not None:
                    return [method]
                return [f"{cls.key}.{expr.attr}"] if self.tree._is_ray_actor(cls, self.fn) else []  # type: ignore[union-attr]
            if owner is expr:
                return [Function(self.fn.module, qualname, node, self.fn.cls)]
        return self.tree._resolve_expr(self.fn.module, expr, self.fn, self.local, frozenset(), 0)

    def call(self, call: ast.Call, conds: tuple[Condition, ...]) -> None:
        fn, summary, tree = self.fn, self.summary, self.tree
        func = call.func
        line = call.lineno
        # os.environ.<writer>(...), os.putenv(...)
        if isinstance(func, ast.Attribute):
            if tree._is_environ(fn, func.value, summary):
                if func.attr in _ENVIRON_WRITERS and call.args:
                    self.record_key(call.args[0], _ENVIRON_WRITERS[func.attr], line, conds)
                elif func.attr == "update":
                    for arg in call.args:
                        if isinstance(arg, ast.Dict):
                            for k in arg.keys:
                                if k is not None:
                                    self.record_key(k, "update", line, conds)
                        else:
                            summary.writes.append(EnvWrite("?", "update", fn.module.path, line, fn.key, conds))
                    for kw in call.keywords:
                        if kw.arg:
                            summary.writes.append(EnvWrite(kw.arg, "update", fn.module.path, line, fn.key, conds))
                return
            if func.attr in ("putenv", "unsetenv") and tree._names_module(fn, func.value, summary, "os") and call.args:
                self.record_key(call.args[0], func.attr, line, conds)
                return
            # envs.NAME.set(value): SGLang's typed environment field NAME
            if (func.attr in _ENV_FIELD_WRITERS and isinstance(func.value, ast.Attribute)
                    and isinstance(func.value.value, ast.Name) and func.value.value.id == "envs"):
                summary.writes.append(EnvWrite(func.value.attr, f"envs.{func.attr}", fn.module.path, line, fn.key,
                                               conds))
                return
        callees = self.resolve(func)
        summary.calls.append(_Edge(callees, call, line, ast.unparse(func), conds))
        # A function passed as an argument is called only by an API that calls it (a process or thread
        # target, an executor, Ray, or an SGLang helper a manifest names): elsewhere it is a value.
        if not any(isinstance(c, str) and _calls_its_arguments(c) or isinstance(c, Function)
                   and c.key in tree.callback_helpers for c in callees):
            return
        for arg in (*call.args, *(kw.value for kw in call.keywords)):
            if isinstance(arg, (ast.Name, ast.Attribute)):
                found = [f for f in self.resolve(arg) if isinstance(f, (Function, ClassInfo))]
                if found:
                    summary.calls.append(_Edge(found, None, line, ast.unparse(arg), conds))
