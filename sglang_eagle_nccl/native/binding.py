"""The one ctypes binding of the native library: load it, check its ABI, call its ``sen_*`` functions.

Everything that talks to the library goes through :class:`Binding` -- the process's activation (which
hands the env plugin its values, the tuner its rules and the reads log its descriptor, once, when
``ctypes`` is first imported) and the diagnostics of :mod:`.library` (``tuner``, ``doctor``, tests). The
library is loaded from the exact path ``NCCL_ENV_PLUGIN`` / ``NCCL_TUNER_PLUGIN`` name, so NCCL's later
``dlopen`` of that path returns the instance configured here.

Light on purpose: ``ctypes``, ``os`` and the ABI table only; it runs inside ``import torch`` in every
SGLang process. Every integer is checked against its C type before the call (:mod:`.abi`): ctypes would
wrap it silently.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Collection, Mapping, Sequence

from sglang_eagle_nccl.native.abi import CONTROL_ABI, CONTROL_FUNCTIONS, UINT64_MAX, check_int, check_u64

# (collective id, min bytes, max bytes (exclusive; UINT64_MAX: none), min ranks, max ranks, min nodes,
#  max nodes (inclusive; UINT64_MAX: none), group label or None, algorithm id, protocol id, channels or 0)
RuleArgs = tuple[int, int, int, int, int, int, int, "str | None", int, int, int]


class BindingError(RuntimeError):
    """The library cannot be used: missing, not ours, another control ABI, or it refused a value."""


def encode(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, not {type(text).__name__}")
    data = os.fsencode(text)  # the bytes os.environ would hold for it (surrogateescape)
    if b"\0" in data:
        raise ValueError(f"{what} {text!r} contains a NUL byte")
    return data


def errno_text(code: int) -> str:
    import errno

    return f"{os.strerror(code)} ({errno.errorcode.get(code, code)})"


class Binding:
    """One loaded copy of the library (use :func:`load`: one instance per path and process)."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as exc:
            raise BindingError(f"cannot load {path}: {exc}") from None
        try:
            for name, (restype, argtypes) in CONTROL_FUNCTIONS.items():
                fn = getattr(self.lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
        except AttributeError:
            raise BindingError(f"{path} is not the sglang-eagle-nccl native library of this version "
                               "(a sen_* function is missing; reinstall the plugin)") from None
        found = self.lib.sen_abi_version()
        if found != CONTROL_ABI:
            raise BindingError(f"{path} has control ABI {found}, this plugin needs {CONTROL_ABI} (reinstall it)")

    # -- identity --

    def library_version(self) -> str:
        """Package version + source digest compiled in; ranks compare it (never the path)."""
        return self.lib.sen_library_version().decode()

    def env_plugin_info(self) -> tuple[str, str]:
        """(ABI NCCL loaded: "v1"/"v2"/"none", NCCL version NCCL announced to init or "")."""
        buf = ctypes.create_string_buffer(64)
        self.lib.sen_nccl_version(buf, len(buf))
        return self.lib.sen_env_plugin_abi().decode(), buf.value.decode()

    # -- env plugin --

    def configure_env(self, values: Mapping[str, str], groups: Mapping[str, Mapping[str, str]] | None = None,
                      environment_wins: Collection[str] = ()) -> None:
        """Replace what the env plugin serves: process-wide ``values``, per-group values (served while that
        group's label is selected) and the names the real environment wins for. Everything is encoded
        (and refused) before the library's state is touched."""
        encoded = [(None, encode(k, "variable name"), encode(v, f"value of {k}")) for k, v in values.items()]
        for group, group_values in (groups or {}).items():
            label = encode(group, "group label")
            encoded += [(label, encode(k, "variable name"), encode(v, f"value of {k}")) for k, v in group_values.items()]
        wins = [encode(name, "variable name") for name in environment_wins]
        lib = self.lib
        lib.sen_env_reset()
        for label, name, value in encoded:
            rc = lib.sen_env_set(name, value) if label is None else lib.sen_env_set_group(label, name, value)
            if rc:
                raise BindingError(f"native env plugin could not store {name.decode()}: {errno_text(rc)}")
        for name in wins:
            rc = lib.sen_env_environment_wins(name)
            if rc:
                raise BindingError(f"native env plugin could not store {name.decode()}: {errno_text(rc)}")

    def select_group(self, label: str | None) -> None:
        """Select the group whose communicator is about to be created (None clears)."""
        rc = self.lib.sen_select_group(None if label is None else encode(label, "group label"))
        if rc:
            raise BindingError(f"native plugin could not select group {label!r}: {errno_text(rc)}")

    def selected_group(self) -> str | None:
        buf = ctypes.create_string_buffer(256)
        n = self.lib.sen_selected_group(buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            self.lib.sen_selected_group(buf, len(buf))
        return os.fsdecode(buf.value)

    # -- reads log --

    def set_reads_log_fd(self, fd: int) -> str | None:
        """Hand the library this process's reads log (a descriptor opened by
        :func:`~sglang_eagle_nccl.contract.launch_dir.open_record_file`; the library owns it from now on).
        None on success, else the error to report."""
        rc = self.lib.sen_set_reads_log_fd(check_int(fd, "reads log descriptor"))
        return None if rc == 0 else f"the native library refused the NCCL reads log descriptor: {errno_text(rc)}"

    def reads_log_error(self) -> str | None:
        """None while the log is open and every write succeeded, else what went wrong."""
        rc = self.lib.sen_reads_log_status()
        if rc == 0:
            return None
        if rc < 0:
            return "no NCCL reads log was opened in this process"
        return f"writing the NCCL reads log failed: {errno_text(rc)}"

    def flush_reads_counts(self) -> str | None:
        """Append the cumulative counts line; None, or the error text (see reads_log_error)."""
        self.lib.sen_flush_reads_counts()
        return self.reads_log_error()

    def reset_reads(self) -> None:
        """Close the reads log and forget recorded reads (what a forked child starts with)."""
        self.lib.sen_reads_reset()

    # -- tuner --

    def configure_tuner(self, rules: Sequence[RuleArgs], labels: Sequence[str] | None = None) -> None:
        """Replace the tuner's rules (first match wins, in this order). Every rule is checked against the C
        types first; on any refusal the library is left with no rules, never with a prefix of them."""
        checked = [self._rule_args(rule, (labels or [])[i] if labels and i < len(labels) else f"rule {i + 1}")
                   for i, rule in enumerate(rules)]
        lib = self.lib
        lib.sen_tuner_reset()
        for (label, args) in checked:
            rc = lib.sen_tuner_add_rule(*args)
            if rc < 0:
                lib.sen_tuner_reset()
                raise BindingError(f"native tuner refused {label}: {errno_text(-rc)}")

    @staticmethod
    def _rule_args(rule: RuleArgs, label: str) -> tuple[str, tuple[object, ...]]:
        coll, lo_b, hi_b, lo_r, hi_r, lo_n, hi_n, group, algo, proto, channels = rule
        for value, what in ((lo_b, "min bytes"), (hi_b, "max bytes"), (lo_r, "min ranks"), (hi_r, "max ranks"),
                            (lo_n, "min nodes"), (hi_n, "max nodes")):
            check_u64(value, f"{label}: {what}")
        for value, what in ((coll, "collective"), (algo, "algorithm"), (proto, "protocol"), (channels, "channels")):
            check_int(value, f"{label}: {what}")
        return label, (coll, lo_b, hi_b, lo_r, hi_r, lo_n, hi_n,
                       None if group is None else encode(group, "group label"), algo, proto, channels)

    def tuner_rule_count(self) -> int:
        return self.lib.sen_tuner_rule_count()

    def last_decision(self) -> tuple[int, bool]:
        """(index of the rule this thread's last getCollInfo matched or -1, whether it changed anything)."""
        applied = ctypes.c_int(0)
        index = self.lib.sen_tuner_last_decision(ctypes.byref(applied))
        return index, bool(applied.value)


def rule_args_from_dict(rule: Mapping[str, object]) -> RuleArgs:
    """A validated profile's rule (``tuner_rules`` of the hand-off: names in NCCL's spelling) as numbers.

    Only validated rules reach this (the hand-off's digest or re-validation): a name that is not NCCL's
    raises KeyError, a bound that does not fit C's types ValueError, never a silent wrap.
    """
    from sglang_eagle_nccl.knowledge.nccl.parsing import ALGORITHMS, FUNCTIONS, PROTOCOLS

    def top(value: object) -> int:
        return UINT64_MAX if value == "inf" or value is None else int(value)  # type: ignore[call-overload]

    lo_b, hi_b = rule["bytes"]  # type: ignore[misc]
    ranks = rule.get("nranks") or [1, "inf"]
    nodes = rule.get("nnodes") or [1, "inf"]
    return (
        FUNCTIONS.index(rule["collective"]), int(lo_b), top(hi_b),  # type: ignore[arg-type]
        int(ranks[0]), top(ranks[1]), int(nodes[0]), top(nodes[1]),  # type: ignore[index]
        rule.get("group"),  # type: ignore[arg-type]
        ALGORITHMS.index(rule["algorithm"]), PROTOCOLS.index(rule["protocol"]), int(rule.get("channels") or 0),  # type: ignore[arg-type]
    )


_loaded: dict[str, Binding] = {}


def load(path: str) -> Binding:
    """The binding of the library at ``path`` (one per path and process: the instance NCCL's dlopen returns)."""
    key = os.path.realpath(path)
    binding = _loaded.get(key)
    if binding is None:
        binding = _loaded[key] = Binding(path)
    return binding
