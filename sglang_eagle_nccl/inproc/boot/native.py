"""The native NCCL plugins in this process: which library NCCL loads, what it serves, what it read.

At activation (interpreter start, cheap): :func:`~sglang_eagle_nccl.decision.plugins.plugin_env` decides ``NCCL_ENV_PLUGIN`` and
``NCCL_TUNER_PLUGIN`` from this process's own installation; they are written with the profile,
all or nothing. A plugin of the user's own in a variable the plugin needs is refused: NCCL loads
one env and one tuner plugin, and a profile the user asked for must not silently lose to another.
The tuner is needed only for ``[[tuner.rules]]``; without them the user's tuner plugin is kept.

The library is configured once per expectation, through the one binding (:mod:`sglang_eagle_nccl.native.binding`),
loaded from the same path so NCCL's ``dlopen`` finds the instance configured here: the validated
values, per-group values, ``sglang_wins`` names, tuner rules and this process's reads log (a
descriptor created under the launch directory's rules). That happens when ``ctypes`` is first
imported (see :func:`start`); once SGLang is imported, :func:`sync` only records what was
configured. The C side parses nothing. Until then the env plugin serves the real environment,
which activation has already made the profile's.
"""

import os
import sys

from sglang_eagle_nccl.contract.log import log
from sglang_eagle_nccl.decision.plugins import ENV_PLUGIN, PLUGIN_VARS, TUNER_PLUGIN
from sglang_eagle_nccl.inproc.boot.state import STATE, fault_point, record

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping
    from typing import Any


def _values(env: "Mapping[str, str]") -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in PLUGIN_VARS}


def start(desired: "Mapping[str, str]", data: "Mapping[str, Any]", run_dir: str | None) -> None:
    """At activation, before the environment is written: give the env plugin its values.

    From then on NCCL reads the profile through the plugin, in this process, whatever a later
    write to the environment does (and whether or not SGLang is ever imported here). ctypes only.

    Why not always now: importing ``ctypes`` is half of what activation would cost in a fresh
    interpreter (~2.5 ms of ~5), and every way Python reaches NCCL imports it first -- torch does
    at its own import, SGLang's PyNccl and any direct binding load libnccl through it -- while
    NCCL reads nothing before a communicator call. So until some code imports ``ctypes`` the
    library waits; the moment it is imported (by torch, usually) the values are handed over, from
    the expectation in force then. Where ``ctypes`` is already loaded it happens here, and a
    failure stops activation with the environment untouched.
    """
    path = desired.get(ENV_PLUGIN)
    if not path:
        return
    if "ctypes" in sys.modules:
        _configure(path, desired, data, run_dir)
        return
    from sglang_eagle_nccl.inproc.boot.import_trigger import after_import

    after_import("ctypes", _configure_late)


def _configure(path: str, desired: "Mapping[str, str]", data: "Mapping[str, Any]", run_dir: str | None) -> None:
    """Everything the library needs, handed over at once (all or nothing before the environment is written)."""
    from sglang_eagle_nccl.native.binding import load, rule_args_from_dict

    binding = load(path)
    rules = [rule_args_from_dict(r) for r in data.get("tuner_rules", ())]
    binding.configure_env(_values(desired), data.get("groups", {}), data.get("policy", {}).get("sglang_wins", ()))
    if desired.get(TUNER_PLUGIN):
        binding.configure_tuner(rules)
    STATE.env_control = binding
    _flush_at_exit(binding)
    if run_dir is not None and STATE.reads_log is None:
        _open_reads_log(binding, run_dir)


def _configure_late(_ctypes: "Any") -> None:
    """``ctypes`` was just imported: configure the library with what is expected now.

    The environment was written at activation, so a failure here cannot be undone atomically;
    it fails closed instead: SGLang refuses to start in this process (the library was found at
    activation, so this means a broken installation or an unwritable launch directory under
    ``audit_required``)."""
    with STATE.lock:
        path = STATE.expected_env.get(ENV_PLUGIN)
        if not STATE.active or STATE.env_control is not None or not path:
            return
        try:
            _configure(path, STATE.expected_env, STATE.data or {}, STATE.run_dir)
            fault_point("native.late")
        except Exception as exc:  # noqa: BLE001 - any failure means the profile is not in force
            from sglang_eagle_nccl.inproc.refusal import refuse

            refuse("native_late", exc)


