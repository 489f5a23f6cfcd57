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

What is followed, within the ``sglang`` package only (third-party code is a leaf, named by its
dotted import name: ``torch.distributed.new_group``, ``multiprocessing.set_start_method``): calls of
module functions, of imported names (``from X import f`` at module or function level, ``import
a.b as m; m.f()``, re-exports through a package's ``__init__`` and ``import *``), ``self.method()``
/ ``cls.method()`` through the class's bases, ``super().method()``, ``Class.method()``, class
constructors (``__init__``, and ``__post_init__`` when the class has no ``__init__`` of its own: a
dataclass or msgspec record), methods of instance attributes (``self.nccl = NCCLLibrary(...)``;
``self.nccl.ncclCommInitRank()``), of annotated parameters (``parser: ArgumentParser``), local
aliases (``Worker = A if overlap else B; Worker(...)``), and Ray actors (``Actor.options``). Every
call is resolved to the *definition* it reaches ("module:Qualified.name"); a call that resolves
to nothing (an unannotated parameter's method, an attribute whose type only runs know,
``getattr`` by string) is recorded as unresolved and never matches a name.

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
import re
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
    conditions: tuple[Condition, ...] = ()  # what must hold for it to run (in its function, or on the whole path)

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

    def __init__(self, read: Reader, package: str = PACKAGE, *, callback_helpers: Iterable[str] = ()) -> None:
        self._read = read
        self.package = package
        # SGLang functions that call a function passed to them (``run_hook(handle_x, args)``), named by a manifest
        self.callback_helpers = frozenset(callback_helpers)
        self._modules: dict[str, Module | None] = {}
        self._summaries: dict[int, _Summary] = {}
        self._attributes: dict[tuple[int, str], list[object]] = {}
        self._assigned: dict[int, dict[str, list[tuple[Function, ast.expr]]]] = {}

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
                annotation = _annotation_of(fn, name)
                if annotation is not None:
                    # A parameter is an instance of the class its annotation names (``parser: ArgumentParser``).
                    return [_instance_of(x) for x in self._resolve_expr(module, annotation, None, {}, seen, depth + 1)
                            if isinstance(x, (ClassInfo, str))]
                if _is_parameter(fn, name):
                    return []  # an unannotated parameter: its value is the caller's, not a module-level namesake
                binding = self._local_imports(fn).get(name)
                if binding is not None:
                    return self._imported(binding, seen)
            return self.lookup(module.name, name, seen)
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):  # a string annotation
            try:
                parsed = ast.parse(expr.value, mode="eval").body
            except SyntaxError:
                return []
            return self._resolve_expr(module, parsed, fn, local, seen, depth + 1)
        if isinstance(expr, ast.Subscript) and _last_name(expr.value) == "Optional":
            return self._resolve_expr(module, expr.slice, fn, local, seen, depth + 1)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):  # ``X | None`` annotations
            return [x for side in (expr.left, expr.right)
                    for x in self._resolve_expr(module, side, fn, local, seen, depth + 1)]
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
            if made == ["ray.remote"] and expr.args:  # ray.remote(Class): that class as a Ray actor
                actors = [c for c in self._resolve_expr(module, expr.args[0], fn, local, seen, depth + 1)
                          if isinstance(c, ClassInfo)]
                if actors:
                    return [c.key for c in actors]
            return [_Instance(c) if isinstance(c, ClassInfo) else f"{c}()" for c in made
                    if isinstance(c, (ClassInfo, str))]
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
                    elif isinstance(owner, ClassInfo) and self._is_ray_actor(klass):
                        out.append(f"{klass.key}.{expr.attr}")  # Actor.options / Actor.remote, Ray's, of this actor
                    elif isinstance(owner, _Instance) and depth < 3:
                        out += self.instance_attribute(klass, expr.attr, seen, depth + 1)
                elif isinstance(owner, _Super):
                    method = self.method(owner.cls, expr.attr, after=owner.cls)
                    if method is not None:
                        out.append(method)
            return out
        return []

    def _is_ray_actor(self, cls: ClassInfo, where: Function | None = None) -> bool:
        """A class decorated ``@ray.remote`` (``where``: the function a nested class is defined in, for its imports)."""
        for decorator in cls.node.decorator_list:
            head = decorator.func if isinstance(decorator, ast.Call) else decorator
            if "ray.remote" in (str(x) for x in self._resolve_expr(cls.module, head, where, {}, frozenset(), 0)):
                return True
        return False

    def instance_attribute(self, cls: ClassInfo, attr: str, seen: frozenset[str] = frozenset(),
                           depth: int = 0) -> list[object]:
        """What ``self.attr`` may hold: every ``self.attr = value`` in the class and its bases, resolved (memoised)."""
        key = (id(cls.node), attr)
        if key in self._attributes:
            return self._attributes[key]
        self._attributes[key] = []  # a cycle (an attribute built from itself) resolves to nothing
        out: list[object] = []
        for klass in self.mro(cls):
            for method, value in self._assignments(klass).get(attr, ()):
                if isinstance(value, ast.Constant) and value.value is None:
                    continue  # ``self.x = None`` until set: the attribute holds what is assigned later
                out += self._resolve_expr(klass.module, value, method, {}, seen, depth + 1)
        self._attributes[key] = out
        return out

    def _assignments(self, klass: ClassInfo) -> dict[str, list[tuple[Function, ast.expr]]]:
        """``self.X = value`` in the methods of one class, by X (one walk per class)."""
        found = self._assigned.get(id(klass.node))
        if found is not None:
            return found
        found = {}
        for node in klass.node.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            method = Function(klass.module, f"{klass.qualname}.{node.name}", node, klass)
            for inner in _walk_body(node):
                if isinstance(inner, ast.Assign):
                    for t in inner.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            found.setdefault(t.attr, []).append((method, inner.value))
        self._assigned[id(klass.node)] = found
        return found

    def _local_imports(self, fn: Function) -> dict[str, tuple[str, str | None]]:
        summary = self._summaries.get(id(fn.node))
        if summary is not None:
            return summary.imports
        imports: dict[str, tuple[str, str | None]] = {}
        _collect_imports(fn.node.body, fn.module.package, imports)
        return imports

    # --- one function -------------------------------------------------------------------------------

    def summary(self, fn: Function) -> _Summary:
        """The calls and environment writes of one function's own body, each with its conditions (memoised)."""
        cached = self._summaries.get(id(fn.node))
        if cached is not None:
            return cached
        summary = _Summary()
        _collect_imports(fn.node.body, fn.module.package, summary.imports)
        self._summaries[id(fn.node)] = summary
        params = [a.arg for a in (*fn.node.args.posonlyargs, *fn.node.args.args, *fn.node.args.kwonlyargs)]
        local: dict[str, list[ast.expr]] = {}
        nested: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = {}
        for node in _statements(fn.node.body):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                local.setdefault(node.targets[0].id, []).append(node.value)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                nested[node.name] = node
        _Walker(self, fn, summary, local, nested, params).block(fn.node.body, ())
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


