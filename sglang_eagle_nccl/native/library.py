"""ctypes access to the native NCCL plugins library (env plugin + tuner plugin, one ``.so``).

The library is loaded from the exact path that ``NCCL_ENV_PLUGIN`` / ``NCCL_TUNER_PLUGIN`` name,
so when NCCL dlopens that path it gets the instance Python configured (the dynamic loader
returns the already loaded object). Configure it before the first NCCL call of the process:

    lib = library.load()                       # NativeUnavailable(reason) when it cannot be used
    lib.configure_env(values, groups, environment_wins)
    lib.open_reads_log(path)                   # None, or the error text to report
    lib.configure_tuner(rules)
    ... os.environ["NCCL_ENV_PLUGIN"] = str(library.library_path())

The module-level functions of the same names act on the default library (``load()``). Nothing
heavy is imported at module level: ``doctor`` imports this to report availability.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.native_location import LIBRARY_FILE  # noqa: E402 - one name for both modules
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import (
    ALGORITHMS,
    COLLECTIVE_IDS,
    COLLECTIVES,
    PROTOCOLS,
    TunerRule,
    rule_label,
)
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import rules_digest as _rules_digest
from sglang_eagle_nccl.native.env_control import EnvControl, encode, errno_text

HERE = Path(__file__).resolve().parent
BUILD_INFO_FILE = "build_info.json"
CONTROL_ABI = 1  # SEN_CONTROL_ABI in the C source
ENV_ABIS = (1, 2)
TUNER_ABIS = (2, 3, 4, 5, 6)
NEWEST_TUNER_ABI = TUNER_ABIS[-1]
_UINT64_MAX = (1 << 64) - 1
# What each tuner ABI is for (src/plugin/tuner.cc picks the newest one a release knows).
TUNER_ABI_SINCE = {2: "2.21", 3: "2.22", 4: "2.24", 5: "2.28", 6: "2.30"}
# Cost table NCCL hands to v3+: float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], 7 x 3 since 2.23.
TABLE_ALGOS = len(ALGORITHMS)
TABLE_PROTOS = len(PROTOCOLS)
IGNORE = -1.0  # NCCL_ALGO_PROTO_IGNORE


class NativeUnavailable(RuntimeError):
    """The native library cannot be used here; ``str()`` says why and how to fix it."""


# --- ABI structs (see the C source for where each layout comes from) --------------------------------

_c = ctypes
_LOGGER = _c.c_void_p  # ncclDebugLogger_t; queries pass NULL
_ENV_INIT_V1 = _c.CFUNCTYPE(_c.c_int, _c.c_uint8, _c.c_uint8, _c.c_uint8, _c.c_char_p)
_ENV_INIT_V2 = _c.CFUNCTYPE(_c.c_int, _c.c_uint8, _c.c_uint8, _c.c_uint8, _c.c_char_p, _LOGGER)
_ENV_FINALIZE = _c.CFUNCTYPE(_c.c_int)
# c_void_p, not c_char_p: callers need the pointer itself (NCCL relies on it staying valid).
_ENV_GET = _c.CFUNCTYPE(_c.c_void_p, _c.c_char_p)
_INIT_V2 = _c.CFUNCTYPE(_c.c_int, _c.c_size_t, _c.c_size_t, _LOGGER, _c.POINTER(_c.c_void_p))
_INIT_V5 = _c.CFUNCTYPE(
    _c.c_int, _c.POINTER(_c.c_void_p), _c.c_uint64, _c.c_size_t, _c.c_size_t, _LOGGER, _c.c_void_p, _c.c_void_p
)
_INT_P = _c.POINTER(_c.c_int)
_COLL_V2 = _c.CFUNCTYPE(
    _c.c_int, _c.c_void_p, _c.c_int, _c.c_size_t, _c.c_int, _c.c_int, _c.c_int, _INT_P, _INT_P, _INT_P
)
_COLL_V3 = _c.CFUNCTYPE(_c.c_int, _c.c_void_p, _c.c_int, _c.c_size_t, _c.c_int, _c.c_void_p, _c.c_int, _c.c_int, _INT_P)
_COLL_V4 = _c.CFUNCTYPE(
    _c.c_int, _c.c_void_p, _c.c_int, _c.c_size_t, _c.c_int, _c.c_void_p, _c.c_int, _c.c_int, _c.c_int, _INT_P
)
_DESTROY = _c.CFUNCTYPE(_c.c_int, _c.c_void_p)
_CHUNK = _c.CFUNCTYPE(
    _c.c_int, _c.c_void_p, _c.c_int, _c.c_size_t, _c.c_int, _c.c_int, _c.c_int, _c.POINTER(_c.c_size_t)
)


class EnvPluginV1(_c.Structure):
    _fields_ = [("name", _c.c_char_p), ("init", _ENV_INIT_V1), ("finalize", _ENV_FINALIZE), ("getEnv", _ENV_GET)]


class EnvPluginV2(_c.Structure):
    _fields_ = [("name", _c.c_char_p), ("init", _ENV_INIT_V2), ("finalize", _ENV_FINALIZE), ("getEnv", _ENV_GET)]


class TunerV2(_c.Structure):
    _fields_ = [("name", _c.c_char_p), ("init", _INIT_V2), ("getCollInfo", _COLL_V2), ("destroy", _DESTROY)]


class TunerV3(_c.Structure):
    _fields_ = [("name", _c.c_char_p), ("init", _INIT_V2), ("getCollInfo", _COLL_V3), ("destroy", _DESTROY)]


class TunerV4(_c.Structure):
    _fields_ = [("name", _c.c_char_p), ("init", _INIT_V2), ("getCollInfo", _COLL_V4), ("destroy", _DESTROY)]


class TunerV5(_c.Structure):
    _fields_ = [("name", _c.c_char_p), ("init", _INIT_V5), ("getCollInfo", _COLL_V4), ("finalize", _DESTROY)]


class TunerV6(_c.Structure):
    _fields_ = [
        ("name", _c.c_char_p), ("init", _INIT_V5), ("getCollInfo", _COLL_V4), ("finalize", _DESTROY),
        ("getChunkSize", _CHUNK),
    ]


ENV_STRUCTS: dict[int, type[_c.Structure]] = {1: EnvPluginV1, 2: EnvPluginV2}
TUNER_STRUCTS: dict[int, type[_c.Structure]] = {2: TunerV2, 3: TunerV3, 4: TunerV4, 5: TunerV5, 6: TunerV6}


# --- where the library is, and whether it can be used ---------------------------------------------------


def library_path() -> Path:
    """Absolute path of the installed library (what NCCL_ENV_PLUGIN / NCCL_TUNER_PLUGIN must name)."""
    return HERE / LIBRARY_FILE


def build_info() -> dict[str, Any] | None:
    """``build_info.json`` written by the wheel build hook, or None when absent/unreadable."""
    try:
        data = json.loads((HERE / BUILD_INFO_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def status() -> tuple[bool, str]:
    """(available, reason) from the build record and the file itself, without loading it."""
    info = build_info()
    path = library_path()
    if info is None:
        if path.is_file():
            return True, f"{path} (no build_info.json: built outside the wheel build)"
        return False, (
            f"the native library was never built here: no {BUILD_INFO_FILE} and no {path.name} in {HERE} "
            "(install the plugin from a wheel built with a C compiler, e.g. `pip install .` with gcc present)"
        )
    if not info.get("built"):
        return False, (
            f"the wheel was built without the native library: {info.get('reason') or 'no reason recorded'} "
            "(rebuild the wheel on a machine with a C compiler: `pip install .` with gcc, or CC=<compiler>)"
        )
    if not path.is_file():
        return False, f"the native library {path} is missing although the build recorded it (reinstall the plugin)"
    digest = info.get("source_sha256")
    if digest and any((HERE / "src").glob("*.c")):
        from sglang_eagle_nccl.native import build

        if build.source_digest() != digest:
            return False, f"{path} was built from other sources than those in {HERE / 'src'} (rebuild: reinstall the plugin)"
    return True, str(path)


_lock = threading.Lock()
_loaded: dict[Path, NativeLibrary] = {}


def load(path: Path | str | None = None) -> NativeLibrary:
    """The library at ``path`` (default: the installed one), loaded once per path.

    Raises NativeUnavailable with the reason when it is missing, unloadable, or of another ABI.
    """
    if path is None:
        ok, reason = status()
        if not ok:
            raise NativeUnavailable(reason)
        path = library_path()
    resolved = Path(path).resolve()
    with _lock:
        lib = _loaded.get(resolved)
        if lib is None:
            lib = _loaded[resolved] = NativeLibrary(resolved)
        return lib


# --- results -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TunerCall:
    """One init + getCollInfo + destroy through an exported ``ncclTunerPlugin_v<abi>``."""

    abi: int
    table_before: tuple[float, ...] | None  # v3+: the flat cost table given to getCollInfo
    table_after: tuple[float, ...] | None
    algorithm: int  # v2 out-parameter (-1 when not set), else the cell the tuner set to 0.0 (or -1)
    protocol: int
    channels: int  # nChannels after the call (0: not set)
    rule_index: int  # 0-based index of the first matching rule, -1 for none
    applied: bool  # False when the matching rule's cell was unavailable


@dataclass(frozen=True)
class QueryResult:
    """What the shipped library itself answers for one collective call."""

    abi: int
    collective: str
    nbytes: int
    nranks: int
    nnodes: int
    group: str | None
    rule: int | None  # 0-based index of the matching rule
    applied: bool
    algorithm: str | None
    protocol: str | None
    channels: int | None
    library_version: str

    def describe(self) -> str:
        if self.rule is None:
            return "no rule: NCCL decides"
        label = rule_label(self.rule)
        if not self.applied:
            return f"{label} matches, but ABI v{self.abi} cannot take its algorithm/protocol here: NCCL decides"
        text = f"{label}: {self.algorithm}/{self.protocol}"
        return text + (f", {self.channels} channels" if self.channels else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "abi": self.abi, "collective": self.collective, "bytes": self.nbytes, "nranks": self.nranks,
            "nnodes": self.nnodes, "group": self.group,
            "rule": None if self.rule is None else rule_label(self.rule),
            "rule_index": self.rule, "applied": self.applied, "algorithm": self.algorithm,
            "protocol": self.protocol, "channels": self.channels, "decided_by": "rule" if self.applied else "nccl",
            "answer": self.describe(), "library_version": self.library_version,
        }


# --- the library -------------------------------------------------------------------------------------------


class NativeLibrary:
    """One loaded copy of the library (normally the installed one, see :func:`load`)."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self._lib = _c.CDLL(str(path))
        except OSError as exc:
            raise NativeUnavailable(f"cannot load {path}: {exc}") from None
        lib = self._lib
        try:
            lib.sen_abi_version.restype = _c.c_int
            found = lib.sen_abi_version()
        except AttributeError:
            raise NativeUnavailable(f"{path} is not the sglang-eagle-nccl native library") from None
        if found != CONTROL_ABI:
            raise NativeUnavailable(f"{path} has control ABI {found}, this plugin needs {CONTROL_ABI} (reinstall)")
        sigs: dict[str, tuple[Any, list[Any]]] = {
            "sen_library_version": (_c.c_char_p, []),
            "sen_env_reset": (None, []),
            "sen_env_set": (_c.c_int, [_c.c_char_p, _c.c_char_p]),
            "sen_env_set_group": (_c.c_int, [_c.c_char_p, _c.c_char_p, _c.c_char_p]),
            "sen_env_environment_wins": (_c.c_int, [_c.c_char_p]),
            "sen_select_group": (_c.c_int, [_c.c_char_p]),
            "sen_selected_group": (_c.c_int, [_c.c_char_p, _c.c_size_t]),
            "sen_open_reads_log": (_c.c_int, [_c.c_char_p]),
            "sen_reads_log_status": (_c.c_int, []),
            "sen_reads_reset": (None, []),
            "sen_flush_reads_counts": (_c.c_int, []),
            "sen_env_plugin_abi": (_c.c_char_p, []),
            "sen_nccl_version": (_c.c_int, [_c.c_char_p, _c.c_size_t]),
            "sen_tuner_reset": (None, []),
            "sen_tuner_add_rule": (
                _c.c_int,
                [_c.c_int, _c.c_uint64, _c.c_uint64, _c.c_uint64, _c.c_uint64, _c.c_uint64, _c.c_uint64,
                 _c.c_char_p, _c.c_int, _c.c_int, _c.c_int],
            ),
            "sen_tuner_rule_count": (_c.c_int, []),
            "sen_tuner_last_decision": (_c.c_int, [_INT_P]),
        }
        for name, (restype, argtypes) in sigs.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        self._env = EnvControl(lib, str(path))

    # -- identity --

    def library_version(self) -> str:
        """Package version + source digest compiled in; ranks compare it (never the path)."""
        return self._lib.sen_library_version().decode()

    def exported_abis(self) -> dict[str, list[int]]:
        """Which ``ncclEnvPlugin_v*`` / ``ncclTunerPlugin_v*`` symbols this build exports."""
        return {
            "env": [v for v in ENV_ABIS if hasattr(self._lib, f"ncclEnvPlugin_v{v}")],
            "tuner": [v for v in TUNER_ABIS if hasattr(self._lib, f"ncclTunerPlugin_v{v}")],
        }

    def env_plugin_info(self) -> tuple[str, str]:
        """(ABI NCCL loaded: "v1"/"v2"/"none", NCCL version NCCL announced to init or "")."""
        buf = _c.create_string_buffer(64)
        self._lib.sen_nccl_version(buf, len(buf))
        return self._lib.sen_env_plugin_abi().decode(), buf.value.decode()

    # -- env plugin --

    # -- env plugin (the same binding activation uses at interpreter start) --

    def configure_env(
        self,
        values: Mapping[str, str],
        groups: Mapping[str, Mapping[str, str]] | None = None,
        environment_wins: Collection[str] = (),
    ) -> None:
        """Replace the profile the env plugin serves: process-wide ``values``, per-group values
        (served while that group's label is selected), and names the environment wins for.

        Call it before the process's first NCCL call: NCCL reading while the old profile is
        being replaced could see part of each."""
        self._env.configure(values, groups, environment_wins)

    def select_group(self, label: str | None) -> None:
        """Select the group whose communicator is about to be created (None clears)."""
        self._env.select_group(label)

    def selected_group(self) -> str | None:
        buf = _c.create_string_buffer(256)
        n = self._lib.sen_selected_group(buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = _c.create_string_buffer(n + 1)
            self._lib.sen_selected_group(buf, len(buf))
        return os.fsdecode(buf.value)

    def open_reads_log(self, path: str | os.PathLike[str]) -> str | None:
        """Open this process's log of what NCCL read. None on success, else the error to report."""
        return self._env.open_reads_log(path)

    def reads_log_error(self) -> str | None:
        """None while the log is open and every write succeeded, else what went wrong."""
        return self._env.reads_log_error()

    def reset_reads(self) -> None:
        """Close the reads log and forget recorded reads (what a forked child starts with)."""
        self._lib.sen_reads_reset()

    def flush_reads_counts(self) -> str | None:
        """Append the cumulative counts line; None, or the error text (see reads_log_error)."""
        return self._env.flush_reads_counts()

    def plugin_get_env(self, name: str, abi: int = 2) -> tuple[str | None, int]:
        """Ask the exported ``ncclEnvPlugin_v<abi>`` for ``name`` exactly as NCCL does.

        Returns (value, address of the returned string). Records a read, like NCCL's own; for
        tests and diagnostics, not for activation.
        """
        plugin = self.env_struct(abi)
        address = plugin.getEnv(encode(name, "variable name"))
        if not address:
            return None, 0
        return os.fsdecode(_c.string_at(address)), address

    def env_struct(self, abi: int) -> Any:
        if abi not in ENV_STRUCTS or not hasattr(self._lib, f"ncclEnvPlugin_v{abi}"):
            raise ValueError(f"{self.path} exports no ncclEnvPlugin_v{abi}")
        return ENV_STRUCTS[abi].in_dll(self._lib, f"ncclEnvPlugin_v{abi}")

    # -- tuner --

    def configure_tuner(self, rules: Sequence[TunerRule]) -> None:
        """Replace the tuner's rules (first match wins, in this order)."""
        lib = self._lib
        lib.sen_tuner_reset()
        for i, rule in enumerate(rules):
            lo_r, hi_r = rule.nranks or (1, None)
            lo_n, hi_n = rule.nnodes or (1, None)
            rc = lib.sen_tuner_add_rule(
                rule.collective_id, rule.min_bytes, _UINT64_MAX if rule.max_bytes is None else rule.max_bytes,
                lo_r, _UINT64_MAX if hi_r is None else hi_r, lo_n, _UINT64_MAX if hi_n is None else hi_n,
                None if rule.group is None else encode(rule.group, "group label"),
                rule.algorithm_id, rule.protocol_id, rule.channels or 0,
            )
            if rc < 0:
                lib.sen_tuner_reset()
                raise ValueError(f"native tuner refused {rule_label(i)} ({rule.describe()}): {errno_text(-rc)}")

    def tuner_rule_count(self) -> int:
        return self._lib.sen_tuner_rule_count()

    def tuner_struct(self, abi: int) -> Any:
        if abi not in TUNER_STRUCTS or not hasattr(self._lib, f"ncclTunerPlugin_v{abi}"):
            raise ValueError(f"tuner ABI must be one of {', '.join(map(str, TUNER_ABIS))}, not {abi}")
        return TUNER_STRUCTS[abi].in_dll(self._lib, f"ncclTunerPlugin_v{abi}")

    def call_tuner(
        self,
        abi: int,
        collective: int,
        nbytes: int,
        nranks: int,
        nnodes: int = 1,
        *,
        table: Sequence[float] | None = None,
        num_algo: int = TABLE_ALGOS,
        num_proto: int = TABLE_PROTOS,
        comm_id: int = 0,
        collnet_support: int = 1,
        nvls_support: int = 1,
        channels: int = 0,
    ) -> TunerCall:
        """init (with the group label selected now), getCollInfo once, destroy/finalize: the calls
        NCCL makes, through the exported struct's function pointers."""
        plugin = self.tuner_struct(abi)
        ctx = _c.c_void_p()
        if abi >= 5:
            rc = plugin.init(_c.byref(ctx), comm_id, nranks, nnodes, None, None, None)
        else:
            rc = plugin.init(nranks, nnodes, None, _c.byref(ctx))
        if rc:
            raise RuntimeError(f"ncclTunerPlugin_v{abi}.init returned {rc}")
        nch = _c.c_int(channels)
        before: tuple[float, ...] | None = None
        after: tuple[float, ...] | None = None
        algorithm = protocol = -1
        try:
            if abi == 2:
                algo_out, proto_out = _c.c_int(-1), _c.c_int(-1)
                rc = plugin.getCollInfo(
                    ctx, collective, nbytes, collnet_support, nvls_support, 1,
                    _c.byref(algo_out), _c.byref(proto_out), _c.byref(nch),
                )
                algorithm, protocol = algo_out.value, proto_out.value
            else:
                cells = list(table) if table is not None else [1.0] * (num_algo * num_proto)
                if len(cells) != num_algo * num_proto:
                    raise ValueError(f"table has {len(cells)} cells, expected {num_algo} x {num_proto}")
                array = (_c.c_float * len(cells))(*cells)
                before = tuple(array)
                # NCCL passes its float[numAlgo][numProto] as float**: the address of the first cell.
                address = _c.cast(array, _c.c_void_p)
                if abi == 3:
                    rc = plugin.getCollInfo(ctx, collective, nbytes, 1, address, num_algo, num_proto, _c.byref(nch))
                else:
                    rc = plugin.getCollInfo(ctx, collective, nbytes, 1, address, num_algo, num_proto, 0, _c.byref(nch))
                after = tuple(array)
                chosen = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a]
                if chosen:
                    algorithm, protocol = divmod(chosen[0], num_proto)
            if rc:
                raise RuntimeError(f"ncclTunerPlugin_v{abi}.getCollInfo returned {rc}")
            applied = _c.c_int(0)
            rule_index = self._lib.sen_tuner_last_decision(_c.byref(applied))
        finally:
            (plugin.destroy if abi <= 4 else plugin.finalize)(ctx)
        return TunerCall(abi, before, after, algorithm, protocol, nch.value, rule_index, bool(applied.value))

    def query_tuner(
        self, abi: int, collective: str, nbytes: int, nranks: int, nnodes: int = 1, group: str | None = None
    ) -> QueryResult:
        """What the library answers for one call: every algorithm/protocol cell enabled, the group
        label selected during init (then the previous selection restored).

        Uses the rules configured now (:meth:`configure_tuner`). Meant for a diagnostic process:
        selecting a label also changes what the env plugin serves while the query runs.
        """
        name = next((c for c in COLLECTIVES if c.lower() == collective.lower()), None)
        if name is None:
            raise ValueError(f"unknown collective {collective!r}: use one of {', '.join(COLLECTIVES)}")
        if abi not in TUNER_ABIS:
            raise ValueError(f"tuner ABI must be one of {', '.join(map(str, TUNER_ABIS))}, not {abi}")
        if nbytes < 0 or nranks < 1 or nnodes < 1:
            raise ValueError("bytes must be >= 0, ranks and nodes >= 1")
        previous = self.selected_group()
        self.select_group(group)
        try:
            call = self.call_tuner(abi, COLLECTIVE_IDS[name], nbytes, nranks, nnodes)
        finally:
            self.select_group(previous)
        applied = call.applied and call.algorithm >= 0 and call.protocol >= 0
        return QueryResult(
            abi=abi, collective=name, nbytes=nbytes, nranks=nranks, nnodes=nnodes, group=group,
            rule=None if call.rule_index < 0 else call.rule_index, applied=applied,
            algorithm=ALGORITHMS[call.algorithm] if applied else None,
            protocol=PROTOCOLS[call.protocol] if applied else None,
            channels=(call.channels or None) if applied else None,
            library_version=self.library_version(),
        )