def _open_reads_log(binding: "Any", run_dir: str) -> None:
    """Create this process's reads log under the launch directory's rules and hand the library its descriptor.

    The first line, written here, says whose reads these are (the process identity); the library's
    own lines carry only the pid.
    """
    from sglang_eagle_nccl.contract.jsonlight import dumps
    from sglang_eagle_nccl.contract.launch_dir import (
        AuditError,
        identity,
        join_launch_dir,
        open_record_file,
        reads_file_name,
    )

    name = reads_file_name()
    reads = os.path.join(run_dir, name)
    problem = None
    fd = -1
    try:
        try:
            fd = open_record_file(run_dir, name)
        except FileNotFoundError:
            join_launch_dir(run_dir)  # a node without the launcher's filesystem
            fd = open_record_file(run_dir, name)
        import time

        os.write(fd, (dumps({"event": "reads_log", "time": time.time(), **identity()}) + "\n").encode("utf-8"))
        problem = binding.set_reads_log_fd(fd)
    except (OSError, AuditError, ValueError) as exc:
        problem = str(exc)
    if problem is None:
        STATE.reads_log = reads
        # The audit reads a log only where its process says it made it: a file planted beside it is not NCCL's.
        record("nccl_reads_log", file=name)
        return
    if fd >= 0:
        os.close(fd)
    message = f"cannot write NCCL's reads log {reads}: {problem}"
    if STATE.policy.get("audit_required"):
        raise AuditError(message + " (audit_required is set)")
    log(f"WARNING: {message}; NCCL's own reads are not recorded", once="reads-log")


def sync() -> None:
    """Once SGLang is imported: make sure the library was configured, and record what it got."""
    path = STATE.expected_env.get(ENV_PLUGIN)
    if not path or STATE.data is None:
        return
    if STATE.env_control is None:
        # ctypes was never imported before SGLang (a light `sglang/__init__`, a program that imports SGLang's
        # modules before numpy or torch): configure now, before any NCCL call. The binding imports ctypes,
        # which would fire the late configuration (start) in the middle of importing the binding itself:
        # this configuration replaces that one, so it is withdrawn first (configured exactly once).
        from sglang_eagle_nccl.inproc.boot.import_trigger import cancel

        cancel("ctypes", _configure_late)
        from sglang_eagle_nccl.native.binding import BindingError

        try:
            _configure(path, STATE.expected_env, STATE.data, STATE.run_dir)
        except BindingError as exc:
            from sglang_eagle_nccl.contract.findings import ProfileError, error

            raise ProfileError([
                error(ENV_PLUGIN, path, f"the native plugin library cannot be loaded: {exc}", "reinstall sglang-eagle-nccl")
            ]) from None
    binding = STATE.env_control
    if STATE.run_dir is not None and STATE.reads_log is None:
        _open_reads_log(binding, STATE.run_dir)
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import rule_from_dict, rules_digest

    rules = [rule_from_dict(r) for r in STATE.data.get("tuner_rules", ())]
    first = STATE.native_info is None
    STATE.native_info = {"library_version": binding.library_version(), "rules_digest": rules_digest(rules)}
    if first:
        _flush_at_exit(binding)
    record(
        "native_plugins",
        library=path,
        library_version=STATE.native_info["library_version"],
        rules_digest=STATE.native_info["rules_digest"],
        tuner=binding.tuner_rule_count() > 0,
        reads_log=STATE.reads_log,
    )


def _flush_at_exit(binding: "Any") -> None:
    """Counts of repeated reads and the tuner's answers of live communicators go to the log at exit, in any
    process the library was configured in (NCCL's finalize may never run; a process may never destroy its
    communicators). Registered once per process."""
    if STATE.exit_flush is binding:
        return
    STATE.exit_flush = binding
    import atexit

    atexit.register(_flush, binding)


def _flush(binding: "Any") -> None:
    try:
        binding.flush_reads_counts()
        # A reads log that ran out of space (ENOSPC, EDQUOT) at any time: the marker beside it tells the audit.
        if binding.lib.sen_reads_log_status() in (28, 122) and STATE.reads_log:
            from sglang_eagle_nccl.contract.launch_dir import mark_disk_full

            mark_disk_full(os.path.dirname(STATE.reads_log), os.path.basename(STATE.reads_log),
                           bool(STATE.policy.get("audit_required")))
    except Exception:  # noqa: BLE001 - at exit: nothing left to report to
        pass


def resync() -> None:
    """After the expectation changed (launch flags, node rank, launch joined): hand it over again."""
    if STATE.env_control is None:
        return  # not configured yet: the configuration will use the expectation in force then
    path = STATE.expected_env.get(ENV_PLUGIN)
    if path:
        _configure(path, STATE.expected_env, STATE.data or {}, STATE.run_dir)
    if STATE.native_info is not None:
        sync()


def select_group(label: str | None) -> None:
    """Label communicators created from now on (the group hook, around GroupCoordinator.__init__)."""
    if STATE.env_control is not None:
        STATE.env_control.select_group(label)


def consistency_extras() -> dict[str, str]:
    """What ranks must agree on besides NCCL variables: the library and its rules, never paths."""
    info = STATE.native_info or {}
    return {
        "(native plugin library)": info.get("library_version", "(none)"),
        "(tuner rules digest)": info.get("rules_digest", "(none)"),
    }
