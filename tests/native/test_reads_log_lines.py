"""The reads log's lines are whole or absent (issue 24 item 5; native/src/reads_log.c: write_line_locked).

Rule: every line of up to a page lies inside one page of the file (a kill stops a write between two pages
only), the padding that moves it there is one blank line the reader skips, and lines queued before the
log was opened are written one by one under the same rule. Checked on the real library's log against
that rule, for values of every length around a page.
"""

from __future__ import annotations

import os

from test_native_env import NAME, cenv, open_log  # noqa: F401 - cenv is a fixture

from sglang_eagle_nccl.offline.audit.records import READS, parse_file

PAGE = 4096


def _check_pages(data: bytes) -> int:
    pos, whole = 0, 0
    for raw in data.split(b"\n")[:-1]:
        end = pos + len(raw) + 1
        if raw.strip():
            whole += 1
            if len(raw) + 1 <= PAGE:  # a line (its newline included) that fits in a page sits in one
                assert pos // PAGE == (end - 1) // PAGE, f"line at {pos}..{end} crosses a page boundary"
        else:
            assert set(raw) <= {ord(" ")}  # padding: spaces, then its newline
        pos = end
    assert pos == len(data)  # nothing after the last newline: no cut line
    return whole


def test_reads_log_lines_never_cross_a_page_boundary(lib, cenv, tmp_path):  # noqa: F811
    lib.configure_env({NAME: "lo"})
    lengths = [300 + (i * 613) % 4200 for i in range(40)]  # around and past one page
    cenv(NAME, b"a" * 10)
    lib.plugin_get_env(NAME, 2)  # queued before the log is opened
    for i, n in enumerate(lengths[:10]):
        cenv(NAME, (b"q%d" % i) * (n // 3))
        lib.plugin_get_env(NAME, 2)
    log = open_log(lib, tmp_path)  # the queued lines go out now, one by one
    for i, n in enumerate(lengths[10:]):
        cenv(NAME, (b"w%d" % i) * (n // 3))
        lib.plugin_get_env(NAME, 2)
    assert lib.reads_log_error() is None
    data = log.read_bytes()
    assert _check_pages(data) == 1 + len(lengths)
    parsed = parse_file(data, log.name, READS)
    assert parsed.bad_lines == 0 and parsed.cut is None and len(parsed.records) == len(lengths) + 1
    assert os.path.getsize(log) > 40 * 300