# --- conditions -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """What must hold for a statement to run: the source text of a test (negated for an ``else``), where it is."""

    text: str
    file: str
    line: int
    flag: str | None = None  # the attribute or name a plain positive test reads (``if server_args.X:`` -> X)

    def where(self) -> str:
        return f"`{self.text}` at {self.file}:{self.line}"


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


def _annotation_of(fn: Function, name: str) -> ast.expr | None:
    for a in (*fn.node.args.posonlyargs, *fn.node.args.args, *fn.node.args.kwonlyargs):
        if a.arg == name:
            return a.annotation
    return None


def _is_parameter(fn: Function, name: str) -> bool:
    args = fn.node.args
    extra = [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return name in extra or any(a.arg == name for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))


def _instance_of(found: object) -> object:
    return _Instance(found) if isinstance(found, ClassInfo) else found


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
    call: ast.Call | None  # None for a function passed to a callback API
    line: int
    text: str  # the callee as written (``self.tp_worker.forward``), for calls that resolve to nothing
    conditions: tuple[Condition, ...] = ()


@dataclass
class _Summary:
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    calls: list[_Edge] = field(default_factory=list)
    writes: list[EnvWrite] = field(default_factory=list)
    # (index, name, how, conditions) of writes of the variable a parameter names
    param_writes: list[tuple[int, str, str, tuple[Condition, ...]]] = field(default_factory=list)


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


def _distinct(callees: list[object]) -> list[object]:
    out, keys = [], set()
    for c in callees:
        key = c.key if isinstance(c, (Function, ClassInfo)) else c if isinstance(c, str) else None
        if key is not None and key not in keys:
            keys.add(key)
            out.append(c)
    return out


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
        summary = tree.summary(fn)
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
    summary = tree.summary(callee)
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
                out.extend(w for w in tree.summary(fn).writes if w.variable in wanted)
                visit(node.body, f"{prefix}{node.name}.<locals>.", cls)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in (getattr(node, "body", []), getattr(node, "orelse", []), getattr(node, "finalbody", []),
                              *(h.body for h in getattr(node, "handlers", []))):
                    visit(block, prefix, cls)

    visit(module.tree.body, "", None)
    return out
