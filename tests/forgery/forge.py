"""Forged copies of a real SGLang release: the hooked target still exists, the behaviour does not happen.

Each forgery is a text edit located with :mod:`ast` on one file of the published wheel (the rest of
the release is read unchanged), written here for these tests: nothing is copied from SGLang. The
kinds (issue 26 item 3), each of which the proof must reject:

- ``emptied``: the function that makes the call (or the write) has its body replaced by ``pass``;
- ``moved``: that function's body moves to a same-named function in another module, and the
  original is emptied (a checker that matches names finds the namesake);
- ``condition``: its body runs only under an ``if`` on a name the manifest does not state;
- ``atexit``: its body runs from an ``atexit`` callback (after the launch, if ever);
- ``spawn_conditional``: ``set_start_method("spawn")`` runs only under an unrelated server flag;
- ``namesake_import``: the callee's name is rebound, inside the caller, to a same-named no-op
  imported from another module;
- ``other_class``: the method on the path moves to another class (same method name), so
  ``self.method()`` no longer reaches it.
"""

from __future__ import annotations

import ast
import textwrap
import zipfile
from collections.abc import Callable

FORGED_ELSEWHERE = "sglang/srt/_forged_elsewhere.py"
FORGED_NOOP = "sglang/srt/_forged_noop.py"


class ForgedRelease:
    """A wheel's files, some replaced."""

    def __init__(self, zf: zipfile.ZipFile) -> None:
        self.zf = zf
        self.names = set(zf.namelist())
        self.files: dict[str, str] = {}

    def read(self, rel: str) -> str | None:
        if rel in self.files:
            return self.files[rel]
        return self.zf.read(rel).decode("utf-8", "replace") if rel in self.names else None

    def namelist(self) -> list[str]:
        return sorted(self.names | set(self.files))

    def write(self, rel: str, text: str) -> None:
        ast.parse(text)  # a forgery must still be valid Python: the proof must reject it for what it does
        self.files[rel] = text

    def path_of(self, module: str) -> str:
        base = module.replace(".", "/")
        for rel in (base + ".py", base + "/__init__.py"):
            if self.read(rel) is not None:
                return rel
        raise LookupError(module)


def _definitions(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in (getattr(node, "body", []), getattr(node, "orelse", []), getattr(node, "finalbody", []),
                          *(h.body for h in getattr(node, "handlers", []))):
                yield from _definitions(block)


def find(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef:
    """The last definition of ``qualname`` (``Class.method``), as Python binds it, under ``if`` / ``try`` too."""
    body: list[ast.stmt] = tree.body
    found = None
    for part in qualname.split("."):
        found = None
        for node in _definitions(body):
            if node.name == part:
                found = node
        if found is None:
            raise LookupError(qualname)
        body = found.body
    assert found is not None
    return found


def _body_span(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int, str]:
    """First and last line of a function's body, and its indentation."""
    return node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno, " " * node.body[0].col_offset


def _replace_lines(text: str, first: int, last: int, new: list[str]) -> str:
    lines = text.split("\n")
    return "\n".join(lines[: first - 1] + new + lines[last:])


def _body_text(text: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    first, last, _ = _body_span(node)
    return text.split("\n")[first - 1 : last]


def edit_function(release: ForgedRelease, key: str, change: Callable[[list[str], str], list[str]]) -> None:
    """Replace the body of ``module:Qual`` by ``change(body_lines, indent)``."""
    module, qual = key.split(":")
    rel = release.path_of(module)
    text = release.read(rel) or ""
    node = find(ast.parse(text), qual)
    first, last, indent = _body_span(node)  # type: ignore[arg-type]
    release.write(rel, _replace_lines(text, first, last, change(_body_text(text, node), indent)))  # type: ignore[arg-type]


def emptied(release: ForgedRelease, key: str) -> None:
    edit_function(release, key, lambda body, indent: [f"{indent}pass"])


def under_condition(release: ForgedRelease, key: str, test: str = "forged_condition") -> None:
    edit_function(release, key, lambda body, indent: [f"{indent}if {test}:", *("    " + line for line in body)])


def behind_atexit(release: ForgedRelease, key: str) -> None:
    def change(body: list[str], indent: str) -> list[str]:
        return [f"{indent}import atexit", f"{indent}def _forged_later():", *("    " + line for line in body),
                f"{indent}atexit.register(_forged_later)"]

    edit_function(release, key, change)


def moved_to_namesake(release: ForgedRelease, key: str) -> None:
    """The body goes to a module-level function of the same name in another module; the original is emptied."""
    module, qual = key.split(":")
    text = release.read(release.path_of(module)) or ""
    node = find(ast.parse(text), qual)
    body = textwrap.dedent("\n".join(_body_text(text, node)))  # type: ignore[arg-type]
    params = ast.unparse(node.args)  # type: ignore[union-attr]
    elsewhere = release.read(FORGED_ELSEWHERE) or ""
    elsewhere += f"\n\ndef {node.name}({params}):\n" + textwrap.indent(body, "    ") + "\n"
    release.write(FORGED_ELSEWHERE, elsewhere)
    emptied(release, key)


def namesake_import(release: ForgedRelease, key: str, name: str, *, is_class: bool) -> None:
    """Inside ``key``, ``name`` becomes a same-named no-op imported from another module."""
    noop = release.read(FORGED_NOOP) or ""
    if is_class:
        noop += f"\n\nclass {name}:\n    def __init__(self, *args, **kwargs):\n        pass\n"
    else:
        noop += f"\n\ndef {name}(*args, **kwargs):\n    return None\n"
    release.write(FORGED_NOOP, noop)
    edit_function(release, key, lambda body, indent: [f"{indent}from sglang.srt._forged_noop import {name}", *body])


def to_other_class(release: ForgedRelease, key: str) -> None:
    """The method ``module:Class.method`` moves to a new class with the same method name."""
    module, qual = key.split(":")
    rel = release.path_of(module)
    text = release.read(rel) or ""
    node = find(ast.parse(text), qual)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    last = node.end_lineno or node.lineno
    lines = text.split("\n")
    method = textwrap.dedent("\n".join(lines[first - 1 : last]))
    rest = _replace_lines(text, first, last, [" " * node.col_offset + "pass"])
    release.write(rel, rest + "\n\nclass _ForgedOther:\n" + textwrap.indent(method, "    ") + "\n")


def call_under_condition(release: ForgedRelease, key: str, callee: str, test: str) -> None:
    """The statement in ``key`` that calls ``...callee(...)`` runs only ``if test:``."""
    module, qual = key.split(":")
    rel = release.path_of(module)
    text = release.read(rel) or ""
    node = find(ast.parse(text), qual)
    for stmt in ast.walk(node):
        if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and ast.unparse(stmt.value.func).endswith(callee)):
            lines = text.split("\n")
            body = lines[stmt.lineno - 1 : stmt.end_lineno]
            indent = " " * stmt.col_offset
            release.write(rel, _replace_lines(text, stmt.lineno, stmt.end_lineno or stmt.lineno,
                                              [f"{indent}if {test}:", *("    " + line for line in body)]))
            return
    raise LookupError(f"no call of {callee} in {key}")
