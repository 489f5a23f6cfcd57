"""The README's code blocks that a test runs exactly as written.

A block is marked by the HTML comment line right above its opening fence (invisible when the README
is rendered): ``<!-- tested as written: tests/<tier>/<file>.py::<test name> -->``.
"""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def code_block(test_id: str) -> tuple[str, str]:
    """(language, text) of the block the README marks as tested by ``test_id``."""
    lines = README.read_text("utf-8").splitlines()
    marker = f"<!-- tested as written: {test_id} -->"
    starts = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(starts) != 1:
        raise AssertionError(f"README.md marks {len(starts)} blocks with {marker!r}; expected exactly one")
    fence = lines[starts[0] + 1]
    if not fence.startswith("```"):
        raise AssertionError(f"the line after {marker!r} does not open a code block: {fence!r}")
    body = []
    for line in lines[starts[0] + 2 :]:
        if line.startswith("```"):
            return fence[3:].strip(), "\n".join(body) + "\n"
        body.append(line)
    raise AssertionError(f"the code block after {marker!r} is never closed")
