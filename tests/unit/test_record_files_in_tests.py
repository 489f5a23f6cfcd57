"""How tests read the JSON-lines files our writers leave (audit records, reads logs, probes, the ledger).

The rule: a test never parses such a file line by line itself; it calls ``support.jsonl.read_jsonl``,
which skips blank lines as the audit's reader does. Both writers put a line that would cross a 4 KiB page
on the next page, after a line of spaces; a test that parsed every line passed only while its file stayed
under a page, and a random order in which an earlier test left the native library more to write (a
communicator's tuner answers) failed it.

Two halves: read_jsonl gives back exactly the records a writer wrote, whatever their sizes (generated,
written with the writer's own padding rule), and no other test file parses lines of a file itself (a scan
of tests/, whose own cases show it can fail).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.inproc.boot.audit_writer import PAGE, page_aligned
from support.jsonl import read_jsonl

TESTS = Path(__file__).resolve().parents[1]
HELPER = TESTS / "support" / "jsonl.py"

# Record payload sizes around the page: most lines short, some that cross a boundary, some over a page.
SIZES = st.one_of(st.integers(0, 300), st.integers(PAGE - 200, PAGE + 50), st.integers(0, 2 * PAGE))


@settings(max_examples=60, deadline=None)
@given(st.lists(SIZES, max_size=30), st.integers(0, PAGE - 1))
def test_read_jsonl_gives_back_every_record_whatever_the_padding(tmp_path_factory, sizes, head):
    # `head` bytes of a first record set where in its page the generated ones start.
    records = [{"event": "head", "pad": "h" * head}] + [{"event": "r", "i": i, "pad": "x" * n}
                                                         for i, n in enumerate(sizes)]
    data = b""
    for record in records:
        data += page_aligned((json.dumps(record) + "\n").encode(), len(data))
    path = tmp_path_factory.mktemp("jsonl") / "proc-h-1.jsonl"
    path.write_bytes(data)
    assert read_jsonl(path) == records


def test_a_record_that_would_cross_a_page_leaves_a_blank_line_that_only_read_jsonl_skips(tmp_path):
    # What the generated cases above reach often: shown once, so that a change of the padding rule that made
    # the blank line vanish (and the helper pointless) is seen here.
    first, second = ({"event": "a", "pad": "a" * (PAGE - 100)}, {"event": "b", "pad": "b" * 200})
    data = b""
    for record in (first, second):
        data += page_aligned((json.dumps(record) + "\n").encode(), len(data))
    (path := tmp_path / "proc-h-1.jsonl").write_bytes(data)
    assert [line.strip() for line in data.splitlines()][1] == b""
    assert read_jsonl(path) == [first, second]


def _is_json_loads(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "loads"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "json")


def _reads_a_file(source: str) -> bool:
    """Whether the iterated expression reads a file (not a child's captured output)."""
    if any(word in source for word in ("stdout", "stderr")):
        return False
    return any(word in source for word in ("open(", "read_text(", "read_bytes(", ".read()", "readlines(")) \
        or source.isidentifier()  # a file object (`for line in f`) or a list of a file's lines


def lines_parsed_by_hand(source: str) -> list[int]:
    """Line numbers where ``source`` applies json.loads to the lines of a file itself."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        loops = []
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            loops = [(g.target, g.iter, [node.elt]) for g in node.generators]
        elif isinstance(node, ast.DictComp):
            loops = [(g.target, g.iter, [node.key, node.value]) for g in node.generators]
        elif isinstance(node, ast.For):
            loops = [(node.target, node.iter, node.body)]
        for target, iterated, body in loops:
            if not isinstance(target, ast.Name) or not _reads_a_file(ast.get_source_segment(source, iterated)):
                continue
            if any(_is_json_loads(call) and call.args and isinstance(call.args[0], ast.Name)
                   and call.args[0].id == target.id for part in body for call in ast.walk(part)):
                found.append(node.lineno)
        if _is_json_loads(node) and node.args and isinstance(node.args[0], ast.Subscript):
            picked = ast.get_source_segment(source, node.args[0])
            if "splitlines" in picked and _reads_a_file(picked):
                found.append(node.lineno)
    return sorted(set(found))


def test_the_scan_finds_each_way_of_parsing_a_files_lines_and_nothing_else():
    by_hand = [
        "[json.loads(x) for x in open(p).read().splitlines()]",
        "[json.loads(x) for x in Path(p).read_text('utf-8').splitlines()]",
        "{json.loads(line)['w'] for f in fs for line in f.read_text().splitlines()}",
        "for line in f:\n    r = json.loads(line)",
        "for line in p.read_text().splitlines():\n    if line.strip():\n        r = json.loads(line)",
        "json.loads(f.read_text().splitlines()[0])",
    ]
    fine = [
        "json.loads(proc.stdout.strip().splitlines()[-1])",
        "[json.loads(line) for line in done.stdout.splitlines()]",
        "json.loads(path.read_text())",  # one JSON document, not lines
        "[r for r in read_jsonl(p)]",
    ]
    assert [bool(lines_parsed_by_hand(s)) for s in by_hand] == [True] * len(by_hand)
    assert [bool(lines_parsed_by_hand(s)) for s in fine] == [False] * len(fine)


def test_no_test_parses_the_lines_of_a_file_itself():
    offenders = [f"{path.relative_to(TESTS.parent)}:{line}"
                 for path in sorted(TESTS.rglob("*.py")) if path != HELPER
                 for line in lines_parsed_by_hand(path.read_text("utf-8"))]
    assert offenders == [], (
        "these tests parse a JSON-lines file line by line; a blank line (page padding) breaks them: "
        "use support.jsonl.read_jsonl(path)")
