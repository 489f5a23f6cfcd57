"""Every record a process writes into its launch directory, and every line of NCCL's reads log: one table.

Three parties use these records and used to declare them separately: the writers (about twenty
``record(...)`` / ``audit.write(...)`` calls inside SGLang's processes, and the C reads log), the
reader (which refuses a record whose fields do not have the types the judge reads) and the judge
(one small function per event). This table is the one definition:

- :data:`EVENTS`: the audit records (``proc-<identity>.jsonl``), written through
  :class:`~sglang_eagle_nccl.inproc.boot.audit_writer.AuditWriter`; :data:`COMMON` fields are added
  by the writer itself;
- :data:`READS_EVENTS`: the lines of NCCL's reads log (``nccl-reads-<identity>.jsonl``), written by
  ``native/src/*.c``; :data:`READS_COMMON` fields come from the C function ``sb_head``.

``tests/unit/contract/test_events.py`` checks every write site in the Python package and in the C sources
against the table, and the reverse (no row nothing writes, no declared field no writer sets); the
reader (:mod:`sglang_eagle_nccl.offline.audit.records`) turns the types into checks; the judge
(:mod:`sglang_eagle_nccl.offline.audit.judge`) has one function per event whose ``judged`` is True.

A field type is plain data, so this module costs nothing to import: a base type name (``"str"``,
``"int"``, ``"bool"``, ``"num"``, ``"any"``), ``ENV`` (a map of NCCL variable -> value), or a tuple
built with :func:`opt` (the type or null), :func:`list_of`, :func:`map_of` (an object with any keys)
and :func:`obj` (an object with named required / optional fields).
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    FieldType = Any


def opt(t: "FieldType") -> "FieldType":
    """``t`` or null."""
    return ("opt", t)


def list_of(t: "FieldType") -> "FieldType":
    return ("list", t)


def map_of(t: "FieldType") -> "FieldType":
    """A JSON object with any keys whose values are of type ``t``."""
    return ("map", t)


def obj(required: "dict[str, FieldType] | None" = None, optional: "dict[str, FieldType] | None" = None) -> "FieldType":
    """A JSON object with the ``required`` fields and, when present, the ``optional`` ones."""
    return ("obj", dict(required or {}), dict(optional or {}))


STR, INT, BOOL, NUM, ANY = "str", "int", "bool", "num", "any"
# An NCCL environment snapshot or expectation: variable -> value.
ENV = map_of(STR)
GROUP_DESCRIPTION = obj({}, {"group": opt(STR), "unique_name": opt(STR), "ranks": list_of(INT)})
MISMATCHES = list_of(obj({"variable": STR, "values_by_rank": map_of(opt(STR))}))
CHANGE = obj({"name": STR}, {"kind": STR, "before": opt(STR), "after": opt(STR)})
OVERWRITE = obj({"name": STR, "profile_value": opt(STR)}, {"restored": BOOL, "foreign_value": opt(STR)})


class Event:
    """One kind of record: who writes it, its fields, and whether the judge decides on it."""

    __slots__ = ("name", "writer", "required", "optional", "judged", "meaning")

    def __init__(self, name: str, writer: str, meaning: str, required: "dict[str, FieldType] | None" = None,
                 optional: "dict[str, FieldType] | None" = None, *, judged: bool = True) -> None:
        self.name = name
        self.writer = writer  # the module (or C file) that writes it, relative to the package
        self.meaning = meaning
        self.required = dict(required or {})
        self.optional = dict(optional or {})
        # False: shown or counted, never a reason for a mark (the judge has no function for it).
        self.judged = judged

    @property
    def fields(self) -> "dict[str, FieldType]":
        return {**self.required, **self.optional}


def _table(*events: Event) -> "dict[str, Event]":
    return {e.name: e for e in events}


# What every process's identity is made of (contract/launch_dir.py reads them): the host name is
# what an operator recognises; boot id and pid namespace tell apart hosts and containers that share
# a host name, and processes of two containers that share a pid; the start time tells a process
# from a later one that was given the same pid.
IDENTITY = {"host": STR, "boot_id": STR, "pidns": STR, "pid": INT, "start": STR}

# Added by AuditWriter.write to every record.
COMMON = {"event": STR, "ts": NUM, "role": STR, **IDENTITY}

EVENTS = _table(
    Event("process_start", "inproc/boot/activation.py", "the profile was applied in this process (its expectation from now on)",
          {"env": ENV, "expected_env": ENV},
          {"ppid": INT, "origin": opt(STR), "python": opt(STR), "invocation": opt(STR), "profile": opt(STR),
           "profile_sources": list_of(STR), "node_rank": opt(INT), "applied": map_of(list_of(CHANGE)),
           "group_envs": map_of(ENV), "sglang_wins": list_of(STR)}),
    Event("profile_changed", "inproc/boot/activation.py", "the expectation changed (launch flags, node rank, launch joined)",
          {"env": ENV, "expected_env": ENV},
          {"reason": opt(STR), "profile": opt(STR), "node_rank": opt(INT), "group_envs": map_of(ENV),
           "sglang_wins": list_of(STR), "changes": list_of(CHANGE)}),
    Event("native_plugins", "inproc/boot/native.py", "the native env/tuner library was configured in this process",
          {"library": STR},
          {"library_version": opt(STR), "rules_digest": opt(STR), "tuner": BOOL, "reads_log": opt(STR)}, judged=False),
    Event("nccl_reads_log", "inproc/boot/native.py",
          "this process created its NCCL reads log: only a log its process declared is read as NCCL's reads",
          {"file": STR}, judged=False),
    Event("ray_actor_env", "inproc/hooks/hook_ray.py",
          "the environment the driver gave a Ray actor through its runtime_env (what a spawned scheduler inherits)",
          {"actor_role": STR, "env": ENV},
          {"actor": opt(STR), "where": opt(STR), "node_rank": opt(INT), "placement_group": opt(STR),
           "bundle": opt(INT), "ray_node": opt(STR), "plugin_vars": list_of(STR),
           "replaced_user_values": list_of(map_of(ANY)), "ray_cluster": opt(STR)}),
    Event("ray_refused", "inproc/hooks/hook_ray.py", "the driver refused to start Ray actors (nothing was started)",
          {"error": STR}, {"actor_role": opt(STR), "where": opt(STR)}),
    Event("refused", "inproc/refusal.py", "the plugin refused SGLang in this process (at which door, and why)",
          {"door": STR, "message": STR}),
    Event("audit_error", "inproc/boot/audit_writer.py", "a record could not be encoded; what was lost",
          {}, {"lost_event": opt(STR), "error": opt(STR)}),
    Event("process_role", "inproc/hooks/hook_workers.py", "SGLang named this process (setproctitle)",
          {"title": STR}, judged=False),
    Event("patch_set", "inproc/hooks/installer.py", "the patch set chosen for the installed SGLang",
          {"patch_set": STR},
          {"sglang_version": opt(STR), "status": opt(STR), "mechanism": opt(STR),
           "uncovered": list_of(obj({"target": STR}, {"reason": opt(STR), "required": BOOL}))}),
    Event("hook_installed", "inproc/hooks/installer.py", "one hook was installed",
          {"target": STR}, {"mechanism": opt(STR), "handler": opt(STR)}, judged=False),
    Event("hook_uncovered", "inproc/hooks/installer.py", "one hook could not be installed",
          {"target": STR, "required": BOOL}, {"reason": opt(STR), "mechanism": opt(STR)}),
    Event("mechanism_fallback", "inproc/hooks/installer.py", "a hook fell back from SGLang's HookRegistry to wrapt",
          {"target": STR}, {"reason": opt(STR)}, judged=False),
    Event("plugin_error", "inproc/hooks/handlers.py", "a hook handler failed by accident (SGLang continued)",
          {}, {"handler": opt(STR), "hook": opt(STR), "error": opt(STR), "traceback": opt(STR)}),
    Event("sglang_env_writes", "inproc/hooks/hook_launcher.py", "SGLang's own NCCL writes in the launcher",
          {"writes": list_of(obj({"name": STR}, {"kind": STR, "before": opt(STR), "after": opt(STR),
                                                  "for_correctness": opt(STR)}))},
          {"where": opt(STR), "server_flags": map_of(ANY)}),
    Event("correctness_conflict", "inproc/hooks/hook_launcher.py",
          "the profile would override a value SGLang sets for correctness: refused",
          {"variables": list_of(STR)}, {"message": opt(STR)}),
    Event("env_restored", "inproc/hooks/hook_launcher.py", "after SGLang's writes in _set_envs_and_config: what was restored or kept",
          {"env": ENV}, {"overwrites": list_of(OVERWRITE)}),
    Event("scheduler_start", "inproc/hooks/hook_workers.py", "a scheduler process starts (before its distributed init)",
          {"env": ENV}, {"ranks": map_of(ANY), "overwrites": list_of(OVERWRITE)}),
    Event("consistency_ok", "inproc/hooks/hook_groups.py", "the ranks of a group agreed on every must-match variable",
          {"group": STR}, {"ranks": list_of(INT), "fingerprint": opt(STR)}, judged=False),
    Event("consistency_mismatch", "inproc/hooks/hook_groups.py", "the ranks of a group disagree",
          {"group": STR, "mismatches": MISMATCHES}, {"ranks": list_of(INT), "mode": opt(STR)}),
    Event("consistency_failed", "inproc/hooks/hook_groups.py", "the agreement check could not complete (a peer died or timed out)",
          {"group": STR}, {"error": opt(STR), "mode": opt(STR)}),
    Event("group_created", "inproc/hooks/hook_groups.py", "a GroupCoordinator was built: its torch device group",
          {"group": STR, "env": ENV},
          {"unique_name": opt(STR), "ranks": list_of(INT), "rank_in_group": opt(INT), "world_size": opt(INT),
           "global_rank": opt(INT), "backend": opt(STR), "device_group_backend": opt(STR),
           "cpu_group_backend": opt(STR), "torch_comm": opt(STR), "use_pynccl": BOOL, "has_pynccl": BOOL,
           "group_overrides": opt(ENV), "allreduce_paths": opt(map_of(ANY))}),
    Event("pynccl_created", "inproc/hooks/hook_groups.py", "SGLang's eager PyNccl communicator of a group",
          {"group": STR, "env": ENV},
          {"world_size": opt(INT), "rank": opt(INT), "available": BOOL, "disabled": BOOL, "device": opt(STR),
           "library": opt(STR), "group_overrides": opt(ENV)}),
    Event("torch_pg_options", "inproc/hooks/hook_groups.py", "SGLang asked for a torch device group's options",
          {}, {"group": opt(STR), "options": opt(STR)}, judged=False),
    Event("rank_stopped", "inproc/preflight_rank.py",
          "a preflight rank stopped before its work was done: the stage (e.g. 'import SGLang') and the error's first line",
          {"stage": STR, "error": STR}),
    Event("eagle_groups", "inproc/hooks/hook_workers.py", "which existing groups an EAGLE worker's draft and verify run on",
          {"worker": STR},
          {"module": opt(STR), "draft": opt(map_of(GROUP_DESCRIPTION)), "verify": opt(map_of(GROUP_DESCRIPTION)),
           "draft_note": opt(STR), "new_groups": BOOL}, judged=False),
)

# rank_stopped's ``stage``: what a preflight rank does, in order (inproc/preflight_rank.py). The judge
# names the cause from it: a rank stopped at STAGE_IMPORT_SGLANG never imported SGLang.
STAGE_ACTIVATION = "activation"
STAGE_IMPORT_TORCH = "import torch"
STAGE_IMPORT_SGLANG = "import SGLang"
STAGE_DISTRIBUTED_INIT = "SGLang's distributed init"
STAGE_EXERCISE = "one collective per group"

# Added by sb_head (native/src/json_line.c) to every line of the reads log.
READS_COMMON = {"event": STR, "pid": INT, "time": NUM}

READS_EVENTS = _table(
    Event("reads_log", "inproc/boot/native.py",
          "first line, written by Python when it created the file: whose reads these are (the C lines carry the pid)",
          dict(IDENTITY), judged=False),
    Event("env_init", "native/src/env_plugin.c", "NCCL loaded the env plugin (its ABI and NCCL's version)",
          {"abi": STR, "nccl_version": STR}, {"library_version": STR}),
    Event("read", "native/src/reads_log.c", "the first time NCCL read this (name, value, source, environment)",
          {"name": STR, "value": opt(STR), "source": STR, "environment": opt(STR), "disagrees": BOOL}),
    Event("tuner_init", "native/src/tuner_plugin.c", "a communicator initialised the tuner",
          {"abi": INT, "nranks": INT, "nnodes": INT, "rules": INT, "comm_id": STR, "group": opt(STR)},
          {"context": INT}, judged=False),
    Event("tuner_answers", "native/src/tuner_plugin.c",
          "what the tuner answered one communicator, counted per (collective, size, answer); cumulative: at the "
          "communicator's destroy (final) and for the live ones with every counts line; the largest count wins",
          {"abi": INT, "nranks": INT, "nnodes": INT, "comm_id": STR, "context": INT, "group": opt(STR),
           "final": BOOL,
           "answers": list_of(obj({"collective": INT, "bytes": INT, "rule": INT, "applied": BOOL, "algorithm": INT,
                                   "protocol": INT, "channels": INT, "count": INT})),
           "unrecorded": INT}, judged=False),
    Event("counts", "native/src/reads_log.c", "how often each recorded read happened (cumulative; the last line wins)",
          {"reads": list_of(obj({"name": STR, "value": opt(STR), "source": STR, "environment": opt(STR),
                                  "count": INT})),
           "unrecorded": INT}, judged=False),
)

# launch.json: written once by the process that created the launch directory (contract/launch_dir.py).
LAUNCH_META = obj(
    {},
    {
        "profile": obj(
            {},
            {
                "name": opt(STR), "env": ENV, "groups": map_of(ENV), "nodes": map_of(ENV),
                "policy": obj({}, {"sglang_wins": list_of(STR)}), "sources": list_of(STR),
                "tuner_rules": list_of(map_of(ANY)),
            },
        ),
        "launcher": opt(STR),
        "launcher_pid": opt(INT),
        "invocation": opt(STR),
        "server_flags": map_of(ANY),
    },
)
