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

**Never waits forever.** Each network step -- reaching the cluster (a TCP connection to its address, then
``ray.init``), asking for its nodes and starting the per-node tasks, gathering their answers -- has the same
deadline (``--ray-timeout``, :data:`DEFAULT_TIMEOUT_S`). ``ray.init`` has no connect timeout of its own, so it
runs in a helper thread that is abandoned when the deadline passes (:func:`within`); the error names the
address and the deadline (``audit`` exit 2).

**Only the launch's own cluster.** ``--ray auto`` attaches only to the cluster the launch recorded: the
driver's ``ray_actor_env`` records name the GCS address of the cluster its actors went to
(``ray_cluster``). No such record, or several clusters, and ``auto`` refuses, naming the clusters it saw on
this machine (``RAY_ADDRESS``, Ray's current-cluster file) so the user can give one (:func:`choose_address`).
Whichever way it was chosen, a connection that turns out to be another cluster is refused, and the summary
names the cluster it read.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
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
# Per network step (README: `audit --ray-timeout`): a launch directory of a few hundred files per node
# comes back in seconds; a minute means the cluster is not answering.
DEFAULT_TIMEOUT_S = 60.0
AUTO = "auto"


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
    cluster: str = ""  # the GCS address of the cluster read

    def summary(self) -> str:
        per_node = ", ".join(f"{n.host} ({n.node_id[:8]}): {len(n.files)} file(s) in {n.seconds:.2f}s" for n in self.nodes)
        return (f"gathered through the Ray cluster at {self.cluster or 'an unnamed address'} from {len(self.nodes)} "
                f"node(s) in {self.seconds:.2f}s: {per_node}")


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


def recorded_clusters(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """The Ray clusters (GCS addresses) that the launch's ``ray_actor_env`` records name, sorted."""
    return sorted({str(r["ray_cluster"]) for r in records
                   if r.get("event") == "ray_actor_env" and isinstance(r.get("ray_cluster"), str) and r["ray_cluster"]})


def launch_clusters(run_dir: str) -> list[str]:
    """:func:`recorded_clusters` of the launch directory here (the driver's node); none when it cannot be read."""
    from sglang_eagle_nccl.offline.audit.read import CannotJudge, read_launch_records

    try:
        launch = read_launch_records(run_dir)
    except (CannotJudge, OSError):
        return []
    return recorded_clusters(r for p in launch.processes for r in p.records)


def clusters_seen(environ: Mapping[str, str], current_file: str) -> list[str]:
    """The clusters this machine points at (for the message only): ``RAY_ADDRESS`` and Ray's current-cluster file."""
    seen = {environ["RAY_ADDRESS"].strip()} if environ.get("RAY_ADDRESS", "").strip() else set()
    try:
        text = read_regular_file(current_file, 4096, follow_symlinks=False).decode("utf-8", "replace")
    except UnreadableFile:
        text = ""
    seen.update(line.strip() for line in text.splitlines()[:1] if line.strip())
    return sorted(seen)


def current_cluster_file(environ: Mapping[str, str]) -> str:
    """Where Ray writes the address of the cluster last started on this machine, by Ray's own rule
    (ray._common.utils, Ray 2.x): ``<system temp>/ray/ray_current_cluster``, the system temp being
    ``RAY_TMPDIR``, else ``TMPDIR`` on Linux, else the root's ``tmp`` (Ray does not ask tempfile there)."""
    system_temp = environ.get("RAY_TMPDIR") or (
        environ.get("TMPDIR") if sys.platform.startswith("linux") else None) or os.path.join(os.sep, "tmp")
    return os.path.join(system_temp, "ray", "ray_current_cluster")


def choose_address(requested: str, recorded: list[str], seen: list[str]) -> str:
    """The address to attach to: the one given, or for ``auto`` the one cluster the launch recorded (else refused)."""
    if requested != AUTO:
        return requested
    if len(recorded) == 1:
        return recorded[0]
    saw = ", ".join(seen) if seen else "none"
    if not recorded:
        raise CollectError(
            "--ray auto attaches only to the Ray cluster the launch recorded, and this launch's records name none "
            f"(clusters seen on this machine: {saw}). Fix: give the cluster's address: --ray HOST:PORT")
    raise CollectError(
        f"the launch's records name {len(recorded)} Ray clusters ({', '.join(recorded)}): --ray auto will not choose "
        f"(clusters seen on this machine: {saw}). Fix: give the one to read: --ray HOST:PORT")


def split_address(address: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (``[v6]:PORT`` too) as (host, port); None for anything else (``ray://...``: not probed)."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return (host, int(port)) if host else None


def probe(address: str, timeout_s: float) -> None:
    """A TCP connection to the cluster's address within the deadline (refused, unroutable: said at once)."""
    where = split_address(address)
    if where is None:
        return
    try:
        socket.create_connection(where, timeout=timeout_s).close()
    except OSError as exc:
        raise CollectError(f"cannot reach the Ray cluster at {address} within {timeout_s:g}s (--ray-timeout): "
                           f"{exc.strerror or str(exc) or 'timed out'}") from None


def within(timeout_s: float, what: str, step: Callable[[], Any]) -> Any:
    """``step()`` in a helper thread, abandoned (it is a daemon) when it does not finish within the deadline."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["value"] = step()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            done["error"] = exc

    helper = threading.Thread(target=run, name=f"sglang-eagle-nccl: {what}", daemon=True)
    helper.start()
    helper.join(timeout_s)
    if helper.is_alive():
        raise CollectError(f"{what}: no answer within {timeout_s:g}s (--ray-timeout); gave up waiting")
    if "error" in done:
        raise done["error"]
    return done["value"]


def collect(run_dir: str, dest: str, *, address: str | None = AUTO, timeout_s: float = DEFAULT_TIMEOUT_S,
            environ: Mapping[str, str] | None = None) -> Collected:
    """Gather ``run_dir`` from every alive node of the Ray cluster at ``address`` into ``dest/<node>/``.

    Raises CollectError when Ray cannot be reached within ``timeout_s`` (each step), ``auto`` finds no cluster
    recorded by the launch, or a node does not answer in time.
    """
    if not os.path.isabs(run_dir):
        raise CollectError(f"the launch directory {run_dir!r} must be an absolute path (each node reads it)")
    if not timeout_s > 0:
        raise CollectError(f"the Ray timeout must be a positive number of seconds, not {timeout_s!r}")
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError as exc:
        raise CollectError(f"Ray is not installed here ({exc}); install the ray version your cluster runs") from None
    environ = os.environ if environ is None else environ
    requested = address or AUTO
    recorded = launch_clusters(run_dir) if requested == AUTO else []
    started = time.monotonic()
    if ray.is_initialized():  # the launcher's own connection (launch at exit): its cluster, checked below
        chosen = requested if requested != AUTO else None
    else:
        chosen = choose_address(requested, recorded, clusters_seen(environ, current_cluster_file(environ)))
        probe(chosen, timeout_s)
        try:
            within(timeout_s, f"connecting to the Ray cluster at {chosen}",
                   lambda: ray.init(address=chosen, logging_level="ERROR", log_to_driver=False))
        except CollectError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is one message
            raise CollectError(f"cannot reach the Ray cluster at {chosen!r}: {exc}") from None
    cluster = _connected_cluster(ray) or chosen or ""
    if requested == AUTO and recorded and cluster not in recorded:
        raise CollectError(f"connected to the Ray cluster at {cluster}, not the one the launch recorded "
                           f"({', '.join(recorded)}). Fix: give the address: --ray HOST:PORT")
    try:
        nodes = within(timeout_s, f"asking the Ray cluster at {cluster} for its nodes",
                       lambda: [n for n in ray.nodes() if n.get("Alive")])
    except CollectError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise CollectError(f"cannot list the nodes of the Ray cluster at {cluster}: {exc}") from None
    if not nodes:
        raise CollectError(f"the Ray cluster at {cluster} has no alive node")
    task = ray.remote(num_cpus=0, max_retries=0)(read_node)
    refs = within(timeout_s, f"starting one task per node of the Ray cluster at {cluster}", lambda: [
        task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)).remote(run_dir)
        for n in nodes])
    try:
        answers = ray.get(refs, timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - GetTimeoutError, a dead node ...
        raise CollectError(f"not every node of the Ray cluster at {cluster} answered within {timeout_s:g}s "
                           f"(--ray-timeout): {exc}") from None
    return _store(answers, dest, cluster, time.monotonic() - started)


def _connected_cluster(ray: Any) -> str | None:
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # noqa: BLE001 - an older Ray without it: the address given names the cluster
        return None


def _store(answers: list[dict[str, Any]], dest: str, cluster: str, seconds: float) -> Collected:
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
    return Collected(dest, gathered, directories, seconds, cluster)
