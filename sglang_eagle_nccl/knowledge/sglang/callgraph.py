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

What is followed, within the ``sglang`` package only (third-party code is a leaf, known by the
name it is called by): calls of module functions, of imported names (``from X import f`` at
module or function level, ``import a.b as m; m.f()``, re-exports through a package's
``__init__`` and ``import *``), ``self.method()`` / ``cls.method()`` through the class's bases,
``super().method()``, ``Class.method()``, class constructors (``__init__``, and
``__post_init__`` when the class has no ``__init__`` of its own: a dataclass or msgspec record),
local aliases (``Worker = A if overlap else B; Worker(...)``) and functions passed as arguments
(``run_post_process_pass(args, _page_size_default)``: a callback is called). Not followed:
attributes whose type only runs know (``self.tp_worker.forward()``), ``getattr`` by string, and
nested functions that are defined but never called. So a missing path can mean "moved to where
static analysis cannot see"; the matrix then fails loudly and a person looks, which is the point.

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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

MAX_DEPTH = 12
PACKAGE = "sglang"

# The methods of ``os.environ`` that change it, and what each does with its first argument.
_ENVIRON_WRITERS = {"setdefault": "setdefault", "pop": "pop", "__setitem__": "assign", "__delitem__": "del"}
# SGLang's typed environment fields (``sglang.srt.environ``, ``envs.NAME.set(v)``) write ``NAME``.
_ENV_FIELD_WRITERS = ("set", "override", "clear")

Reader = Callable[[str], "str | None"]


@dataclass(frozen=True)
class EnvWrite:
    """One write of an environment variable, where it is in SGLang's source."""

    variable: str  # the name, or "?" when the key is computed at run time
    how: str  # assign, setdefault, pop, update, del, putenv, unsetenv, envs.set, helper:<function>
    file: str
    line: int
    function: str  # "module:Qualified.name" of the function that makes the write

    def where(self) -> str:
        return f"{self.file}:{self.line} ({self.function.split(':', 1)[1]})"


@dataclass
class Function:
    """A function or method definition in SGLang's source."""

    module: Module
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: ClassInfo | None = None  # the class a method is defined in

    @property
    def key(self) -> str:
        return f"{self.module.name}:{self.qualname}"

    @property
    def name(self) -> str:
        return self.node.name


@dataclass
class ClassInfo:
    module: Module
    qualname: str
    node: ast.ClassDef

    @property
    def key(self) -> str:
        return f"{self.module.name}:{self.qualname}"

    @property
    def name(self) -> str:
        return self.node.name


@dataclass
class Module:
    name: str
    path: str
    is_package: bool
    tree: ast.Module
    defs: dict[str, ast.AST] = field(default_factory=dict)  # functions and classes; a class wins over a rebinding
    aliases: dict[str, ast.expr] = field(default_factory=dict)  # NAME = expression
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # local -> (module, attribute)
    stars: list[str] = field(default_factory=list)  # modules of `from X import *`

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def _absolute(package: str, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (level - 1)]) if level > 1 else package
    return f"{base}.{module}" if module else base


