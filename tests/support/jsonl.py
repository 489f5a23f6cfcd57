"""The records of an audit file or a reads log, as a test reads them back.

Both writers (inproc/boot/audit_writer.py and native/src/reads_log.c) start a line that would cross a
4 KiB page boundary on the next page, after a line of spaces, so that a kill never cuts it; the audit's
reader skips such blank lines. A test that parsed every line itself passed only while its file stayed
under a page, and failed in an order where an earlier test left the library more to write (a stray
communicator's tuner answers). Every test that reads such a file reads it here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: str | Path) -> list[Any]:
    """Every record of ``path`` in file order; blank lines (page padding) are skipped, as the audit does."""
    return [json.loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]
