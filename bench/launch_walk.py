#!/usr/bin/env python3
"""The walk of a profile name from ``launch``: which rooms (layers) the launcher's code passes through.

A static walk over the package's call graph, read with :mod:`ast` (nothing is imported or run).
It starts at the ``launch`` command (``cli/run.py``) and follows every call it can resolve to a
function of the package: a name defined in the same module, a name imported from another module
(``from m import f``, lazy imports inside functions included), an attribute of an imported module
(``m.f``), a class (its ``__init__``), or a method called on an object named after its class
(``decision.child_environment(...)`` -> ``Decision.child_environment``); other calls on objects
are not followed. Each function is walked once, depth first, in source order, as the interpreter would
enter it.

The room of a function is its top-level subpackage (``cli``, ``offline``, ``decision``,
``inproc`` ...). Counted along the walk:

- ``enters_inproc``: calls from a function outside ``inproc/`` into one inside it;
- ``climbs``: moves from a room to a higher one (cli > offline > decision/inproc/profile/native >
  knowledge > contract), on the return from a call (a call itself never climbs: nothing imports
  upward);
- ``rooms``: the moves between rooms, calls and returns together;
- ``call_sites_into_inproc``: every call site of a reached function that calls into ``inproc/``
  from outside it (a function called from three places counts three times);
- the calls to the decision's builders (the plan, the child environment) on the launcher's path.

Usage: ``python bench/launch_walk.py [--json]``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "sglang_eagle_nccl"


def set_root(root: Path) -> None:
    """Walk another checkout (e.g. the tree before a change: ``git worktree add``)."""
    global ROOT, PKG
    ROOT, PKG = root.resolve(), root.resolve() / "sglang_eagle_nccl"
NAME = "sglang_eagle_nccl"

# Height of each room (higher calls lower); the layers of tests/unit/test_import_graph.py.
HEIGHT = {
    "contract": 0, "knowledge": 1, "profile": 2, "native": 2, "decision": 3, "inproc": 4, "offline": 5,
    "cli": 6, "_gate": 6, "__main__": 6,
}
# The decision's builders: what every process of the launch gets.
BUILDERS = ("plan", "child_environment", "decide_child_environment", "launch_problems", "environment_problems",
            "environment_refusals", "decide")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class Module:
    def __init__(self, path: Path) -> None:
        self.name = module_name(path)
        self.tree = ast.parse(path.read_text("utf-8"))
        self.package = self.name if path.name == "__init__.py" else self.name.rsplit(".", 1)[0]
        self.defs: dict[str, ast.AST] = {}  # qualified name in the module -> def
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.defs[node.name] = node
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.defs[f"{node.name}.{item.name}"] = item
        self.aliases: dict[str, str] = {}  # local name -> "module" or "module:name"
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith(NAME):
                        self.aliases[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = self.package.rsplit(".", node.level - 1)[0] if node.level > 1 else self.package
                    mod = f"{base}.{node.module}" if node.module else base
                else:
                    mod = node.module or ""
                if not mod.startswith(NAME):
                    continue
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{mod}:{a.name}"


def room(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


class Walk:
    def __init__(self) -> None:
        self.modules = {module_name(p): Module(p) for p in PKG.rglob("*.py")}
        self.methods: dict[str, list[tuple[str, str]]] = {}  # method name -> (module, Class.method)
        for m in self.modules.values():
            for qual in m.defs:
                if "." in qual:
                    self.methods.setdefault(qual.split(".", 1)[1], []).append((m.name, qual))
        self.seen: set[tuple[str, str]] = set()
        self.moves: list[tuple[str, str, str]] = []  # (kind, from room, to room)
        self.builder_calls: list[str] = []
        self.inproc_functions: set[str] = set()
        self.site_moves: list[tuple[str, str]] = []  # every resolved call site of a reached function

    def resolve(self, mod: Module, call: ast.Call) -> tuple[str, str] | None:
        func = call.func
        if isinstance(func, ast.Name):
            if func.id in mod.defs:
                return self._def(mod.name, func.id)
            target = mod.aliases.get(func.id)
            if target and ":" in target:
                m, n = target.split(":")
                if f"{m}.{n}" in self.modules:
                    return None  # a module called like a function: not a call we can follow
                return self._def(m, n)
        if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and
                                                    (func.value.id in mod.aliases or func.value.id in mod.defs)):
            # An object named after its class (decision.child_environment -> Decision.child_environment).
            if not isinstance(func.value, ast.Name):
                return None
            owners = [(m, q) for m, q in self.methods.get(func.attr, [])
                      if q.split(".")[0].lower() == func.value.id.replace("_", "").lower()]
            return owners[0] if len(owners) == 1 else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            target = mod.aliases.get(func.value.id)
            if target is None and func.value.id in mod.defs:  # Class.method
                return self._def(mod.name, f"{func.value.id}.{func.attr}")
            if target:
                m = target.replace(":", ".")
                if m in self.modules:
                    return self._def(m, func.attr)
                if ":" in target:
                    m, cls = target.split(":")
                    return self._def(m, f"{cls}.{func.attr}")
        return None

    def _def(self, module: str, name: str) -> tuple[str, str] | None:
        mod = self.modules.get(module)
        if mod is None:
            return None
        if name in mod.defs:
            node = mod.defs[name]
            if isinstance(node, ast.ClassDef):
                return (module, f"{name}.__init__") if f"{name}.__init__" in mod.defs else None
            return module, name
        target = mod.aliases.get(name.split(".")[0])  # re-exported
        if target and ":" in target and "." not in name:
            m, n = target.split(":")
            return self._def(m, n)
        return None

    def visit(self, module: str, name: str, depth: int = 0) -> None:
        if (module, name) in self.seen or depth > 200:
            return
        self.seen.add((module, name))
        mod = self.modules[module]
        node = mod.defs[name]
        calls = sorted((n for n in ast.walk(node) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset))
        here = room(module)
        for call in calls:
            target = self.resolve(mod, call)
            if target is None or target == (module, name):
                continue
            there = room(target[0])
            self.site_moves.append((here, there))
            if target[1].split(".")[-1] in BUILDERS or target[1].split(".")[0] in BUILDERS:
                self.builder_calls.append(f"{module}.{name} -> {target[0]}.{target[1]}")
            if target in self.seen:
                continue
            if there == "inproc":
                self.inproc_functions.add(f"{target[0]}.{target[1]}")
            if there != here:
                self.moves.append(("call", here, there))
            self.visit(*target, depth + 1)
            if there != here:
                self.moves.append(("return", there, here))


def measure() -> dict:
    walk = Walk()
    walk.visit(f"{NAME}.cli.run", "launch")
    enters = sum(1 for kind, a, b in walk.moves if kind == "call" and b == "inproc" and a != "inproc")
    climbs = sum(1 for _kind, a, b in walk.moves if HEIGHT.get(b, 0) > HEIGHT.get(a, 0))
    sites_into_inproc = sum(1 for a, b in walk.site_moves if b == "inproc" and a != "inproc")
    sites_down = sum(1 for a, b in walk.site_moves if HEIGHT.get(b, 0) < HEIGHT.get(a, 0))
    climbs_out_of_inproc = sum(1 for _k, a, b in walk.moves if a == "inproc" and HEIGHT.get(b, 0) > HEIGHT["inproc"])
    rooms: dict[str, int] = {}
    for module, _name in walk.seen:
        rooms[room(module)] = rooms.get(room(module), 0) + 1
    return {
        "start": "sglang_eagle_nccl.cli.run.launch",
        "functions_reached": len(walk.seen),
        "functions_by_room": dict(sorted(rooms.items())),
        "room_moves": len(walk.moves),
        "enters_inproc": enters,
        "climbs": climbs,
        "climbs_out_of_inproc": climbs_out_of_inproc,
        "call_sites_into_inproc": sites_into_inproc,
        "call_sites_to_a_lower_room": sites_down,
        "inproc_functions": sorted(walk.inproc_functions),
        "builder_calls": walk.builder_calls,
    }


# Run in a fresh interpreter on the checkout being measured: `env --audit-dir` (a launcher that
# opens its launch, the one such path that runs without SGLang installed), counting the calls to
# the decision's builders and to the hand-off encoder as they happen.
_RUNTIME = r"""
import collections, io, json, os, sys, tempfile
from click.testing import CliRunner
from sglang_eagle_nccl.cli.main import main
counts = collections.Counter()
WATCH = {"plan", "child_environment", "decide_child_environment", "encode", "decide", "launch_problems",
         "environment_problems", "environment_refusals", "resolve"}
