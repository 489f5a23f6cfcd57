"""The one terminal escaper: on generated text, nothing unsafe is left raw, and nothing else is touched.

The reference, written here: the characters the issue names one by one (C0, DEL, C1, the bidirectional
controls, the invisible format characters, the line and paragraph separators) must be escaped; beyond
them, Unicode's own categories of control and format characters decide.
"""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle_nccl.contract.terminal import is_unsafe, printable, printable_lines

NAMED = (
    [chr(c) for c in range(0x20)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]
    + [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]
    + ["\u200e", "\u200f", "\u061c", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u2028", "\u2029"]
)


def reference_unsafe(ch: str) -> bool:
    return ch in NAMED or unicodedata.category(ch) in {"Cc", "Cf", "Zl", "Zp", "Cs"}


def unescape(text: str) -> str:
    return re.sub(r"\\x([0-9a-f]{2})|\\u([0-9a-f]{4})|\\U([0-9a-f]{8})",
                  lambda m: chr(int(next(g for g in m.groups() if g), 16)), text)


TEXT = st.one_of(
    st.text(alphabet=st.sampled_from(NAMED + list("ab \\xé😀\u05d0")), max_size=30),
    st.text(max_size=30),
)


@given(TEXT)
def test_nothing_unsafe_left_raw_and_nothing_else_touched(text):
    out = printable(text)
    assert not any(reference_unsafe(c) for c in out), out
    if not any(reference_unsafe(c) for c in text):
        assert out == text
    if "\\" not in text:  # the escapes say exactly what was there
        assert unescape(out) == text


@given(TEXT)
def test_lines_keep_their_breaks_and_nothing_else(text):
    out = printable_lines(text)
    assert out.split("\n") == [printable(line) for line in text.split("\n")]
    assert not any(reference_unsafe(c) for c in out.replace("\n", ""))


def test_every_named_character_is_unsafe_and_escaped_by_code():
    for ch in NAMED:
        assert is_unsafe(ch), hex(ord(ch))
    assert printable("a\u202eb\x1b[2J\u200b\U000e0001") == "a\\u202eb\\x1b[2J\\u200b\\U000e0001"
    assert printable("\udcff") == "\\udcff"  # an undecodable byte of a file name
    assert printable(5) == "5" and printable("plain ✓ é 😀 שלום") == "plain ✓ é 😀 שלום"


def test_the_boundaries_of_each_escape_width():
    assert printable("\x80\x9f\xff\u0100\u00ad\U00010000\U000e007f") == "\\x80\\x9f\xff\u0100\\xad\U00010000\\U000e007f"
    assert printable(" ~\x7f") == " ~\\x7f"
