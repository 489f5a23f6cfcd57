"""The door table is the one way a refusal ends (inproc/refusal.py), and docs/fail-closed.md shows that table.

- docs/fail-closed.md's table is :func:`~sglang_eagle_nccl.inproc.refusal.table_rows`, row for row;
- in the plugin's in-process code, nothing but the door table raises ``SystemExit``, constructs
  ``RefusedError`` or writes a ``refused`` record, and every ``refuse(...)`` names a door of the table;
- every door of the table is reached by some call site (interpreter start and a Ray actor's start through
  ``start_door``).

Read from the source with ``ast`` (a reference written here, not the plugin's own helpers).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sglang_eagle_nccl.inproc.refusal import DOORS, table_rows

PKG = Path(__file__).resolve().parents[3] / "sglang_eagle_nccl"
DOC = PKG.parent / "docs" / "fail-closed.md"
TABLE = PKG / "inproc" / "refusal.py"
# The in-process code of every door (the .pth gate, the boot modules, the hooks, preflight's rank body).
IN_PROCESS = [PKG / "_gate.py", *sorted((PKG / "inproc").rglob("*.py")), PKG / "offline" / "launch" / "preflight.py"]


def doc_rows() -> list[tuple[str, str]]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index("| door | refusal |")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        rows.append((cells[0], cells[1]))
    return rows


def test_the_documented_table_is_the_door_table():
    assert doc_rows() == table_rows()
    assert len(table_rows()) == len(DOORS)


MUTANT = re.compile(r"__mutmut_\d+$")


def _walk(tree: ast.AST):
    """ast.walk, without the mutants ci/mutation's copy of the sources holds beside each original function."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and MUTANT.search(node.name):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _calls(tree: ast.AST):
    for node in _walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            yield name, node


def test_nothing_but_the_door_table_ends_a_refusal():
    offenders = []
    for path in IN_PROCESS:
        if path == TABLE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, node in _calls(tree):
            if name in ("SystemExit", "RefusedError", "exit", "_exit"):
                offenders.append(f"{path.name}:{node.lineno} {name}(...)")
            if name == "write" and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "refused":
                offenders.append(f"{path.name}:{node.lineno} writes a refused record")
        for node in _walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Name) and node.exc.id == "SystemExit":
                offenders.append(f"{path.name}:{node.lineno} raise SystemExit")
    # preflight's launcher (not a rank) exits 1 once every rank reported: that is the CLI, not a door.
    assert [o for o in offenders if not o.startswith("preflight.py")] == []


def test_every_refuse_names_a_door_and_every_door_is_reached():
    named = set()
    dynamic = []
    for path in IN_PROCESS:
        for name, node in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            if name != "refuse" or path == TABLE:
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant):
                named.add(first.value)
            else:
                dynamic.append(ast.unparse(first))
    assert named <= set(DOORS)
    # The one computed door: interpreter start or a Ray actor's start (refusal.start_door).
    assert dynamic == ["start_door(list(getattr(sys, 'orig_argv', sys.argv)))"]
    assert named | {"interpreter_start", "ray_actor"} == set(DOORS)
