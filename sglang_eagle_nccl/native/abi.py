"""The native library's ABI as Python sees it: one table of the ``sen_*`` control functions, the NCCL plugin
structs, and the bounds both sides of the ctypes boundary share.

Declared in C in ``src/*.c`` (the ``SEN_EXPORT`` functions, ``SEN_CONTROL_ABI`` in ``env_plugin.c``) and
here once; :mod:`.binding` is the one ctypes binding that applies this table, and
``tests/native/test_native_abi.py`` checks it against the C sources (every exported ``sen_*`` function is
in :data:`CONTROL_FUNCTIONS` with the same number of parameters, and the reverse).

Why bounds live here: ctypes converts a Python int to ``uint64_t`` / ``size_t`` modulo 2**64 without a
word, so a byte bound that validates in Python (any integer) would wrap in C -- a rule for "up to 2**64 + 10
bytes" would match only messages below 10 bytes. Every integer crossing the boundary is checked against the
C type's range first (:func:`check_u64`), and the validation of profiles uses the same limits.
"""

from __future__ import annotations

import ctypes as _c

from sglang_eagle_nccl.knowledge.nccl.tuner_rules import SIZE_T_MAX as _SIZE_T_MAX

# SEN_CONTROL_ABI in src/env_plugin.c. 2: the reads log is a descriptor Python opened (sen_set_reads_log_fd).
CONTROL_ABI = 2

# uint64_t / size_t (LP64 Linux, the only platform the library is built for): the largest byte count NCCL can
# pass to the tuner, and the C side's "no upper bound" sentinel. Profile validation uses the same limit.
SIZE_T_MAX = _SIZE_T_MAX
UINT64_MAX = SIZE_T_MAX
INT_MAX = (1 << 31) - 1

_INT_P = _c.POINTER(_c.c_int)

# name -> (restype, argtypes): every sen_* function the library exports.
CONTROL_FUNCTIONS: dict[str, tuple[object, list[object]]] = {
    "sen_abi_version": (_c.c_int, []),
    "sen_library_version": (_c.c_char_p, []),
    # env plugin: the values it serves
    "sen_env_reset": (None, []),
    "sen_env_set": (_c.c_int, [_c.c_char_p, _c.c_char_p]),
    "sen_env_set_group": (_c.c_int, [_c.c_char_p, _c.c_char_p, _c.c_char_p]),
    "sen_env_environment_wins": (_c.c_int, [_c.c_char_p]),
    "sen_select_group": (_c.c_int, [_c.c_char_p]),
    "sen_selected_group": (_c.c_int, [_c.c_char_p, _c.c_size_t]),
    "sen_env_plugin_abi": (_c.c_char_p, []),
    "sen_nccl_version": (_c.c_int, [_c.c_char_p, _c.c_size_t]),
    # the reads log
    "sen_set_reads_log_fd": (_c.c_int, [_c.c_int]),
    "sen_reads_log_status": (_c.c_int, []),
    "sen_reads_reset": (None, []),
    "sen_flush_reads_counts": (_c.c_int, []),
    # tuner
    "sen_tuner_reset": (None, []),
    "sen_tuner_add_rule": (
        _c.c_int,
        [_c.c_int, _c.c_uint64, _c.c_uint64, _c.c_uint64, _c.c_uint64, _c.c_uint64, _c.c_uint64,
         _c.c_char_p, _c.c_int, _c.c_int, _c.c_int],
    ),
    "sen_tuner_rule_count": (_c.c_int, []),
    "sen_tuner_last_decision": (_c.c_int, [_INT_P]),
}

ENV_ABIS = (1, 2)
TUNER_ABIS = (2, 3, 4, 5, 6)
# What each tuner ABI is for (src/plugin/tuner.cc picks the newest one a release knows).
TUNER_ABI_SINCE = {2: "2.21", 3: "2.22", 4: "2.24", 5: "2.28", 6: "2.30"}


def check_u64(value: int, what: str) -> int:
    """``value`` if it fits ``uint64_t``/``size_t``; else ValueError (ctypes would wrap it silently)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINT64_MAX:
        raise ValueError(f"{what} must be an integer from 0 to {UINT64_MAX} (C's size_t), not {value!r}")
    return value


def check_int(value: int, what: str, low: int = 0) -> int:
    """``value`` if it fits a C ``int`` (and is at least ``low``); else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= INT_MAX:
        raise ValueError(f"{what} must be an integer from {low} to {INT_MAX} (C's int), not {value!r}")
    return value


# --- NCCL's plugin structs (see the C sources for where each layout comes from) -----------------------------

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