# --- the default library, as plain functions --------------------------------------------------------------


def configure_env(
    values: Mapping[str, str],
    groups: Mapping[str, Mapping[str, str]] | None = None,
    environment_wins: Collection[str] = (),
) -> None:
    load().configure_env(values, groups, environment_wins)


def select_group(label: str | None) -> None:
    load().select_group(label)


def open_reads_log(path: str | os.PathLike[str]) -> str | None:
    return load().open_reads_log(path)


def reads_log_error() -> str | None:
    return load().reads_log_error()


def flush_reads_counts() -> str | None:
    return load().flush_reads_counts()


def configure_tuner(rules: Sequence[TunerRule]) -> None:
    load().configure_tuner(rules)


def library_version() -> str:
    return load().library_version()


def query_tuner(
    abi: int, collective: str, nbytes: int, nranks: int, nnodes: int = 1, group: str | None = None
) -> QueryResult:
    return load().query_tuner(abi, collective, nbytes, nranks, nnodes, group)


def rules_digest(rules: Sequence[TunerRule]) -> str:
    """Stable hex digest of the normalised rules, for the cross-rank check (pure; no library needed)."""
    return _rules_digest(rules)


def query_rules(
    rules: Sequence[TunerRule],
    abi: int,
    collective: str,
    nbytes: int,
    nranks: int,
    nnodes: int = 1,
    group: str | None = None,
) -> QueryResult:
    """Configure the default library's tuner with ``rules`` and query it (for diagnostic processes:
    it replaces the rules this process's NCCL would use)."""
    lib = load()
    lib.configure_tuner(rules)
    return lib.query_tuner(abi, collective, nbytes, nranks, nnodes, group)