def _collect_imports(body: Iterable[ast.stmt], package: str, into: dict[str, tuple[str, str | None]],
                     stars: list[str] | None = None) -> None:
    """The names ``import`` statements in ``body`` bind (also under ``if``/``try``; not in nested defs)."""
    for node in _statements(body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    into[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    into.setdefault(top, (top, None))
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(package, node.module, node.level)
            for alias in node.names:
                if alias.name == "*":
                    if stars is not None:
                        stars.append(source)
                else:
                    into[alias.asname or alias.name] = (source, alias.name)


def _statements(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a block and of the ``if``/``try``/``with``/``for`` blocks inside it, not of nested defs."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(node, name, None)
            if isinstance(inner, list):
                yield from _statements(inner)
        for handler in getattr(node, "handlers", ()) or ():
            yield from _statements(handler.body)


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class SourceTree:
    """SGLang's modules, read through ``read(relative_path)`` (a wheel or a site-packages folder) and parsed once."""

    def __init__(self, read: Reader, package: str = PACKAGE) -> None:
        self._read = read
        self.package = package
        self._modules: dict[str, Module | None] = {}
        self._summaries: dict[int, _Summary] = {}

    # --- modules and names ----------------------------------------------------------------------

    def module(self, name: str) -> Module | None:
        if name != self.package and not name.startswith(self.package + "."):
            return None
        if name not in self._modules:
            self._modules[name] = self._load(name)
        return self._modules[name]

    def _load(self, name: str) -> Module | None:
        base = name.replace(".", "/")
        for rel, is_package in ((base + ".py", False), (base + "/__init__.py", True)):
            text = self._read(rel)
            if text is None:
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                return None
            module = Module(name, rel, is_package, tree)
            for node in _statements(tree.body):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if not (node.name in module.defs and isinstance(module.defs[node.name], ast.ClassDef)
                            and not isinstance(node, ast.ClassDef)):
                        module.defs[node.name] = node
                elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    module.aliases[node.targets[0].id] = node.value
            _collect_imports(tree.body, module.package, module.imports, module.stars)
            return module
        return None

    def lookup(self, module_name: str, name: str, _seen: frozenset[str] = frozenset()) -> list[object]:
        """What ``name`` is in module ``module_name``: [Function | ClassInfo | Module | str (external dotted name)]."""
        if module_name in _seen:
            return []
        seen = _seen | {module_name}
        module = self.module(module_name)
        if module is None:
            return [f"{module_name}.{name}"]
        node = module.defs.get(name)
        if isinstance(node, ast.ClassDef):
            return [ClassInfo(module, name, node)]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return [Function(module, name, node)]
        if name in module.imports:
            return self._imported(module.imports[name], seen)
        if name in module.aliases:
            return self._resolve_expr(module, module.aliases[name], None, {}, seen, depth=0)
        for star in module.stars:
            found = self.lookup(star, name, seen)
            if found and not all(isinstance(f, str) for f in found):
                return found
        sub = self.module(f"{module_name}.{name}")
        return [sub] if sub is not None else []

    def _imported(self, binding: tuple[str, str | None], seen: frozenset[str] = frozenset()) -> list[object]:
        source, attribute = binding
        if attribute is None:
            module = self.module(source)
            return [module] if module is not None else [source]
        if self.module(source) is None:
            return [f"{source}.{attribute}"]
        return self.lookup(source, attribute, seen)

    def function(self, target: str) -> Function | None:
        """The function ``"module:Qualified.name"`` (a method through its class's bases), or None."""
        module_name, _, qualname = target.partition(":")
        parts = qualname.split(".")
        found = self.lookup(module_name, parts[0])
        obj = found[0] if found else None
        for part in parts[1:]:
            if isinstance(obj, ClassInfo):
                obj = self.method(obj, part)
            else:
                return None
        return obj if isinstance(obj, Function) else None

    # --- classes --------------------------------------------------------------------------------

    def bases(self, cls: ClassInfo) -> list[ClassInfo]:
        out = []
        for base in cls.node.bases:
            for found in self._resolve_expr(cls.module, base, None, {}, frozenset(), depth=0):
                if isinstance(found, ClassInfo):
                    out.append(found)
        return out

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        """The class and its SGLang bases, depth first, left to right (enough for single inheritance and mixins)."""
        order: list[ClassInfo] = []
        stack = [cls]
        while stack and len(order) < 64:
            current = stack.pop(0)
            if any(c.key == current.key for c in order):
                continue
            order.append(current)
            stack = self.bases(current) + stack
        return order

    def method(self, cls: ClassInfo, name: str, *, after: ClassInfo | None = None) -> Function | None:
        chain = self.mro(cls)
        if after is not None:
            keys = [c.key for c in chain]
            chain = chain[keys.index(after.key) + 1:] if after.key in keys else []
        for klass in chain:
            for node in klass.node.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                    return Function(klass.module, f"{klass.qualname}.{name}", node, klass)
        return None

    def constructors(self, cls: ClassInfo) -> list[Function]:
        """What calling the class runs: ``__init__``, else the ``__post_init__`` a generated init calls."""
        init = self.method(cls, "__init__")
        if init is not None:
            return [init]
        post = self.method(cls, "__post_init__")
        return [post] if post is not None else []

    # --- expressions ------------------------------------------------------------------------------

    def _resolve_expr(self, module: Module, expr: ast.expr, fn: Function | None, local: dict[str, list[ast.expr]],
                      seen: frozenset[str], depth: int) -> list[object]:
        """What a callee expression may be (several for ``A if c else B``); [] when unknown."""
        if depth > 4:
            return []
        if isinstance(expr, ast.Name):
            name = expr.id
            if fn is not None and fn.cls is not None and name == "self":
                return [_Instance(fn.cls)]
            if fn is not None and fn.cls is not None and name == "cls":
                return [fn.cls]  # a classmethod's cls: calling it constructs the class
            if name in local:
                out: list[object] = []
                for value in local[name]:
                    out += self._resolve_expr(module, value, fn, {}, seen, depth + 1)
                return out
            if fn is not None:
                binding = self._local_imports(fn).get(name)
                if binding is not None:
                    return self._imported(binding, seen)
            return self.lookup(module.name, name, seen)
        if isinstance(expr, ast.IfExp):
            return (self._resolve_expr(module, expr.body, fn, local, seen, depth + 1)
                    + self._resolve_expr(module, expr.orelse, fn, local, seen, depth + 1))
        if isinstance(expr, ast.BoolOp):
            out = []
            for value in expr.values:
                out += self._resolve_expr(module, value, fn, local, seen, depth + 1)
            return out
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super" and fn and fn.cls:
            return [_Super(fn.cls)]
        if isinstance(expr, ast.Call):  # Class(...).method(): a method of the new instance
            made = self._resolve_expr(module, expr.func, fn, local, seen, depth + 1)
            return [_Instance(c) for c in made if isinstance(c, ClassInfo)]
        if isinstance(expr, ast.Attribute):
            out = []
            for owner in self._resolve_expr(module, expr.value, fn, local, seen, depth + 1):
                if isinstance(owner, Module):
                    out += self.lookup(owner.name, expr.attr, seen)
                elif isinstance(owner, str):
                    out.append(f"{owner}.{expr.attr}")
                elif isinstance(owner, (ClassInfo, _Instance)):
                    klass = owner if isinstance(owner, ClassInfo) else owner.cls
                    method = self.method(klass, expr.attr)
                    if method is not None:
                        out.append(method)
                elif isinstance(owner, _Super):
                    method = self.method(owner.cls, expr.attr, after=owner.cls)
                    if method is not None:
                        out.append(method)
            return out
        return []

    def _local_imports(self, fn: Function) -> dict[str, tuple[str, str | None]]:
        summary = self._summaries.get(id(fn.node))
        if summary is not None:
            return summary.imports
        imports: dict[str, tuple[str, str | None]] = {}
        _collect_imports(fn.node.body, fn.module.package, imports)
        return imports

    # --- one function -------------------------------------------------------------------------------

    def summary(self, fn: Function) -> _Summary:
        """The calls and environment writes of one function's own body (memoised)."""
        cached = self._summaries.get(id(fn.node))
        if cached is not None:
            return cached
        summary = _Summary()
        _collect_imports(fn.node.body, fn.module.package, summary.imports)
        self._summaries[id(fn.node)] = summary
        params = [a.arg for a in (*fn.node.args.posonlyargs, *fn.node.args.args, *fn.node.args.kwonlyargs)]
        local: dict[str, list[ast.expr]] = {}
        nested: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in _statements(fn.node.body):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                local.setdefault(node.targets[0].id, []).append(node.value)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                nested[node.name] = node
        for node in _walk_body(fn.node):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Subscript) and self._is_environ(fn, target.value, summary):
                        how = "del" if isinstance(node, ast.Delete) else "assign"
                        self._record_key(fn, summary, target.slice, how, node.lineno, params)
            elif isinstance(node, ast.Call):
                self._call(fn, node, summary, local, nested, params)
        return summary

    def _is_environ(self, fn: Function, expr: ast.expr, summary: _Summary) -> bool:
        if isinstance(expr, ast.Attribute) and expr.attr == "environ":
            return self._names_module(fn, expr.value, summary, "os")
        if isinstance(expr, ast.Name):
            binding = summary.imports.get(expr.id) or fn.module.imports.get(expr.id)
            return binding == ("os", "environ")
        return False

    def _names_module(self, fn: Function, expr: ast.expr, summary: _Summary, module: str) -> bool:
        if not isinstance(expr, ast.Name):
            return False
        binding = summary.imports.get(expr.id) or fn.module.imports.get(expr.id)
        return binding == (module, None) or (binding is None and expr.id == module)

    def _record_key(self, fn: Function, summary: _Summary, key: ast.expr, how: str, line: int, params: list[str]) -> None:
        name = _string(key)
        if name is None and isinstance(key, ast.Name):
            if key.id in params:
                summary.param_writes.append((params.index(key.id), key.id, how))
                return
            alias = fn.module.aliases.get(key.id)
            name = _string(alias)
        summary.writes.append(EnvWrite(name or "?", how, fn.module.path, line, fn.key))

    def _call(self, fn: Function, call: ast.Call, summary: _Summary, local: dict[str, list[ast.expr]],
              nested: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], params: list[str]) -> None:
        func = call.func
        # os.environ.<writer>(...), os.putenv(...)
        if isinstance(func, ast.Attribute):
            if self._is_environ(fn, func.value, summary):
                if func.attr in _ENVIRON_WRITERS and call.args:
                    self._record_key(fn, summary, call.args[0], _ENVIRON_WRITERS[func.attr], call.lineno, params)
                elif func.attr == "update":
                    for arg in call.args:
                        if isinstance(arg, ast.Dict):
                            for k in arg.keys:
                                if k is not None:
                                    self._record_key(fn, summary, k, "update", call.lineno, params)
                        else:
                            summary.writes.append(EnvWrite("?", "update", fn.module.path, call.lineno, fn.key))
                    for kw in call.keywords:
                        if kw.arg:
                            summary.writes.append(EnvWrite(kw.arg, "update", fn.module.path, call.lineno, fn.key))
                return
            if func.attr in ("putenv", "unsetenv") and self._names_module(fn, func.value, summary, "os") and call.args:
                self._record_key(fn, summary, call.args[0], func.attr, call.lineno, params)
                return
            # envs.NAME.set(value): SGLang's typed environment field NAME
            if (func.attr in _ENV_FIELD_WRITERS and isinstance(func.value, ast.Attribute)
                    and isinstance(func.value.value, ast.Name) and func.value.value.id == "envs"):
                summary.writes.append(EnvWrite(func.value.attr, f"envs.{func.attr}", fn.module.path, call.lineno, fn.key))
                return
        if isinstance(func, ast.Name) and func.id in nested and func.id not in local:
            inner = Function(fn.module, f"{fn.qualname}.<locals>.{func.id}", nested[func.id], fn.cls)
            summary.calls.append(_Edge([inner], call, call.lineno, _last_name(func)))
        else:
            summary.calls.append(_Edge(self._resolve_expr(fn.module, func, fn, local, frozenset(), 0), call,
                                       call.lineno, _last_name(func)))
        # A function passed as an argument is called by the callee (a callback, a pipeline step).
        for arg in (*call.args, *(kw.value for kw in call.keywords)):
            if isinstance(arg, (ast.Name, ast.Attribute)):
                found = [f for f in self._resolve_expr(fn.module, arg, fn, local, frozenset(), 0) if isinstance(f, Function)]
                if found:
                    summary.calls.append(_Edge(found, None, call.lineno, _last_name(arg)))


def _last_name(expr: ast.expr) -> str:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return ""


def _walk_body(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """Every node of a function's body, not entering nested functions, classes or lambdas."""
    stack: list[ast.AST] = list(reversed(fn.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


@dataclass
class _Instance:
    cls: ClassInfo


@dataclass
class _Super:
    cls: ClassInfo


@dataclass
class _Edge:
    callees: list[object]
    call: ast.Call | None
    line: int
    name: str  # the name the call site uses (last attribute), for third-party leaves


@dataclass
class _Summary:
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    calls: list[_Edge] = field(default_factory=list)
    writes: list[EnvWrite] = field(default_factory=list)
    param_writes: list[tuple[int, str, str]] = field(default_factory=list)  # (index, name, how)


# --- reachability -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One function on a path from the target, with the line of the call that led there."""

    function: str  # "module:Qualified.name" or a third-party dotted name
    file: str | None
    line: int | None


@dataclass
class Reach:
    """Everything reachable from one target within ``depth`` calls."""

    target: str
    found: bool  # the target itself exists
    depth: int
    functions: dict[str, tuple[int, str | None]] = field(default_factory=dict)  # key -> (depth, parent key)
    names: dict[str, tuple[int, str]] = field(default_factory=dict)  # called name -> (depth, caller key)
    writes: list[tuple[EnvWrite, int]] = field(default_factory=list)  # (write, depth of its function)
    where: dict[str, tuple[str, int]] = field(default_factory=dict)  # function key -> (file, line of def)

    def path_to(self, key: str) -> list[str]:
        """The chain of functions from the target to ``key``."""
        chain = []
        current: str | None = key
        while current is not None and len(chain) < 64:
            chain.append(current)
            current = self.functions.get(current, (0, None))[1]
        return list(reversed(chain))

    def writes_of(self, variable: str) -> list[tuple[EnvWrite, int]]:
        return [(w, d) for w, d in self.writes if w.variable == variable]

    def reaches(self, name: str) -> tuple[int, str] | None:
        """(depth, caller) of the first call of ``name``: a function, a method, a class or a third-party callable.

        ``name`` is a bare name (``init_distributed_environment``, ``PyNcclCommunicator``,
        ``new_group``) or ``module:Qualified.name`` for one exact SGLang function.
        """
        if ":" in name:
            hit = self.functions.get(name)
            return (hit[0], hit[1] or "") if hit and hit[1] else None
        return self.names.get(name)


def reach(tree: SourceTree, target: str, depth: int = MAX_DEPTH, *, writes: Iterable[str] = (),
          calls: Iterable[str] = ()) -> Reach:
    """Breadth first from ``target`` through SGLang's calls, at most ``depth`` calls deep.

    With ``writes`` / ``calls`` the search stops as soon as each named variable has a write and
    each named callable a call (the shortest path to each is known then); without, it explores
    everything within the bound.
    """
    start = tree.function(target)
    result = Reach(target, start is not None, depth)
    if start is None:
        return result
    want_writes, want_calls = set(writes), set(calls)
    result.functions[start.key] = (0, None)
    queue: deque[tuple[Function, int]] = deque([(start, 0)])
    seen = {id(start.node)}

    def done() -> bool:
        if not want_writes and not want_calls:
            return False
        have = {w.variable for w, _ in result.writes}
        return want_writes <= have and all(result.reaches(c) is not None for c in want_calls)

    while queue and not done():
        fn, level = queue.popleft()
        result.where.setdefault(fn.key, (fn.module.path, fn.node.lineno))
        summary = tree.summary(fn)
        result.writes += [(w, level) for w in summary.writes]
        if level >= depth:
            continue
        for edge in summary.calls:
            resolved = False
            for callee in edge.callees:
                targets: list[Function] = []
                if isinstance(callee, Function):
                    targets = [callee]
                elif isinstance(callee, ClassInfo):
                    result.names.setdefault(callee.name, (level + 1, fn.key))
                    targets = tree.constructors(callee)
                elif isinstance(callee, str):
                    result.names.setdefault(callee.rsplit(".", 1)[-1], (level + 1, fn.key))
                    continue
                else:
                    continue
                resolved = True
                for t in targets:
                    if edge.call is not None:
                        result.writes += [(w, level + 1) for w in _helper_writes(tree, t, edge.call, fn)]
                    result.names.setdefault(t.name, (level + 1, fn.key))
                    if id(t.node) in seen:
                        continue
                    seen.add(id(t.node))
                    result.functions.setdefault(t.key, (level + 1, fn.key))
                    queue.append((t, level + 1))
            if not resolved and edge.name:
                result.names.setdefault(edge.name, (level + 1, fn.key))
    return result


def _helper_writes(tree: SourceTree, callee: Function, call: ast.Call, caller: Function) -> list[EnvWrite]:
    """Writes an env helper makes for this call: ``set_env("NCCL_X", v)`` writes NCCL_X."""
    summary = tree.summary(callee)
    out = []
    is_method = callee.cls is not None and callee.node.args.args and callee.node.args.args[0].arg in ("self", "cls")
    for index, name, _how in summary.param_writes:
        position = index - (1 if is_method else 0)
        value = None
        if 0 <= position < len(call.args):
            value = _string(call.args[position])
        for kw in call.keywords:
            if kw.arg == name:
                value = _string(kw.value)
        out.append(EnvWrite(value or "?", f"helper:{callee.qualname}", caller.module.path, call.lineno, caller.key))
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
                out.extend(w for w in tree.summary(fn).writes if w.variable in wanted)
                visit(node.body, f"{prefix}{node.name}.<locals>.", cls)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in (getattr(node, "body", []), getattr(node, "orelse", []), getattr(node, "finalbody", []),
                              *(h.body for h in getattr(node, "handlers", []))):
                    visit(block, prefix, cls)

    visit(module.tree.body, "", None)
    return out
