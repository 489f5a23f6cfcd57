"""Launch directories written by the real writer, as the processes of a launch would write them.

The judge decides from records; a GPU run, an SGLang launch or a Ray cluster writes them with
:class:`~sglang_eagle_nccl.inproc.boot.audit_writer.AuditWriter` into a directory :func:`open_launch`
created. Here the same writer writes them in this one test process, once per process of the launch:
only the identity it stamps is that process's (host, boot id, PID namespace, pid, start time), so the
files, their names, the encoding and the common fields are exactly what a real process leaves, with the
values a GPU run records (``torch_comm="lazy-nccl"``, PyNccl ``available=True`` ...).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sglang_eagle_nccl.contract import launch_dir
from sglang_eagle_nccl.contract.jsonlight import dumps
from sglang_eagle_nccl.inproc.boot import audit_writer
from sglang_eagle_nccl.offline.audit.records import READS, record_problem
from support.audit_records import ident
from support.jsonl import read_jsonl

Event = tuple[str, Mapping[str, Any]]


@contextmanager
def as_process(pid: int, machine: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Within: the plugin's identity() is that of process ``pid`` (on ``machine``: host, boot_id, pidns)."""
    fake = ident(pid, **(machine or {}))
    saved = launch_dir.identity, audit_writer.identity
    launch_dir.identity = audit_writer.identity = lambda pid=None: dict(fake)  # type: ignore[assignment]
    try:
        yield fake
    finally:
        launch_dir.identity, audit_writer.identity = saved


def new_launch(root: Any, profile: Mapping[str, Any]) -> str:
    """A launch directory as a launcher opens it (``launch.json`` with the resolved profile). The folder above
    the audit root is the test's to make (the plugin never creates a chain of parents)."""
    os.makedirs(os.path.dirname(os.path.abspath(str(root))), exist_ok=True)
    run_dir = launch_dir.open_launch(str(root), {"profile": dict(profile)}, required=True)
    assert run_dir is not None
    return run_dir


def write_process(
    run_dir: str,
    pid: int,
    events: list[Event],
    *,
    role: str = "child",
    machine: Mapping[str, Any] | None = None,
) -> None:
    """Process ``pid`` writes ``events`` (in order) through the real AuditWriter; each must fit the table."""
    with as_process(pid, machine):
        writer = audit_writer.AuditWriter(run_dir, role=role)
        try:
            for event, fields in events:
                assert writer.write(event, **fields), writer.failure
        finally:
            writer.close()
    path = os.path.join(run_dir, launch_dir.process_file_name(ident(pid, **(machine or {}))))
    for record in read_jsonl(path):
        assert record_problem(record) is None, (record_problem(record), record)


def write_reads_log(
    run_dir: str, pid: int, lines: list[Mapping[str, Any]], *, machine: Mapping[str, Any] | None = None
) -> str:
    """Process ``pid``'s NCCL reads log: the identity line Python writes, then the C library's lines
    (event, pid, time + fields), in a file created under the launch directory's rules. Returns its name
    (the process declares it with an ``nccl_reads_log`` record)."""
    who = ident(pid, **(machine or {}))
    name = launch_dir.reads_file_name(who)
    fd = launch_dir.open_record_file(run_dir, name)
    body = [{"event": "reads_log", "time": 1.0, **who}] + [
        {"pid": pid, "time": 1.0, **line} for line in lines
    ]
    for record in body:
        assert READS.problem(record) is None, (READS.problem(record), record)
    try:
        os.write(fd, "".join(dumps(r) + "\n" for r in body).encode("utf-8"))
    finally:
        os.close(fd)
    return name
