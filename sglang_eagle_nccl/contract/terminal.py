"""The one escaper of text shown to a human: nothing untrusted acts on a terminal or reorders a line.

Profile names, group labels, values, file names and host names come from files and environments
anyone may have written. Shown raw, a control character moves the cursor, clears the screen or
forges a line of a verdict, and a bidirectional control (U+202E RIGHT-TO-LEFT OVERRIDE ...) or an
invisible format character makes a line read other than what it holds. The rule, for every
character of the text:

- Unicode general category ``Cc`` (C0 controls, DEL, C1 controls), ``Cf`` (format characters: the
  bidirectional embeddings, overrides and isolates U+202A-U+202E, U+2066-U+2069, the marks U+200E,
  U+200F, U+061C, the zero-width characters U+200B-U+200D, U+2060, the byte order mark U+FEFF, the
  soft hyphen ...), ``Zl`` and ``Zp`` (U+2028, U+2029: line breaks to some terminals and editors)
  and ``Cs`` (a lone surrogate: an undecodable byte of a file name or an environment) is written as
  an escape: ``\\xNN`` below U+0100, ``\\uNNNN`` up to U+FFFF, ``\\UNNNNNNNN`` above;
- every other character is itself (letters of every script, emoji, ``\\`` included).

:func:`printable` applies it to one value or one line (a line break is escaped: a value cannot
start a line of its own); :func:`printable_lines` to a message of several lines (``\\n`` is kept,
everything else escaped). The machine formats are not human text and never pass here: JSON escapes
on its own, and ``env``'s shell, dotenv and k8s outputs quote for their reader
(:mod:`sglang_eagle_nccl.offline.launch.env_formats`).

Import-free on the ASCII path (it runs in every process's log line); ``unicodedata`` is imported
only for text that holds a character above U+007F.
"""

_ESCAPED_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs"))


def is_unsafe(ch: str) -> bool:
    """Whether one character must be escaped before it reaches a terminal (the module's rule)."""
    code = ord(ch)
    if code < 0x80:
        return code < 0x20 or code == 0x7F
    import unicodedata

    return unicodedata.category(ch) in _ESCAPED_CATEGORIES


def _escape(ch: str) -> str:
    digits = f"{ord(ch):x}"  # the shortest escape that holds the code: 2, 4 or 8 hex digits
    if len(digits) <= 2:
        return "\\x" + digits.zfill(2)
    if len(digits) <= 4:
        return "\\u" + digits.zfill(4)
    return "\\U" + digits.zfill(8)


def printable(text: object) -> str:
    """``str(text)`` with every unsafe character (the module's rule, line breaks included) escaped."""
    s = str(text)
    if s.isascii() and s.isprintable():
        return s  # the common case, checked in C
    return "".join(_escape(ch) if is_unsafe(ch) else ch for ch in s)


def printable_lines(text: object) -> str:
    """``str(text)`` escaped line by line: each ``\\n`` stays a line break, every other unsafe character
    (``\\r`` included: it would overwrite the line) is escaped."""
    return "\n".join(printable(line) for line in str(text).split("\n"))
