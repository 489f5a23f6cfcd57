"""The native NCCL plugins library for diagnostics: where it is, whether it can be used, what its tuner answers.

Built on the one binding (:mod:`.binding`): :func:`load` returns a :class:`NativeLibrary`, which adds
to it the calls NCCL itself makes through the exported plugin structs (``call_tuner``, ``plugin_get_env``)
and the explained answer of ``sglang-eagle-nccl tuner`` (``query_tuner``). A process's activation
configures the library through the binding directly (``inproc/boot/native.py``); nothing here runs in an
SGLang process unless a diagnostic asks.
"""

from __future__ import annotations

import ctypes as _c
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.native_location import LIBRARY_FILE
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import (
    ALGORITHMS,
    COLLECTIVE_IDS,
    COLLECTIVES,
    PROTOCOLS,
    TunerRule,
    rule_label,
)
from sglang_eagle_nccl.knowledge.nccl.tuner_rules import rules_digest as _rules_digest
from sglang_eagle_nccl.native import binding as _binding
from sglang_eagle_nccl.native.abi import (
    ENV_ABIS,
    ENV_STRUCTS,
    SIZE_T_MAX,
    TUNER_ABI_SINCE,
    TUNER_ABIS,
    TUNER_STRUCTS,
    UINT64_MAX,
)

HERE = Path(__file__).resolve().parent
BUILD_INFO_FILE = "build_info.json"
NEWEST_TUNER_ABI = TUNER_ABIS[-1]
# Cost table NCCL hands to v3+: float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], 7 x 3 since 2.23.
TABLE_ALGOS = len(ALGORITHMS)
TABLE_PROTOS = len(PROTOCOLS)
IGNORE = -1.0  # NCCL_ALGO_PROTO_IGNORE
__all__ = ["ENV_ABIS", "TUNER_ABIS", "TUNER_ABI_SINCE", "NEWEST_TUNER_ABI", "TABLE_ALGOS", "TABLE_PROTOS", "IGNORE"]


class NativeUnavailable(RuntimeError):
    """The native library cannot be used here; ``str()`` says why and how to fix it."""


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
            self._binding = _binding.load(str(path))
        except _binding.BindingError as exc:
            raise NativeUnavailable(str(exc)) from None
        self._lib = self._binding.lib

    def __getattr__(self, name: str) -> Any:
        # The control calls (configure_env, select_group, set_reads_log_fd, flush_reads_counts ...) are the
        # binding's; this class adds only what NCCL calls through the exported structs.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._binding, name)

    @property
    def binding(self) -> _binding.Binding:
        """The one binding of this library: configuring values, rules, the reads log goes through it."""
        return self._binding

    def library_version(self) -> str:
        return self._binding.library_version()

    def exported_abis(self) -> dict[str, list[int]]:
        """Which ``ncclEnvPlugin_v*`` / ``ncclTunerPlugin_v*`` symbols this build exports."""
        return {
            "env": [v for v in ENV_ABIS if hasattr(self._lib, f"ncclEnvPlugin_v{v}")],
            "tuner": [v for v in TUNER_ABIS if hasattr(self._lib, f"ncclTunerPlugin_v{v}")],
        }

    # -- env plugin, as NCCL calls it --

    def plugin_get_env(self, name: str, abi: int = 2) -> tuple[str | None, int]:
        """Ask the exported ``ncclEnvPlugin_v<abi>`` for ``name`` exactly as NCCL does.

        Returns (value, address of the returned string). Records a read, like NCCL's own; for
        tests and diagnostics, not for activation.
        """
        plugin = self.env_struct(abi)
        address = plugin.getEnv(_binding.encode(name, "variable name"))
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
        self._binding.configure_tuner([rule_args(r) for r in rules], [f"{rule_label(i)} ({r.describe()})"
                                                                      for i, r in enumerate(rules)])

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
            rule_index, applied = self._binding.last_decision()
        finally:
            (plugin.destroy if abi <= 4 else plugin.finalize)(ctx)
        return TunerCall(abi, before, after, algorithm, protocol, nch.value, rule_index, applied)

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
        # NCCL asks with size_t values: a question it cannot ask has no answer (ctypes would wrap it).
        if not (0 <= nbytes <= SIZE_T_MAX and 1 <= nranks <= SIZE_T_MAX and 1 <= nnodes <= SIZE_T_MAX):
            raise ValueError(f"bytes must be 0..{SIZE_T_MAX}, ranks and nodes 1..{SIZE_T_MAX} (NCCL's size_t)")
        previous = self._binding.selected_group()
        self._binding.select_group(group)
        try:
            call = self.call_tuner(abi, COLLECTIVE_IDS[name], nbytes, nranks, nnodes)
        finally:
            self._binding.select_group(previous)
        applied = call.applied and call.algorithm >= 0 and call.protocol >= 0
        return QueryResult(
            abi=abi, collective=name, nbytes=nbytes, nranks=nranks, nnodes=nnodes, group=group,
            rule=None if call.rule_index < 0 else call.rule_index, applied=applied,
            algorithm=ALGORITHMS[call.algorithm] if applied else None,
            protocol=PROTOCOLS[call.protocol] if applied else None,
            channels=(call.channels or None) if applied else None,
            library_version=self.library_version(),
        )


# --- helpers ---------------------------------------------------------------------------------------------


def rule_args(rule: TunerRule) -> _binding.RuleArgs:
    """A validated rule as the numbers the C tuner takes (the bounds are checked by the binding)."""
    lo_r, hi_r = rule.nranks or (1, None)
    lo_n, hi_n = rule.nnodes or (1, None)
    return (rule.collective_id, rule.min_bytes, UINT64_MAX if rule.max_bytes is None else rule.max_bytes,
            lo_r, UINT64_MAX if hi_r is None else hi_r, lo_n, UINT64_MAX if hi_n is None else hi_n,
            rule.group, rule.algorithm_id, rule.protocol_id, rule.channels or 0)


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
