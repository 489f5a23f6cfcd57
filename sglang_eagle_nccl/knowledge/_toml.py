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


def _string_end(text: str, i: int) -> tuple[int, int]:
    """For a string starting at ``text[i]`` (a quote): where its closing quote is, and the quote's length.

    A single-line string stops at a line break (an unterminated one: the parser reports it); a basic
    string's backslash escapes the next character. Linear, never recursive.
    """
    c = text[i]
    quote = c * 3 if text.startswith(c * 3, i) else c
    n = len(text)
    j = i + len(quote)
    while j < n:
        if c == '"' and text[j] == "\\":
            j += 2
            continue
        if text.startswith(quote, j) or (len(quote) == 1 and text[j] == "\n"):
            break
        j += 1
    return j, len(quote)


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
            j, quote = _string_end(text, i)
            i = j + quote
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


def int_digit_limit() -> int:
    """Python's limit on the digits ``int()`` converts from text (0: none); TOML and JSON readers
    raise a bare ValueError beyond it."""
    get = getattr(sys, "get_int_max_str_digits", None)
    return get() if get is not None else 0


_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")


def long_integer_line(text: str, max_digits: int) -> int | None:
    """The line of the first integer *value* written with more than ``max_digits`` digits, or None.

    Python's TOML parser reads every integer with ``int()``, which refuses more than
    :func:`int_digit_limit` digits with a ValueError that names no line; this scan finds the line
    for the message. Lexical and linear, like :func:`nesting_problem`: strings and comments are
    skipped, digits count only in a value (after ``=`` or inside a value's brackets, never in a
    ``[table.header]`` or a bare key), and a run followed by ``.``/``e`` is a float (no limit).
    """
    i = 0
    n = len(text)
    line = 1
    in_value = False
    depth = 0  # brackets opened inside a value (arrays, inline tables) on this or earlier lines
    while i < n:
        c = text[i]
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "\"'":
            j, quote = _string_end(text, i)
            line += text.count("\n", i, j)
            i = j + quote if j < n and text[j] != "\n" else j
            continue
        if c == "\n":
            line += 1
            in_value = depth > 0
        elif c == "=":
            in_value = True
        elif c in "[{" and in_value:
            depth += 1
        elif c in "]}" and in_value and depth:
            depth -= 1
        elif c in _KEY_CHARS:
            j = i
            while j < n and text[j] in _KEY_CHARS:
                j += 1
            token = text[i:j].lstrip("+-")
            if in_value and token and token[0] in _DIGITS and _DIGITS.issuperset(token.replace("_", "")):
                is_float = j < n and text[j] in ".eE"
                if not is_float and len(token.replace("_", "")) > max_digits:
                    return line
            i = j
            continue
        i += 1
    return None
