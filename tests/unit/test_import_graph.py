"""The package's import graph: no cycles (imports inside functions included), layers point one way.

Read from the source with ast, so a lazy ``import`` inside a function counts like a top-level one:
a cycle that only closes at run time is still a cycle a newcomer has to untangle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "sglang_eagle_nccl"
NAME = "sglang_eagle_nccl"

# Lowest first. A module may import only from its own layer or lower ones. A layer is a top-level
# subpackage (or module), or a sub-subpackage named "top.sub" where the two sides of one
# subpackage sit at different heights.
LAYERS = [
    {"contract"},
    {"knowledge"},
    {"profile", "native"},
    {"decision"},
    {"inproc"},
    {"offline"},
    {"cli", "_gate", "__main__"},
]


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(NAME))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if not mod.startswith(NAME):
                continue
            for alias in node.names:
                candidate = f"{mod}.{alias.name}"
                found.add(
                    candidate
                    if (PKG.parent / (candidate.replace(".", "/") + ".py")).exists()
                    or (PKG.parent / candidate.replace(".", "/") / "__init__.py").exists()
                    else mod
                )
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PKG.rglob("*.py")}
    return {m: {i for i in imports_of(p) if i in modules and i != m} for m, p in modules.items()}


def layer_of(module: str) -> int:
    top = module.split(".")[1] if module.count(".") else ""
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def test_no_import_cycles() -> None:
    g = graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(g[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n) :] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_layers_point_one_way() -> None:
    upward = [
        f"{m} (layer {layer_of(m)}) imports {n} (layer {layer_of(n)})"
        for m, deps in graph().items()
        if m != NAME
        for n in deps
        if n != NAME and layer_of(n) > layer_of(m)
    ]
    assert not upward, "imports pointing upward:\n" + "\n".join(sorted(upward))


def test_subpackage_inits_import_nothing() -> None:
    for init in PKG.rglob("__init__.py"):
        tree = ast.parse(init.read_text("utf-8"))
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))], init


# The launch's decision lives in decision/: the CLI and the offline side ask it without entering
# inproc/. What is left is preflight, which *runs* in-process code: its spawned ranks' body
# (activation, the hooks, SGLang's init) and the one environment writer its ranks inherit through.
INPROC_FROM_ABOVE = {
    "sglang_eagle_nccl.offline.launch.preflight": {
        "sglang_eagle_nccl.inproc.boot.environ",
        "sglang_eagle_nccl.inproc.preflight_rank",
        "sglang_eagle_nccl.inproc.boot.bootstrap",
        "sglang_eagle_nccl.inproc.boot.state",
        "sglang_eagle_nccl.inproc.hooks.installer",
        "sglang_eagle_nccl.inproc.refusal",
    },
}


def test_cli_and_offline_import_inproc_only_where_they_run_it() -> None:
    found = {
        m: {n for n in deps if n.startswith(f"{NAME}.inproc")}
        for m, deps in graph().items()
        if m.startswith((f"{NAME}.cli", f"{NAME}.offline"))
    }
    extra = {m: sorted(ns - INPROC_FROM_ABOVE.get(m, set())) for m, ns in found.items() if ns - INPROC_FROM_ABOVE.get(m, set())}
    assert not extra, f"cli/ or offline/ entering inproc/ (ask decision/ instead): {extra}"
