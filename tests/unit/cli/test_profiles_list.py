"""`profiles list` shows everything each built-in sets: its variables and its tuner rules (issue 27:
pcie-8gpu-eagle's one rule, its whole point, was hidden).

Reference: the built-in TOML files themselves, read here with tomllib (not through the plugin).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from click.testing import CliRunner

from sglang_eagle_nccl.cli.main import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN = Path(__file__).resolve().parents[3] / "sglang_eagle_nccl" / "profile" / "builtin"


def _files() -> dict[str, dict]:
    return {p.stem: tomllib.loads(p.read_text("utf-8")) for p in sorted(BUILTIN.glob("*.toml"))}


def _blocks(text: str) -> dict[str, list[str]]:
    """The listing cut into one block per profile (a block starts at an unindented line)."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            current = line.split()[0]
            blocks[current] = []
        elif current is not None:
            blocks[current].append(line.strip())
    return blocks


def test_profiles_list_shows_every_variable_and_rule():
    files = _files()
    assert any(doc.get("tuner", {}).get("rules") for doc in files.values()), "no built-in has rules to show"
    result = CliRunner().invoke(main, ["profiles", "list"])
    assert result.exit_code == 0, result.output
    blocks = _blocks(result.output)
    assert sorted(blocks) == sorted(files)
    for name, doc in files.items():
        lines = blocks[name]
        for var, value in doc.get("env", {}).items():
            assert f"{var}={value}" in lines, (name, var)
        rules = doc.get("tuner", {}).get("rules", [])
        shown = [line for line in lines if line.startswith("tuner rule ")]
        assert len(shown) == len(rules), (name, shown)
        for i, (rule, line) in enumerate(zip(rules, shown, strict=True), 1):
            low, high = rule["bytes"]
            assert line.startswith(f"tuner rule {i}: "), line
            assert re.search(rf"\[{low}, {high}\) bytes", line), line
            algo, proto = line.rsplit("-> ", 1)[1].split(",")[0].split("/")
            assert (algo.lower(), proto.lower()) == (rule["algorithm"].lower(), rule["protocol"].lower()), line


def test_profiles_list_json_carries_the_rules():
    files = _files()
    result = CliRunner().invoke(main, ["profiles", "list", "--json"])
    rows = {r["name"]: r for r in json.loads(result.output)}
    for name, doc in files.items():
        rules = doc.get("tuner", {}).get("rules", [])
        assert [r["bytes"][0] for r in rows[name]["tuner_rules"]] == [r["bytes"][0] for r in rules]