def prof(frame, event, arg):
    if event == "call" and frame.f_code.co_name in WATCH and "sglang_eagle_nccl" in frame.f_code.co_filename:
        mod = frame.f_globals.get("__name__", "")
        counts[f"{mod}.{frame.f_code.co_name}"] += 1
with tempfile.TemporaryDirectory() as tmp:
    os.environ["XDG_CACHE_HOME"] = tmp  # a fresh key: the signing runs too
    sys.setprofile(prof)
    result = CliRunner().invoke(main, ["env", "--profile", "pcie-8gpu", "--audit-dir", tmp, "--format", "json"])
    sys.setprofile(None)
assert result.exit_code == 0, result.output
print(json.dumps(dict(sorted(counts.items()))))
"""


def runtime_counts() -> dict:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_EAGLE_NCCL", "NCCL_"))}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", _RUNTIME], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=None, help="the checkout to walk (default: this one)")
    args = parser.parse_args()
    if args.root is not None:
        set_root(args.root)
    out = measure()
    out["runtime_env_audit_dir"] = runtime_counts()
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"walk from {out['start']}: {out['functions_reached']} function(s) reached")
    print("  by room: " + ", ".join(f"{k or '(top)'} {v}" for k, v in out["functions_by_room"].items()))
    print(f"  moves between rooms: {out['room_moves']}; enters inproc/: {out['enters_inproc']}; "
          f"climbs back up: {out['climbs']} (out of inproc/: {out['climbs_out_of_inproc']})")
    print(f"  call sites (reached functions, each site counted): into inproc/ {out['call_sites_into_inproc']}, "
          f"to a lower room {out['call_sites_to_a_lower_room']} (each one a climb back on return)")
    print(f"  inproc/ functions on the launcher's path: {len(out['inproc_functions'])}")
    for f in out["inproc_functions"]:
        print(f"    {f}")
    print(f"  calls to the decision's builders on the path: {len(out['builder_calls'])}")
    for c in out["builder_calls"]:
        print(f"    {c}")
    print("  at run time, `env --profile pcie-8gpu --audit-dir DIR` (calls as they happen):")
    for name, n in out["runtime_env_audit_dir"].items():
        print(f"    {n:3} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
