"""The code blocks of README.md and docs/*.md: those a test runs exactly as written, and those that
cannot run here.

A block is marked by the HTML comment line right above its opening fence (invisible when the page
is rendered): ``<!-- tested as written: tests/<tier>/<file>.py::<test name> -->``, or
``<!-- not run here: <why> -->`` (it needs GPUs, a model, a cluster, a published package ...). A
"tested" marker names one block in all the documents together. Every shell or console block carries
one of the two (tests/unit/test_doc_blocks.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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


TESTED = re.compile(r"^<!-- tested as written: (tests/\S+\.py)::(\w+) -->$")
NOT_RUN = re.compile(r"^<!-- not run here: (.+?) -->$")
# A shell or console block: one of these languages, or no language and a line that starts with "$ ".
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console", "zsh"})


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # of the opening fence, 1-based
    language: str
    marker: str  # the line right above the opening fence
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return self.language in SHELL_LANGUAGES or (
            not self.language and any(line.startswith("$ ") for line in self.text.splitlines()))


def blocks() -> list[Block]:
    """Every fenced block of README.md and docs/*.md, in order."""
    found = []
    for doc in documents():
        lines = doc.read_text("utf-8").splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("```"):
                start = i
                body = []
                i += 1
                while i < len(lines) and not lines[i].startswith("```"):
                    body.append(lines[i])
                    i += 1
                marker = lines[start - 1].strip() if start else ""
                found.append(Block(doc, start + 1, lines[start][3:].strip(), marker, "\n".join(body) + "\n"))
            i += 1
    return found
