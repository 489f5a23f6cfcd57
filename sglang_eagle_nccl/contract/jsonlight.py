"""JSON without ``import json``, for the interpreter-start path.

The standard ``json`` module imports ``re`` (and with it ``enum``, ``functools``,
``collections``): several milliseconds in every process SGLang spawns, just to read the
serialised profile and write one audit record. This module reads and writes the JSON the
plugin itself produces (objects, arrays, strings, numbers, booleans, null), following RFC 8259;
anything it cannot read makes the caller fall back to the standard module. Tested against
``json`` with random documents.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_UNESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WS = " \t\n\r"
_DIGITS = "0123456789"  # JSON digits are ASCII only (str.isdigit() also accepts "٣")
# Bounds that keep hostile input from reaching RecursionError or int()'s digit limit (4300):
# the plugin's own documents nest a few levels and hold small numbers.
MAX_DEPTH = 100
MAX_NUMBER_CHARS = 400


class JSONLightError(ValueError):
    pass


def _str(s: str) -> str:
    if s.isprintable() and '"' not in s and "\\" not in s:
        # Nothing to escape (no quote, backslash or control character): the common case, and the
        # loop below costs ~4 ms per audit record at interpreter start.
        return '"' + s + '"'
    out = []
    for ch in s:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def dumps(obj: "Any") -> str:
    """Compact JSON with sorted keys; non-JSON values become their ``str()``."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return int.__repr__(obj)
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return "null"
        return float.__repr__(obj)
    if isinstance(obj, str):
        return _str(obj)
    if isinstance(obj, dict):
        items = sorted((str(k), v) for k, v in obj.items())
        return "{" + ",".join(_str(k) + ":" + dumps(v) for k, v in items) + "}"
    if isinstance(obj, (list, tuple, set, frozenset)):
        seq = sorted(obj, key=str) if isinstance(obj, (set, frozenset)) else obj
        return "[" + ",".join(dumps(v) for v in seq) + "]"
    return _str(str(obj))


class _Reader:
    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self.depth = 0

    def ws(self) -> None:
        s, i = self.s, self.i
        while i < len(s) and s[i] in _WS:
            i += 1
        self.i = i

    def fail(self, what: str) -> "JSONLightError":
        return JSONLightError(f"{what} at offset {self.i}")

    def value(self) -> "Any":
        self.ws()
        if self.i >= len(self.s):
            raise self.fail("unexpected end")
        ch = self.s[self.i]
        if ch in "{[":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(f"nested more than {MAX_DEPTH} levels deep")
            try:
                return self.obj() if ch == "{" else self.arr()
            finally:
                self.depth -= 1
        if ch == '"':
            return self.string()
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return val
        return self.number()

    def obj(self) -> "dict[str, Any]":
        self.i += 1
        out: dict[str, Any] = {}
        self.ws()
        if self.s.startswith("}", self.i):
            self.i += 1
            return out
        while True:
            self.ws()
            if not self.s.startswith('"', self.i):
                raise self.fail("expected a string key")
            key = self.string()
            self.ws()
            if not self.s.startswith(":", self.i):
                raise self.fail("expected ':'")
            self.i += 1
            out[key] = self.value()
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("}", self.i):
                self.i += 1
                return out
            raise self.fail("expected ',' or '}'")

    def arr(self) -> "list[Any]":
        self.i += 1
        out: list[Any] = []
        self.ws()
        if self.s.startswith("]", self.i):
            self.i += 1
            return out
        while True:
            out.append(self.value())
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("]", self.i):
                self.i += 1
                return out
            raise self.fail("expected ',' or ']'")

    def _hex4(self) -> int:
        h = self.s[self.i : self.i + 4]
        if len(h) != 4 or any(c not in "0123456789abcdefABCDEF" for c in h):
            raise self.fail("bad \\u escape")
        self.i += 4
        return int(h, 16)

    def string(self) -> str:
        s = self.s
        self.i += 1
        out = []
        start = self.i
        while True:
            if self.i >= len(s):
                raise self.fail("unterminated string")
            ch = s[self.i]
            if ch == '"':
                out.append(s[start : self.i])
                self.i += 1
                return "".join(out)
            if ch == "\\":
                out.append(s[start : self.i])
                esc = s[self.i + 1 : self.i + 2]
                self.i += 2
                if esc == "u":
                    code = self._hex4()
                    if 0xD800 <= code < 0xDC00 and s.startswith("\\u", self.i):
                        self.i += 2
                        low = self._hex4()
                        if 0xDC00 <= low < 0xE000:
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        else:
                            out.append(chr(code))
                            code = low
                    out.append(chr(code))
                elif esc in _UNESCAPES:
                    out.append(_UNESCAPES[esc])
                else:
                    raise self.fail("bad escape")
                start = self.i
                continue
            if ch < " ":
                raise self.fail("control character in string")
            self.i += 1

    def number(self) -> int | float:
        s, start = self.s, self.i
        i = start
        if i < len(s) and s[i] == "-":
            i += 1
        digits = i
        while i < len(s) and s[i] in _DIGITS:
            i += 1
        if i == digits:
            raise self.fail("unexpected character")
        is_float = False
        if i < len(s) and s[i] == ".":
            is_float = True
            i += 1
            while i < len(s) and s[i] in _DIGITS:
                i += 1
        if i < len(s) and s[i] in "eE":
            is_float = True
            i += 1
            if i < len(s) and s[i] in "+-":
                i += 1
            while i < len(s) and s[i] in _DIGITS:
                i += 1
        text = s[start:i]
        if len(text) > MAX_NUMBER_CHARS:
            raise self.fail(f"number longer than {MAX_NUMBER_CHARS} characters")
        self.i = i
        return float(text) if is_float else int(text)


def loads(text: str) -> "Any":
    reader = _Reader(text)
    value = reader.value()
    reader.ws()
    if reader.i != len(text):
        raise reader.fail("extra data")
    return value
