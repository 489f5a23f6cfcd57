"""Parse NCCL debug output into what each process logged: the variables NCCL says it read, its
communicators, warnings and tuning tables. Judging those reads is :mod:`.debug_log_check`.

Input: files written with ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING
NCCL_DEBUG_FILE=<dir>/nccl.%h.%p.log`` (one file per process), or any stderr/stdout
capture in which NCCL lines are interleaved with other output, or even glued together
mid-line by concurrent writers.

What NCCL prints, and what this module relies on (NCCL ``src/debug.cc``, 2.18 -> 2.32):

* every INFO/WARN line carries the prefix ``host:pid:tid [cudaDev] NCCL INFO <msg>``;
  WARN lines are ``[timestamp] host:pid:tid [cudaDev] file.cc:LINE [(func) ]NCCL WARN <msg>``
  (timestamps on WARN by default from 2.23; ``(func)`` from 2.28+/2.30); the hostname is cut
  at the first ``.``; ``NCCL_DEBUG_FILE`` expands ``%h``/``%p`` to the same host and pid;
* ``NCCL_X set by environment to V.`` is logged once per process at the first read of an
  ``NCCL_PARAM`` (``misc/param.cc`` ``ncclLoadParam``; V is the value *as parsed by strtoll*,
  so ``4M`` is printed as ``4``); ad-hoc readers print their own variants
  (``NCCL_PROTO set by environment to %s`` per communicator, ``NCCL_P2P_LEVEL set by environment
  to PXB`` with the level normalised to its name, ``NCCL_SOCKET_IFNAME set to lo``...).
  Values coming from ``NCCL_CONF_FILE``/``~/.nccl.conf``/``/etc/nccl.conf`` are injected with
  setenv and are reported exactly like environment values: NCCL never says which it was;
* per communicator: ``[...] <func> comm 0x.. rank R nranks N cudaDev D nvmlDev M busId B
  commId 0x.. - Init START`` / ``... - Init COMPLETE`` (splits: ``parent 0x.. splitCount|childCount
  K color C key K``), ``Comm config <field> set to <v>`` (logged by the calling thread *before*
  Init START), ``Enabled NCCL Func/Proto/Algo Matrix:`` followed by unprefixed table lines,
  ``<n> coll channels, <n> collnet channels, ...``, ``P2P Chunksize set to <n>``.

Only the standard library is used. ``python -m sglang_eagle_nccl.knowledge.nccl.debug_log DIR|FILE...``
prints the parsed processes as JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ConfigSetting",
    "CommInit",
    "EnvReport",
    "MatrixRow",
    "NcclProcessLog",
    "TuningMatrix",
    "WarnLine",
    "merge_logs",
    "parse_dir",
    "parse_file",
    "parse_text",
    "pid_host_from_filename",
]

# --------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvReport:
    """One line in which NCCL states the value it took for an ``NCCL_*`` variable.

    ``source``: ``"environment"`` (``X set by environment to V``), ``"set"`` (``X set to V``),
    ``"comm_config_override"`` (2.28+ ``Comm config f reset to X=V``) or ``"plugin"`` (a net
    plugin such as aws-ofi-nccl logging ``Adding X=V to environment``). NCCL does not tell
    environment and conf-file values apart. ``raw`` is the text after "to"; ``value`` drops the
    trailing ``.`` that some formats add. ``comm`` is the communicator whose init was running
    in the same thread, if any.
    """

    name: str
    value: str
    raw: str
    source: str
    line_no: int
    tid: int | None = None
    comm: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _asdict(self)


@dataclass(frozen=True)
class ConfigSetting:
    """``Comm config <field> set to <value>`` (or ``reset to NCCL_Y=V``) for one communicator."""

    field: str
    value: str
    line_no: int
    env_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _asdict(self)


@dataclass(frozen=True)
class MatrixRow:
    function: str
    protocols: tuple[tuple[str, int], ...]
    algorithms: tuple[tuple[str, int], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "protocols": dict(self.protocols),
            "algorithms": dict(self.algorithms),
        }


@dataclass(frozen=True)
class TuningMatrix:
    """``Enabled NCCL Func/Proto/Algo Matrix`` (NCCL >= 2.24, rank 0, only when PROTO/ALGO set).

    Values: 0 disabled, 1 enabled, 2 "auto" (LL128 default, decided later by NCCL).
    ``complete`` is False when rows were cut by interleaved output and could not be rebuilt.
    """

    protocols: tuple[str, ...]
    algorithms: tuple[str, ...]
    rows: tuple[MatrixRow, ...]
    complete: bool

    def enabled(self, function: str, name: str) -> int | None:
        """Value for protocol or algorithm ``name`` of ``function`` (case-insensitive)."""
        for row in self.rows:
            if row.function.lower() != function.lower():
                continue
            for key, val in row.protocols + row.algorithms:
                if key.lower() == name.lower():
                    return val
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocols": list(self.protocols),
            "algorithms": list(self.algorithms),
            "rows": [r.to_dict() for r in self.rows],
            "complete": self.complete,
        }


@dataclass(frozen=True)
class CommInit:
    """One communicator init as seen in one process (one rank of that communicator)."""

    comm: str
    rank: int
    nranks: int
    cuda_dev: int
    bus_id: str
    func: str | None = None
    nvml_dev: int | None = None
    comm_id: str | None = None
    parent: str | None = None
    split_count: int | None = None
    color: int | None = None
    key: int | None = None
    tid: int | None = None
    started: bool = False
    completed: bool = False
    destroyed: str | None = None
    n_nodes: int | None = None
    local_ranks: int | None = None
    network: str | None = None
    channels: tuple[tuple[str, int], ...] = ()
    p2p_chunksize: int | None = None
    matrix: TuningMatrix | None = None
    configs: tuple[ConfigSetting, ...] = ()
    env: tuple[EnvReport, ...] = ()
    start_line: int | None = None
    complete_line: int | None = None

    @property
    def is_split(self) -> bool:
        return self.parent is not None

    def channel_count(self, kind: str = "coll") -> int | None:
        """``coll``, ``collnet``, ``nvls``, ``p2p`` or ``p2p_per_peer``."""
        return dict(self.channels).get(kind)

    def to_dict(self) -> dict[str, Any]:
        d = _asdict(self)
        d["channels"] = dict(self.channels)
        d["matrix"] = self.matrix.to_dict() if self.matrix else None
        d["configs"] = [c.to_dict() for c in self.configs]
        d["env"] = [e.to_dict() for e in self.env]
        return d


@dataclass(frozen=True)
class WarnLine:
    message: str
    line_no: int
    tid: int | None = None
    cuda_dev: int | None = None
    src_file: str | None = None
    src_line: int | None = None
    func: str | None = None
    timestamp: str | None = None
    level: str = "WARN"

    def to_dict(self) -> dict[str, Any]:
        return _asdict(self)


@dataclass(frozen=True)
class NcclProcessLog:
    """Everything NCCL logged in one process (host, pid)."""

    host: str
    pid: int
    sources: tuple[str, ...] = ()
    version: str | None = None
    cuda_version: str | None = None
    env_reports: tuple[EnvReport, ...] = ()
    comms: tuple[CommInit, ...] = ()
    warnings: tuple[WarnLine, ...] = ()
    unattached_configs: tuple[ConfigSetting, ...] = ()
    tids: tuple[int, ...] = ()
    n_lines: int = 0

    @property
    def env(self) -> dict[str, str]:
        """Variable -> value NCCL reported (the last report wins)."""
        return {r.name: r.value for r in self.env_reports}

    def env_values(self, name: str) -> tuple[str, ...]:
        """Distinct values NCCL reported for ``name``, in order of appearance."""
        out: list[str] = []
        for r in self.env_reports:
            if r.name == name and r.value not in out:
                out.append(r.value)
        return tuple(out)

    def comm(self, pointer: str) -> CommInit | None:
        """The last communicator with that pointer (pointers can be reused after destroy)."""
        for c in reversed(self.comms):
            if c.comm == pointer:
                return c
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "pid": self.pid,
            "sources": list(self.sources),
            "version": self.version,
            "cuda_version": self.cuda_version,
            "env": self.env,
            "env_reports": [r.to_dict() for r in self.env_reports],
            "comms": [c.to_dict() for c in self.comms],
            "warnings": [w.to_dict() for w in self.warnings],
            "unattached_configs": [c.to_dict() for c in self.unattached_configs],
            "tids": list(self.tids),
            "n_lines": self.n_lines,
        }


def _asdict(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


# --------------------------------------------------------------------------------------
# Line grammar
# --------------------------------------------------------------------------------------

# host:pid:tid [dev] [file:line [(func)] | elapsed func:line] NCCL LEVEL
_PREFIX_RE = re.compile(
    r"(?P<host>[^\s:\[\]]+):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) "
    r"(?:\[(?P<dev>-?\d{1,4})\] )?"
    r"(?:(?P<src>[\w./+-]+):(?P<srcline>\d+) (?:\((?P<func>[^()\s]*)\) )?"
    r"|(?P<elapsed>\d+\.\d+) (?P<tfunc>[^\s:]+):(?P<tline>\d+) )?"
    r"NCCL (?P<level>INFO|WARN|TRACE|CALL|ATTN|ABORT)(?= |$)"
)
_TIMESTAMP_TAIL_RE = re.compile(r"\[(?P<ts>[^\[\]]{1,64})\] ?$")
_CLEAN_HEAD_RE = re.compile(r"^\s*(?:\[[^\[\]]{1,64}\] ?)?$")

_NAME = r"NCCL_[A-Z0-9_]+"
_ENV_RE = re.compile(rf"^(?P<name>{_NAME}) set by environment to (?P<raw>.*)$")
_SET_TO_RE = re.compile(rf"^(?P<name>{_NAME}) set to (?P<raw>.*)$")
_PLUGIN_ADD_RE = re.compile(rf"\bAdding (?P<name>{_NAME})=(?P<raw>.*) to environment$")
_CONFIG_RE = re.compile(r"^Comm config (?P<field>.+?) set to (?P<value>.*)$")
_CONFIG_RESET_RE = re.compile(
    rf"^Comm config (?P<field>\S+) reset to (?:(?P<cfg>\S+) by )?(?P<name>{_NAME})=(?P<value>.*)$"
)
_VERSION_RE = re.compile(r"^NCCL version (?P<version>\d+\.\d+\.\d+[^\s+]*)(?:\+cuda(?P<cuda>[\d.]+))?")
_PTR = r"0x[0-9a-fA-F]+|\(nil\)"
_INIT_RE = re.compile(
    r"^(?:\[Rank -?\d+\] )?(?:(?P<func>nccl\w+) )?"
    rf"comm (?P<comm>{_PTR}) rank (?P<rank>-?\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>-?\d+) "
    r"(?:nvmlDev (?P<nvml>-?\d+) )?busId (?P<busid>[0-9a-fA-F]+)"
    rf"(?: parent (?P<parent>{_PTR})(?: (?:splitCount|childCount) (?P<count>-?\d+))?"
    r" color (?P<color>-?\d+) key (?P<key>-?\d+))?"
    r"(?: commId (?P<commid>0x[0-9a-fA-F]+))?"
    r" ?- Init (?P<phase>START|COMPLETE)\s*$"
)
_DESTROY_RE = re.compile(
    rf"^comm (?P<comm>{_PTR}) rank -?\d+ nranks \d+ cudaDev -?\d+ busId [0-9a-fA-F]+ - "
    r"(?P<what>Destroy|Abort) COMPLETE"
)
_COMM_TOPO_RE = re.compile(
    rf"^comm (?P<comm>{_PTR}) rank -?\d+ nRanks \d+ nNodes (?P<nnodes>\d+) localRanks (?P<local>\d+)"
)
_CHANNELS_RE = re.compile(r"^\d+ coll channels")
_CHANNEL_ITEM_RE = re.compile(r"(\d+) (coll|collnet|nvls|p2p) channels( per peer)?")
_CHUNK_RE = re.compile(r"^P2P Chunksize set to (?P<n>\d+)\s*$")
_NETWORK_RE = re.compile(r"^Using network (?P<net>\S.*?)\s*$")
_MATRIX_START_RE = re.compile(r"^Enabled NCCL Func/Proto/Algo Matrix:")
# Table lines may carry a launcher tag in front ("[1,0]<stdout>:", "(TP0 pid=7) ").
_MATRIX_HEADER_RE = re.compile(r"(?:^|[\s:>)\]])Function\s*\|(?P<p>[^|]*)\|(?P<a>[^|]*)$")
_MATRIX_ROW_RE = re.compile(r"(?:^|[\s:>)\]])(?P<f>[A-Z][A-Za-z]*)\s*\|(?P<p>[\s\d]*)\|(?P<a>[\s\d]*)$")
_MATRIX_PARTIAL_RE = re.compile(r"(?:^|[\s:>)\]])[A-Z][A-Za-z]*\s*\|[\s\d|]*$")
_DIGITS_ONLY_RE = re.compile(r"^[\s\d]+$")

# cgaClusterSize is reset "to NCCL_MAX_CGA_CLUSTER_SIZE=%d" although the variable read is this one
_CONFIG_ENV_ALIASES = {"NCCL_MAX_CGA_CLUSTER_SIZE": "NCCL_CGA_CLUSTER_SIZE"}


# --------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------


class _Comm:
    def __init__(self, comm: str) -> None:
        self.comm = comm
        self.rank = -1
        self.nranks = 0
        self.cuda_dev = -1
        self.bus_id = ""
        self.func: str | None = None
        self.nvml_dev: int | None = None
        self.comm_id: str | None = None
        self.parent: str | None = None
        self.split_count: int | None = None
        self.color: int | None = None
        self.key: int | None = None
        self.tid: int | None = None
        self.started = False
        self.completed = False
        self.destroyed: str | None = None
        self.n_nodes: int | None = None
        self.local_ranks: int | None = None
        self.network: str | None = None
        self.channels: list[tuple[str, int]] = []
        self.p2p_chunksize: int | None = None
        self.matrix: TuningMatrix | None = None
        self.configs: list[ConfigSetting] = []
        self.env: list[EnvReport] = []
        self.start_line: int | None = None
        self.complete_line: int | None = None

    def freeze(self) -> CommInit:
        return CommInit(
            comm=self.comm,
            rank=self.rank,
            nranks=self.nranks,
            cuda_dev=self.cuda_dev,
            bus_id=self.bus_id,
            func=self.func,
            nvml_dev=self.nvml_dev,
            comm_id=self.comm_id,
            parent=self.parent,
            split_count=self.split_count,
            color=self.color,
            key=self.key,
            tid=self.tid,
            started=self.started,
            completed=self.completed,
            destroyed=self.destroyed,
            n_nodes=self.n_nodes,
            local_ranks=self.local_ranks,
            network=self.network,
            channels=tuple(self.channels),
            p2p_chunksize=self.p2p_chunksize,
            matrix=self.matrix,
            configs=tuple(self.configs),
            env=tuple(self.env),
            start_line=self.start_line,
            complete_line=self.complete_line,
        )


class _Proc:
    def __init__(self, host: str, pid: int) -> None:
        self.host = host
        self.pid = pid
        self.sources: list[str] = []
        self.version: str | None = None
        self.cuda_version: str | None = None
        self.env: list[EnvReport] = []
        self.comms: list[_Comm] = []
        self.open_by_tid: dict[int, _Comm] = {}
        self.pending_configs: list[list[ConfigSetting]] = []
        self.unattached_configs: list[ConfigSetting] = []
        self.pending_network: dict[int, str] = {}
        self.warnings: list[WarnLine] = []
        self.tids: list[int] = []
        self.n_lines = 0

    def by_pointer(self, pointer: str) -> _Comm | None:
        for c in reversed(self.comms):
            if c.comm == pointer:
                return c
        return None

    def target(self, tid: int | None, fallback: bool = True) -> _Comm | None:
        """The communicator whose init is running in thread ``tid``."""
        if tid is not None and tid in self.open_by_tid:
            return self.open_by_tid[tid]
        if not fallback:
            return None
        running = [c for c in self.comms if c.started and not c.completed]
        return running[0] if len(running) == 1 else None

    def freeze(self) -> NcclProcessLog:
        unattached = list(self.unattached_configs)
        for batch in self.pending_configs:
            unattached.extend(batch)
        return NcclProcessLog(
            host=self.host,
            pid=self.pid,
            sources=tuple(self.sources),
            version=self.version,
            cuda_version=self.cuda_version,
            env_reports=tuple(self.env),
            comms=tuple(c.freeze() for c in self.comms),
            warnings=tuple(self.warnings),
            unattached_configs=tuple(unattached),
            tids=tuple(self.tids),
            n_lines=self.n_lines,
        )


class _Matrix:
    def __init__(self, proc: _Proc, tid: int, comm: _Comm | None) -> None:
        self.proc = proc
        self.tid = tid
        self.comm = comm
        self.protocols: tuple[str, ...] | None = None
        self.algorithms: tuple[str, ...] = ()
        self.rows: list[MatrixRow] = []
        self.partial: str | None = None
        self.broken = False

    def feed(self, text: str) -> bool:
        """Consume one unprefixed fragment; False when it is not part of the table."""
        if self.protocols is None:
            m = _MATRIX_HEADER_RE.search(text)
            if not m:
                return False
            self.protocols = tuple(m.group("p").split())
            self.algorithms = tuple(m.group("a").split())
            return True
        candidate = f"{self.partial} {text}" if self.partial is not None else text
        m = _MATRIX_ROW_RE.search(candidate)
        if m:
            p = [int(x) for x in m.group("p").split()]
            a = [int(x) for x in m.group("a").split()]
            if len(p) == len(self.protocols) and len(a) == len(self.algorithms):
                self.rows.append(
                    MatrixRow(
                        m.group("f"),
                        tuple(zip(self.protocols, p, strict=True)),
                        tuple(zip(self.algorithms, a, strict=True)),
                    )
                )
                self.partial = None
                return True
            if len(p) > len(self.protocols) or len(a) > len(self.algorithms):
                self.partial, self.broken = None, True
                return True
            self.partial = candidate  # row cut by interleaved output
            return True
        if _MATRIX_PARTIAL_RE.search(candidate) or (self.partial is not None and _DIGITS_ONLY_RE.match(text)):
            self.partial = candidate
            return True
        if self.partial is not None:
            self.partial, self.broken = None, True
        return False

    def build(self) -> TuningMatrix | None:
        if self.protocols is None:
            return None
        complete = not self.broken and self.partial is None and bool(self.rows)
        return TuningMatrix(self.protocols, self.algorithms, tuple(self.rows), complete)


class _Parser:
    def __init__(self, source: str | None, default: tuple[str, int] | None) -> None:
        self.source = source
        self.default = default
        self.procs: dict[tuple[str, int], _Proc] = {}
        self.matrix: _Matrix | None = None
        self.last_proc: _Proc | None = None
        self.known_hosts: set[str] = {default[0]} if default is not None else set()
        if default is not None:
            self.proc(*default)

    def proc(self, host: str, pid: int) -> _Proc:
        p = self.procs.get((host, pid))
        if p is None:
            p = self.procs[(host, pid)] = _Proc(host, pid)
            if self.source:
                p.sources.append(self.source)
        return p

    # -- driving -------------------------------------------------------------------
    def run(self, text: str) -> list[NcclProcessLog]:
        lines = text.splitlines()
        # Hosts seen in prefixes that start a line: used to repair a prefix glued to other
        # text without a separator ("...78.50 GBgpu-node-1:701:711 [1] NCCL INFO ...").
        for line in lines:
            m = _PREFIX_RE.search(line)
            if m and _CLEAN_HEAD_RE.match(line[: m.start()]):
                self.known_hosts.add(m.group("host"))
        for line_no, line in enumerate(lines, start=1):
            try:
                self.line(line, line_no)
            except ValueError:
                # A digit run too long for int() (Python's conversion limit): not a line NCCL
                # wrote, so it is ignored like any other foreign line.
                continue
        self.end_matrix()
        procs = list(self.procs.values())
        if self.default is not None and len(procs) > 1:
            # A name such as "capture.2024.log" only looked like nccl.%h.%p: keep the default
            # process only if something in the file belonged to it.
            first = self.procs[self.default]
            if first.n_lines == 0 and first.version is None:
                procs.remove(first)
        return [p.freeze() for p in procs]

    def line(self, line: str, line_no: int) -> None:
        matches = list(_PREFIX_RE.finditer(line))
        if not matches:
            self.unprefixed(line, line_no)
            return
        head = line[: matches[0].start()]
        ts_match = _TIMESTAMP_TAIL_RE.search(head)
        if ts_match:
            head = head[: ts_match.start()]
        if head.strip() and self.matrix is not None:
            self.matrix.feed(head)  # a table row cut by a line glued to it
        for i, m in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
            message = line[m.end() : end].strip()
            timestamp = ts_match.group("ts") if (i == 0 and ts_match) else None
            self.prefixed(m, message, line_no, timestamp)

    def unprefixed(self, text: str, line_no: int) -> None:
        if self.matrix is not None:
            if not text.strip():
                self.end_matrix()
                return
            if self.matrix.feed(text):
                return
            self.end_matrix()
        m = _VERSION_RE.match(text.strip())
        if m:
            # 2.18-2.26 printf() the version line to stdout without a prefix.
            target = None
            if self.default is not None:
                target = self.proc(*self.default)
            elif self.last_proc is not None and self.last_proc.version is None:
                target = self.last_proc
            if target is not None and target.version is None:
                target.version, target.cuda_version = m.group("version"), m.group("cuda")

    def end_matrix(self) -> None:
        mat, self.matrix = self.matrix, None
        if mat is None:
            return
        built = mat.build()
        if built is not None and mat.comm is not None and mat.comm.matrix is None:
            mat.comm.matrix = built

    # -- prefixed lines --------------------------------------------------------------
    def host_of(self, host: str) -> str:
        if host in self.known_hosts:
            return host
        suffixes = [h for h in self.known_hosts if host.endswith(h)]
        return max(suffixes, key=len) if suffixes else host

    def prefixed(self, m: re.Match[str], msg: str, line_no: int, timestamp: str | None) -> None:
        host, pid, tid = self.host_of(m.group("host")), int(m.group("pid")), int(m.group("tid"))
        proc = self.proc(host, pid)
        if self.matrix is not None and self.matrix.proc is proc and self.matrix.tid == tid:
            self.end_matrix()
        self.last_proc = proc
        proc.n_lines += 1
        if tid not in proc.tids:
            proc.tids.append(tid)
        level = m.group("level")
        dev = int(m.group("dev")) if m.group("dev") is not None else None
        if level in ("WARN", "ATTN"):
            proc.warnings.append(
                WarnLine(
                    message=msg,
                    line_no=line_no,
                    tid=tid,
                    cuda_dev=dev,
                    src_file=m.group("src"),
                    src_line=int(m.group("srcline")) if m.group("srcline") else None,
                    func=m.group("func"),
                    timestamp=timestamp,
                    level=level,
                )
            )
            return
        if level == "INFO":
            self.info(proc, tid, msg, line_no)

    def info(self, proc: _Proc, tid: int, msg: str, line_no: int) -> None:
        if m := _ENV_RE.match(msg):
            self.env(proc, tid, m.group("name"), m.group("raw"), "environment", line_no)
        elif m := _INIT_RE.match(msg):
            self.init(proc, tid, m, line_no)
        elif m := _CONFIG_RESET_RE.match(msg):
            name = _CONFIG_ENV_ALIASES.get(m.group("name"), m.group("name"))
            setting = ConfigSetting(m.group("field"), m.group("cfg") or m.group("value"), line_no, name)
            comm = proc.target(tid, fallback=False)
            if comm is not None:
                comm.configs.append(setting)
            elif proc.pending_configs:  # envConfigOverride runs right after the "set to" lines
                proc.pending_configs[-1].append(setting)
            else:
                proc.pending_configs.append([setting])
            self.env(proc, tid, name, m.group("value"), "comm_config_override", line_no)
        elif m := _CONFIG_RE.match(msg):
            setting = ConfigSetting(m.group("field"), m.group("value").strip(), line_no)
            batch = proc.pending_configs[-1] if proc.pending_configs else None
            if batch is None or any(s.field == setting.field for s in batch):
                proc.pending_configs.append([setting])
            else:
                batch.append(setting)
        elif m := _SET_TO_RE.match(msg):
            self.env(proc, tid, m.group("name"), m.group("raw"), "set", line_no)
        elif m := _PLUGIN_ADD_RE.search(msg):
            self.env(proc, tid, m.group("name"), m.group("raw"), "plugin", line_no)
        elif m := _VERSION_RE.match(msg):
            if proc.version is None:
                proc.version, proc.cuda_version = m.group("version"), m.group("cuda")
        elif _CHANNELS_RE.match(msg):
            comm = proc.target(tid)
            if comm is not None:
                comm.channels = [
                    ("p2p_per_peer" if per_peer else kind, int(n))
                    for n, kind, per_peer in _CHANNEL_ITEM_RE.findall(msg)
                ]
        elif m := _CHUNK_RE.match(msg):
            comm = proc.target(tid)
            if comm is not None:
                comm.p2p_chunksize = int(m.group("n"))
        elif _MATRIX_START_RE.match(msg):
            self.end_matrix()
            self.matrix = _Matrix(proc, tid, proc.target(tid))
        elif m := _NETWORK_RE.match(msg):
            comm = proc.target(tid, fallback=False)
            if comm is not None:
                comm.network = m.group("net")
            else:  # 2.27: logged in commAlloc, before Init START, by the same thread
                proc.pending_network[tid] = m.group("net")
        elif m := _COMM_TOPO_RE.match(msg):
            comm = proc.by_pointer(m.group("comm"))
            if comm is not None:
                comm.n_nodes, comm.local_ranks = int(m.group("nnodes")), int(m.group("local"))
        elif m := _DESTROY_RE.match(msg):
            comm = proc.by_pointer(m.group("comm"))
            if comm is not None:
                comm.destroyed = m.group("what")

    def env(self, proc: _Proc, tid: int, name: str, raw: str, source: str, line_no: int) -> None:
        raw = raw.rstrip()
        value = raw[:-1] if raw.endswith(".") else raw
        comm = proc.target(tid, fallback=False)
        report = EnvReport(name, value, raw, source, line_no, tid, comm.comm if comm else None)
        proc.env.append(report)
        if comm is not None:
            comm.env.append(report)

    def init(self, proc: _Proc, tid: int, m: re.Match[str], line_no: int) -> None:
        pointer, phase = m.group("comm"), m.group("phase")
        comm = proc.by_pointer(pointer)
        if phase == "START" or comm is None or comm.destroyed:
            comm = _Comm(pointer)
            proc.comms.append(comm)
        comm.func = m.group("func") or comm.func
        comm.rank, comm.nranks = int(m.group("rank")), int(m.group("nranks"))
        comm.cuda_dev, comm.bus_id = int(m.group("dev")), m.group("busid")
        if m.group("nvml") is not None:
            comm.nvml_dev = int(m.group("nvml"))
        if m.group("commid") is not None:
            comm.comm_id = m.group("commid")
        if m.group("parent") is not None:
            comm.parent = m.group("parent")
            comm.color, comm.key = int(m.group("color")), int(m.group("key"))
            if m.group("count") is not None:
                comm.split_count = int(m.group("count"))
        if phase == "START":
            comm.started, comm.tid, comm.start_line = True, tid, line_no
            proc.open_by_tid[tid] = comm
            if proc.pending_configs:
                comm.configs.extend(proc.pending_configs.pop(0))
            if comm.network is None and tid in proc.pending_network:
                comm.network = proc.pending_network.pop(tid)
        else:
            comm.completed, comm.complete_line = True, line_no
            if comm.tid is None:
                comm.tid = tid
            for t, c in list(proc.open_by_tid.items()):
                if c is comm:
                    del proc.open_by_tid[t]


# --------------------------------------------------------------------------------------
# Public parsing API
# --------------------------------------------------------------------------------------

_FILENAME_RE = re.compile(r"(?:^|\.)(?P<host>[^./]+)\.(?P<pid>\d+)(?:\.[^.]+)?$")


def pid_host_from_filename(name: str) -> tuple[str, int] | None:
    """``nccl.<host>.<pid>.log`` (``NCCL_DEBUG_FILE=<dir>/nccl.%h.%p.log``) -> (host, pid).

    NCCL cuts the hostname at the first ``.`` and replaces ``%``/``/`` by ``-``, so the host
    part never contains a dot.
    """
    m = _FILENAME_RE.search(Path(name).name)
    if not m:
        return None
    return m.group("host"), int(m.group("pid"))


def parse_text(
    text: str, source: str | None = None, default: tuple[str, int] | None = None
) -> list[NcclProcessLog]:
    """Parse NCCL output (a debug file or a mixed stream) into one record per (host, pid).

    ``default`` = (host, pid) of the writer when known (a per-process debug file): it gets the
    unprefixed ``NCCL version`` line that older NCCL prints with printf, and it is returned even
    when no NCCL line is found. Lines that do not match NCCL's formats are ignored.
    """
    return _Parser(source, default).run(text)


# NCCL writes a few KiB per process at INFO with INIT,ENV,TUNING; TRACE or ALL over a long run
# can reach hundreds of MiB, more than is worth reading into memory for a cross-check.
MAX_LOG_BYTES = 256 * 1024 * 1024


def parse_file(path: str | Path, *, follow_symlinks: bool = True) -> list[NcclProcessLog]:
    """Parse one file; a name like ``nccl.<host>.<pid>.log`` gives the default process.

    Only a regular file is read (never a FIFO or device, which would block or never end), up to
    :data:`MAX_LOG_BYTES`; anything else raises :class:`~sglang_eagle_nccl.contract.files.UnreadableFile`.
    """
    from sglang_eagle_nccl.contract.files import read_regular_file

    p = Path(path)
    text = read_regular_file(str(p), MAX_LOG_BYTES, follow_symlinks=follow_symlinks).decode("utf-8", errors="replace")
    return parse_text(text, source=str(p), default=pid_host_from_filename(p.name))


def parse_dir(directory: str | Path, pattern: str = "*") -> list[NcclProcessLog]:
    """Parse every regular file in ``directory`` matching ``pattern``; merge per (host, pid).

    Symlinks, FIFOs, devices and files that cannot be read are skipped: the directory may be
    shared, and following a link or opening a pipe there must not make the audit hang or read
    a file somewhere else.
    """
    from sglang_eagle_nccl.contract.files import UnreadableFile

    logs: list[NcclProcessLog] = []
    for p in sorted(Path(directory).glob(pattern)):
        try:
            logs.extend(parse_file(p, follow_symlinks=False))
        except UnreadableFile:
            continue
    return merge_logs(logs)


def merge_logs(logs: Iterable[NcclProcessLog]) -> list[NcclProcessLog]:
    """Merge records of the same (host, pid) found in several sources, keeping order."""
    merged: dict[tuple[str, int], NcclProcessLog] = {}
    for log in logs:
        key = (log.host, log.pid)
        old = merged.get(key)
        if old is None:
            merged[key] = log
            continue
        merged[key] = NcclProcessLog(
            host=log.host,
            pid=log.pid,
            sources=old.sources + tuple(s for s in log.sources if s not in old.sources),
            version=old.version or log.version,
            cuda_version=old.cuda_version or log.cuda_version,
            env_reports=old.env_reports + log.env_reports,
            comms=old.comms + log.comms,
            warnings=old.warnings + log.warnings,
            unattached_configs=old.unattached_configs + log.unattached_configs,
            tids=old.tids + tuple(t for t in log.tids if t not in old.tids),
            n_lines=old.n_lines + log.n_lines,
        )
    return sorted(merged.values(), key=lambda lg: (lg.host, lg.pid))


if __name__ == "__main__":  # debugging aid: python -m sglang_eagle_nccl.knowledge.nccl.debug_log DIR|FILE...
    import sys

    found: list[NcclProcessLog] = []
    for arg in sys.argv[1:]:
        found.extend(parse_dir(arg) if Path(arg).is_dir() else parse_file(arg))
    print(json.dumps([lg.to_dict() for lg in merge_logs(found)], indent=2))
