"""The code blocks of README.md and docs/*.md that a test runs exactly as written.

A block is marked by the HTML comment line right above its opening fence (invisible when the page
is rendered): ``<!-- tested as written: tests/<tier>/<file>.py::<test name> -->``. A marker names
one block in all the documents together.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def documents() -> list[Path]:
    """README.md and every page under docs/."""
    return [README, *sorted((REPO / "docs").glob("*.md"))]


def code_block(test_id: str) -> tuple[str, str]:
    """(language, text) of the block a document marks as tested by ``test_id``."""
    marker = f"<!-- tested as written: {test_id} -->"
    found = []
    for doc in documents():
        lines = doc.read_text("utf-8").splitlines()
        found += [(doc, lines, i) for i, line in enumerate(lines) if line.strip() == marker]
    if len(found) != 1:
        where = ", ".join(str(doc.relative_to(REPO)) for doc, _, _ in found) or "no document"
        raise AssertionError(f"{where} marks {len(found)} blocks with {marker!r}; expected exactly one")
    _, lines, start = found[0]
    starts = [start]
    fence = lines[starts[0] + 1]
    if not fence.startswith("```"):
        raise AssertionError(f"the line after {marker!r} does not open a code block: {fence!r}")
    body = []
    for line in lines[starts[0] + 2 :]:
        if line.startswith("```"):
            return fence[3:].strip(), "\n".join(body) + "\n"
        body.append(line)
    raise AssertionError(f"the code block after {marker!r} is never closed")
