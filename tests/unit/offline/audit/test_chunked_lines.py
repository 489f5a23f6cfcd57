"""The reader splits a file a chunk at a time, and the chunks change nothing (offline/audit/records.py).

Rules, for any bytes and any chunk size (the shipped one is 1 MiB, so the tests shrink it to a few bytes to
make a file of a few lines cross many chunks, and a line longer than a chunk common):

1. What a file holds is what its lines hold, each read on its own: the same records in file order (with
   ``unique``, a line repeating an earlier valid line is kept once), the bad lines numbered from 1 across
   the whole file, the first ``LISTED_PER_FILE`` of them listed and the rest counted in one entry, blank
   lines nothing, and the bytes after the last newline the cut line: its offset and size, whether they
   hold a whole record, and the process the last record names.
2. A chunk holds at most a chunk's bytes of whole lines, as many as fit, in file order; a line longer
   than a chunk is a chunk of its own (memory stays bounded by the chunk, not by the number of lines).
   Seen through the lines the reader charges to the audit's budget, one charge per chunk.

The reference reads each line on its own (``parse_file`` of that one line, where no chunking can happen)
and packs the chunks line by line; both are written here, apart from the reader's byte searches.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.contract import events
from sglang_eagle_nccl.offline.audit import records
from sglang_eagle_nccl.offline.audit.records import (
    LISTED_PER_FILE,
    READS,
    RECORDS,
    Budget,
    Unreadable,
    parse_file,
)
from support.record_lines import lines

TABLES = {"records": (RECORDS, events.COMMON, events.EVENTS), "reads": (READS, events.READS_COMMON, events.READS_EVENTS)}
# Each table read by msgspec where it can (the fast reader) and by the json module alone.
READERS = [pytest.param(name, fast, id=f"{name}-{'fast' if fast else 'plain'}")
           for name in TABLES for fast in (True, False)]


def _schema(name: str, fast: bool) -> records.Schema:
    schema = TABLES[name][0]
    assert schema.fast, "msgspec is not installed: pip install -e '.[test]' (the test extra brings it)"
    return schema if fast else replace(schema, fast={}, fast_checks={})


def _file(name: str):
    """A file's bytes: generated lines of the table (valid and spoilt), blank and padding lines, bytes that
    are not UTF-8, a valid line repeated; any of them possibly left without its newline at the end."""
    _, common, table = TABLES[name]
    line = st.one_of(
        lines(common, table).map(lambda text: text.encode("utf-8", "surrogatepass")),
        st.sampled_from([b"", b" " * 7, b" " * 300, b"\t \r", b"\xff\xfe{", b"not a record", b"{" + b"x" * 90]),
    )
    return st.builds(
        lambda body, repeat, tail: b"\n".join(body + [body[i % len(body)] for i in repeat]) + (b"" if tail else b"\n"),
        st.lists(line, min_size=1, max_size=2 * LISTED_PER_FILE + 4), st.lists(st.integers(0, 40), max_size=3),
        st.booleans(),
    )


def _process(record: dict) -> str | None:
    keys = ("host", "boot_id", "pidns", "pid", "start")
    return "/".join(str(record.get(k)) for k in keys) if "start" in record else None


def _expected(data: bytes, schema: records.Schema, unique: bool) -> dict:
    """Rule 1's reference: every complete line read alone, then put together."""
    *complete, tail = data.split(b"\n")
    kept: list[dict] = []
    bad: list[tuple[int, str]] = []
    seen: set[bytes] = set()
    for number, raw in enumerate(complete, 1):
        alone = parse_file(raw + b"\n", "f.jsonl", schema)
        assert len(alone.records) + alone.bad_lines <= 1 and alone.cut is None
        if alone.bad:
            bad.append((number, alone.bad[0].reason))
        elif alone.records and not (unique and raw in seen):
            seen.add(raw)
            kept.append(alone.records[0])
    listed = [Unreadable("f.jsonl", n, why) for n, why in bad[:LISTED_PER_FILE]]
    if len(bad) > LISTED_PER_FILE:
        listed.append(Unreadable("f.jsonl", None, f"... and {len(bad) - LISTED_PER_FILE} more unreadable line(s) "
                                                  f"(the first {LISTED_PER_FILE} are listed)"))
    cut = None
    if tail.strip():
        whole = parse_file(tail + b"\n", "f.jsonl", schema).records
        kept += whole
        cut = records.CutLine("f.jsonl", len(data) - len(tail), len(tail), bool(whole),
                              _process(kept[-1]) if kept else None)
    return {"records": [json.dumps(r, sort_keys=True) for r in kept], "bad": listed, "bad_lines": len(bad),
            "cut": cut}


def _chunks(data: bytes, chunk: int) -> list[int]:
    """Rule 2's reference: the number of lines in each chunk, packing whole lines (newline included)."""
    sizes = [len(raw) + 1 for raw in data.split(b"\n")[:-1]]
    out: list[int] = []
    i = 0
    while i < len(sizes):
        n, used = 1, sizes[i]  # the first line goes in however long it is
        while i + n < len(sizes) and used + sizes[i + n] <= chunk:
            used += sizes[i + n]
            n += 1
        out.append(n)
        i += n
    return out


class _Charges(Budget):
    """The audit's budget, remembering each charge of lines (the reader charges one per chunk)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[int] = []

    def take(self, kind: str, amount: int) -> None:
        if kind == "lines":
            self.lines.append(amount)
        super().take(kind, amount)


@pytest.mark.parametrize("name, fast", READERS)
def test_any_chunk_size_reads_a_file_as_its_lines_read_one_by_one(name, fast):
    schema = _schema(name, fast)

    @settings(max_examples=250, deadline=None)
    @given(_file(name), st.integers(1, 400) | st.just(records._CHUNK), st.booleans())
    def check(data, chunk, unique):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(records, "_CHUNK", chunk)
            budget = _Charges()
            got = parse_file(data, "f.jsonl", schema, budget=budget, unique=unique)
        want = _expected(data, schema, unique)
        assert [json.dumps(r, sort_keys=True) for r in got.records] == want["records"]
        assert (got.bad, got.bad_lines, got.cut) == (want["bad"], want["bad_lines"], want["cut"])
        # Rule 2: one charge per chunk, each chunk as the reference packs it.
        assert budget.lines == _chunks(data, chunk), (chunk, data)
        assert budget.used["records"] == len(got.records) - (1 if got.cut and got.cut.whole_record else 0)

    check()


def test_the_reference_packs_as_the_rule_says():
    # The packing reference on hand-made files: 3-byte lines ("ab\n") in 7-byte chunks go two by two;
    # a 9-byte line is a chunk of its own; a chunk of 1 byte holds one line each.
    assert _chunks(b"ab\n" * 5, 7) == [2, 2, 1]
    assert _chunks(b"ab\n" + b"x" * 8 + b"\nab\nab\n", 7) == [1, 1, 2]
    assert _chunks(b"a\nbb\n\nc", 1) == [1, 1, 1]
    assert _chunks(b"no newline", 7) == []
