"""Name resolution for the static call graph (:mod:`.callgraph`): which definition a call in SGLang's source reaches.

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

Also the graph's data: a function's summary (:class:`_Summary`: its calls and writes, each with
the :class:`Condition` s under which it runs, filled by :mod:`.callgraph_conditions`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

PACKAGE = "sglang"

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
        if module_name in _seen or f"{module_name}:{name}" in _seen:
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
            # The value is read in its own module (``get_tensor_model_parallel_group = get_tp_group``): the
            # module's other names stay open, this one is closed, so ``a = b; b = a`` ends.
            return self._resolve_expr(module, module.aliases[name], None, {}, _seen | {f"{module_name}:{name}"},
                                      depth=0)
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



@dataclass(frozen=True)
class Condition:
    """What must hold for a statement to run: the source text of a test (negated for an ``else``), where it is."""

    text: str
    file: str
    line: int
    flag: str | None = None  # the attribute or name a plain positive test reads (``if server_args.X:`` -> X)

    def where(self) -> str:
        return f"`{self.text}` at {self.file}:{self.line}"



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


def _distinct(callees: list[object]) -> list[object]:
    out, keys = [], set()
    for c in callees:
        key = c.key if isinstance(c, (Function, ClassInfo)) else c if isinstance(c, str) else None
        if key is not None and key not in keys:
            keys.add(key)
            out.append(c)
    return out
