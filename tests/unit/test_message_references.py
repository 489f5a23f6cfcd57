"""What a message points a user at must exist (issue 18, item 5).

Every string the package can show -- each string literal in its code except docstrings outside
``cli/`` (messages, fixes, --help texts, the commands' docstrings, f-string parts) and each string in its data files (profiles, the NCCL
variable table, the all-reduce dispatch data, the patch manifests) -- may name the plugin's own
variables only as ``contract/names.py`` defines them, and may cite documents only that the
repository holds. A message that says "set SGLANG_EAGLE_NCCL_RUN_DIR" or "see DESIGN §7" sends the
user to something that is not there.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.knowledge import _toml

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "sglang_eagle_nccl"

# A plugin variable: the prefix and what follows it; a trailing "*" or "_*" makes it a pattern.
VARIABLE = re.compile(r"SGLANG_EAGLE_NCCL[A-Z0-9_]*(?![A-Z0-9_])(\*?)")
# A cited document: a path ending in .md, a README, or a section sign.
DOCUMENT = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b|\bREADME\b|§\s*\w+|\bDESIGN\b")


def defined_variables() -> set[str]:
    return {
        v
        for k, v in vars(names).items()
        if k.isupper() and isinstance(v, str) and v.startswith("SGLANG_EAGLE_NCCL")
    }


def _docstring_nodes(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def code_strings() -> Iterator[tuple[str, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        # A command's docstring is its --help text: user-facing like any message.
        docs = set() if path.parent.name == "cli" else _docstring_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                yield f"{path.relative_to(REPO)}:{node.lineno}", node.value


def _toml_strings(value, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _toml_strings(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _toml_strings(v, f"{where}[{i}]")


def data_strings() -> Iterator[tuple[str, str]]:
    for path in sorted([*PACKAGE.rglob("*.toml"), *(REPO / "patches").glob("*.toml")]):
        yield from _toml_strings(_toml.loads(path.read_text("utf-8")), str(path.relative_to(REPO)))


def all_strings() -> list[tuple[str, str]]:
    return [*code_strings(), *data_strings()]


def test_the_scan_sees_messages_and_data():
    found = all_strings()
    assert len(found) > 2000
    where = {w.split(":")[0].split(".toml")[0] for w, _ in found}
    assert (
        "sglang_eagle_nccl/cli/run.py" in where and "sglang_eagle_nccl/knowledge/nccl/data/nccl_vars" in where
    )


def test_every_plugin_variable_in_a_message_exists():
    defined = defined_variables()
    assert {"SGLANG_EAGLE_NCCL", "SGLANG_EAGLE_NCCL_PROFILE", "SGLANG_EAGLE_NCCL_ROOT_PID"} <= defined
    unknown = []
    for where, text in all_strings():
        for m in VARIABLE.finditer(text):
            name, pattern = m.group(0).rstrip("*"), m.group(1)
            if pattern or name.endswith("_"):
                continue  # SGLANG_EAGLE_NCCL* / SGLANG_EAGLE_NCCL_*: the family, not one variable
            if name not in defined:
                unknown.append(f"{where}: {name}")
    assert unknown == []


def test_every_document_a_message_cites_is_in_the_repository():
    missing = []
    for where, text in all_strings():
        for m in DOCUMENT.finditer(text):
            cited = m.group(1) or m.group(0)
            if cited == "README":
                cited = "README.md"
            if cited.startswith("§") or cited == "DESIGN" or not (REPO / cited).is_file():
                missing.append(f"{where}: {m.group(0)!r}")
    assert missing == []


@pytest.mark.parametrize(
    "text,bad",
    [
        ("do not set SGLANG_EAGLE_NCCL_RUN_DIR by hand", ["SGLANG_EAGLE_NCCL_RUN_DIR"]),
        ("unset SGLANG_EAGLE_NCCL_PROFILE and the SGLANG_EAGLE_NCCL* family", []),
        ("SGLANG_EAGLE_NCCL_* variables", []),
    ],
)
def test_the_variable_scan_tells_a_name_from_a_family(text, bad):
    defined = defined_variables()
    found = [m.group(0) for m in VARIABLE.finditer(text) if not m.group(1) and not m.group(0).endswith("_")]
    assert [n for n in found if n not in defined] == bad


@pytest.mark.parametrize(
    "text,cited",
    [
        ("see DESIGN §7", ["§7", "DESIGN"]),
        ("(sglang-internals.md §4)", ["sglang-internals.md", "§4"]),
        ("details: docs/native-plugins.md", ["docs/native-plugins.md"]),
        ("a file.toml, not a document", []),
    ],
)
def test_the_document_scan_finds_citations(text, cited):
    assert sorted(m.group(1) or m.group(0) for m in DOCUMENT.finditer(text)) == sorted(cited)
