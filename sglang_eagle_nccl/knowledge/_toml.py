"""TOML reading on every supported Python (tomllib from 3.11, tomli before)."""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as _toml

TOMLDecodeError = _toml.TOMLDecodeError


def loads(text: str) -> dict[str, Any]:
    return _toml.loads(text)


def nesting_problem(text: str, limit: int) -> str | None:
    """Why ``text`` nests deeper than ``limit``, or None; a lexical scan, linear and never recursive.

    Counts, outside strings and comments, the open ``[``/``{`` brackets and the dots of each line
    (dotted keys such as ``a.b.c = 1`` and ``[a.b.c]``). Python's TOML parser recurses once per
    bracket level (a few thousand levels raise RecursionError) and spends quadratic time and
    memory on long dotted keys (10 000 components take seconds, 100 000 exhaust memory), so a
    document from outside is scanned with this before it is parsed. It is deliberately
    approximate (a float such as 1.5 counts one dot): it only has to bound the parser's work.
    """
    depth = 0
    dots = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "\"'":
            triple = text.startswith(c * 3, i)
            quote = c * 3 if triple else c
            j = i + len(quote)
            while j < n:
                if c == '"' and text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    break
                if not triple and text[j] == "\n":
                    break
                j += 1
            i = j + len(quote)
            continue
        if c in "[{":
            depth += 1
            if depth > limit:
                return f"brackets nested more than {limit} levels deep (line {text.count(chr(10), 0, i) + 1})"
        elif c in "]}":
            depth = max(0, depth - 1)
        elif c == ".":
            dots += 1
            if dots > limit:
                return f"more than {limit} dotted key parts on line {text.count(chr(10), 0, i) + 1}"
        elif c == "\n":
            dots = 0
        i += 1
    return None
