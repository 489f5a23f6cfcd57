"""The phase ledger's file: its name in the launch directory, its lines, and the switch that turns it on.

One file per process, ``ledger-<identity>.jsonl`` next to the process's audit records, created by
:func:`~sglang_eagle_nccl.contract.launch_dir.open_record_file` (the one rule set for files in a
launch directory). The writer (:mod:`sglang_eagle_nccl.inproc.evidence.ledger`) aggregates in the
process and appends, at each flush, one line per key whose count changed since the last flush,
carrying the key's **cumulative** count (one ``os.write`` per line, ``O_APPEND``). Rule for every
reader: *the count of a key is the largest count any line gives it*. Counts only grow, so that
rule makes a reader independent of how many flushes happened, of a last line cut short by a kill
(it does not parse and is skipped), and of the order lines are read in.

Line kinds (field ``kind``):

- ``process``: once, first: ``identity`` (launch_dir.identity), ``sglang_version``, ``ranks``
  (the process's scheduler ranks when known), ``tp_rank``;
- ``step``: one forward of a phase: :data:`STEP_KEY` fields and ``count``;
- ``collective``: a collective SGLang issued through a group coordinator, inside the step
  context named by the :data:`STEP_KEY` fields: :data:`COLLECTIVE_KEY` fields and ``count``;
- ``replay``: a CUDA-graph replay (no Python runs inside one; the captured collectives are the
  ``capture`` lines): :data:`STEP_KEY` fields, ``runner`` and ``count``.

Imported by the writer inside SGLang's processes and by ``audit``; the switch's variable is
``names.ENV_LEDGER``.
"""

PREFIX = "ledger-"
SUFFIX = ".jsonl"
FLAG = "--nccl-ledger"

# The context every collective is counted in: which phase, how it ran, and the forward's shape.
STEP_KEY = ("phase", "mode", "batch", "tokens")
COLLECTIVE_KEY = STEP_KEY + ("op", "group", "ranks", "bytes", "dtype", "impl")
KINDS = ("process", "step", "collective", "replay")

# How a collective ran: in Python, while a CUDA graph was being captured, or during a replay.
MODES = ("eager", "capture", "replay")

# The phases, in the order the one screen shows them (the seed's question first).
PHASES = ("target verify", "decode", "extend", "draft decode", "draft extend", "mixed", "idle")
OUTSIDE = "outside a forward pass"

# Implementations (the words ``audit`` shows; ``NCCL_CARRIED`` are those NCCL's tuner decides for).
IMPLEMENTATIONS = {
    "ca": "custom all-reduce",
    "pcie_ipc": "PCIe IPC all-reduce",
    "qr": "quick all-reduce",
    "pymscclpp": "MSCCL++",
    "torch_symm_mem": "torch symmetric memory",
    "symm_mem_pynccl": "PyNccl on symmetric memory",
    "flashinfer": "FlashInfer all-reduce",
    "pynccl": "PyNccl",
    "torch_nccl": "torch ProcessGroupNCCL",
    "gloo": "gloo (torch.distributed on CPU)",
    "shm": "SGLang's CPU shared-memory all-reduce",
    "torch": "torch.distributed (device group)",
    "hpu": "HPU communicator",
    "xpu": "XPU communicator",
    "unidentified": "not identified",
}
NCCL_CARRIED = ("pynccl", "torch_nccl", "symm_mem_pynccl")


def file_name(stem: str) -> str:
    """The ledger file of the process whose ``launch_dir.file_stem`` is ``stem``."""
    return PREFIX + stem + SUFFIX


def is_ledger_file(name: str) -> bool:
    return name.startswith(PREFIX) and name.endswith(SUFFIX)


def key_of(line: "dict") -> "tuple":
    """The aggregation key of a ``step`` / ``collective`` / ``replay`` line (``kind`` included)."""
    kind = line.get("kind")
    fields = COLLECTIVE_KEY if kind == "collective" else STEP_KEY + (("runner",) if kind == "replay" else ())
    return (kind,) + tuple(line.get(f) for f in fields)
