"""Gathering a launch's records from every node of a Ray cluster, through Ray itself.

On Ray, SGLang's scheduler actors run on other nodes and write their audit records into the launch
directory *of their node* (the same path, created there under the launch directory's rules). No shared
filesystem is needed to judge the cluster: :func:`collect` runs one small task per alive node, pinned to
it (``NodeAffinitySchedulingStrategy``, no CPU reserved), that reads that node's launch directory the way
``audit`` reads any directory (regular files only, bounded, never following a symlink, only the names a
launch directory holds) and returns the files; the driver writes each node's files into a private
directory of its own, and ``audit`` judges those directories as one launch (processes are told apart by
their whole identity, and a record found on two nodes -- a shared filesystem -- counts once).

Used by ``sglang-eagle-nccl audit --ray ADDRESS DIR`` (for ``RayEngine`` users, after ``shutdown()``) and by
``sglang-eagle-nccl launch`` at exit when SGLang ran on Ray. Ray is imported only here, only when asked.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from sglang_eagle_nccl.contract.files import UnreadableFile, read_regular_file
from sglang_eagle_nccl.contract.launch_dir import (
    DISK_FULL_REQUIRED_SUFFIX,
    DISK_FULL_SUFFIX,
    FILE_PREFIX,
    FILE_SUFFIX,
    LAUNCH_META,
    READS_PREFIX,
    secure_dir,
)

# What one node may send back: a launch directory holds a few hundred small files per node.
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_FILES = 4096


class CollectError(RuntimeError):
    """The records could not be gathered through Ray (no cluster, a node that did not answer ...)."""


@dataclass
class NodeFiles:
    node_id: str
    host: str
    seconds: float
    files: dict[str, bytes] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass
class Collected:
    dest: str
    nodes: list[NodeFiles]
    directories: list[str]
    seconds: float

    def summary(self) -> str:
        per_node = ", ".join(f"{n.host} ({n.node_id[:8]}): {len(n.files)} file(s) in {n.seconds:.2f}s" for n in self.nodes)
        return f"gathered through Ray from {len(self.nodes)} node(s) in {self.seconds:.2f}s: {per_node}"


def _wanted(name: str) -> bool:
    """launch.json, record files, reads logs and their disk-full markers: only what a launch directory holds."""
    return name == LAUNCH_META or (name.endswith((FILE_SUFFIX, DISK_FULL_SUFFIX, DISK_FULL_REQUIRED_SUFFIX))
                                   and name.startswith((FILE_PREFIX, READS_PREFIX)) and "/" not in name)


def read_node(run_dir: str) -> dict[str, Any]:
    """On one node: the launch directory's record files (the body of the per-node task)."""
    started = time.monotonic()
    try:
        import ray

        node_id = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (tests call it directly)
        node_id = "local"
    out: dict[str, Any] = {"node_id": node_id, "host": os.uname().nodename, "files": {}, "problems": []}
    try:
        names = sorted(os.listdir(run_dir))
    except OSError as exc:
        out["problems"].append(f"no launch directory {run_dir} on this node ({exc.strerror or exc})")
        names = []
    for name in names:
        if not _wanted(name):
            continue
        if len(out["files"]) >= MAX_FILES:
            out["problems"].append(f"more than {MAX_FILES} record files: the rest were not sent")
            break
        try:
            out["files"][name] = read_regular_file(os.path.join(run_dir, name), MAX_FILE_BYTES, follow_symlinks=False)
        except UnreadableFile as exc:
            out["problems"].append(f"{name}: {exc.reason}")
    out["seconds"] = time.monotonic() - started
    return out


def collect(run_dir: str, dest: str, *, address: str | None = "auto", timeout_s: float = 120.0) -> Collected:
    """Gather ``run_dir`` from every alive node of the Ray cluster at ``address`` into ``dest/<node>/``.

    Raises CollectError when Ray cannot be reached or a node does not answer in ``timeout_s``.
    """
    if not os.path.isabs(run_dir):
        raise CollectError(f"the launch directory {run_dir!r} must be an absolute path (each node reads it)")
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError as exc:
        raise CollectError(f"Ray is not installed here ({exc}); install the ray version your cluster runs") from None
    started = time.monotonic()
    try:
        if not ray.is_initialized():
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
    except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is one message
        raise CollectError(f"cannot reach the Ray cluster at {address!r}: {exc}") from None
    if not nodes:
        raise CollectError(f"the Ray cluster at {address!r} has no alive node")
    task = ray.remote(num_cpus=0, max_retries=0)(read_node)
    refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)).remote(run_dir)
            for n in nodes]
    try:
        answers = ray.get(refs, timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - GetTimeoutError, a dead node ...
        raise CollectError(f"not every node answered within {timeout_s:.0f}s: {exc}") from None
    secure_dir(dest, create_parents=True)
    gathered, directories = [], []
    for answer in answers:
        node = NodeFiles(str(answer["node_id"]), str(answer["host"]), float(answer["seconds"]),
                         dict(answer["files"]), list(answer["problems"]))
        gathered.append(node)
        if not node.files:
            continue
        where = secure_dir(os.path.join(dest, f"node-{node.node_id[:12]}"), create_parents=False)
        for name, data in node.files.items():
            if not _wanted(name):  # names came back from another process: the same rule again
                continue
            fd = os.open(os.path.join(where, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        directories.append(where)
    return Collected(dest, gathered, directories, time.monotonic() - started)
