"""A witness in every Ray worker of a test job, independent of the plugin: what NCCL would read when
torch creates each process group.

Put on ``PYTHONPATH`` through the job's ``runtime_env`` (the way a user ships any module to Ray
workers), Python imports it at interpreter start; with ``SEN_TEST_GROUP_PROBE_DIR`` set it wraps
``torch.distributed``'s ``init_process_group`` and ``new_group`` as their module is imported and
appends one JSON line per call to ``<dir>/probe-<pid>.jsonl``: the process's ``NCCL_*`` /
``TORCH_NCCL_*`` environment at that moment (the plugin's in-process writes and its per-group values
included: ``/proc/<pid>/environ`` would show neither), the world rank, the Ray node and the SGLang
group being built (its ``GroupCoordinator.__init__`` argument ``group_name``, read from the calling
frame). It imports nothing of the plugin and reads none of its records.
"""

import os
import sys

_DIR = os.environ.get("SEN_TEST_GROUP_PROBE_DIR")
_MODULE = "torch.distributed.distributed_c10d"


def _write(event, **fields):
    import json

    nccl = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_"))}
    node = None
    ray = sys.modules.get("ray")
    if ray is not None:
        try:
            node = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - not connected yet
            node = None
    rank = None
    c10d = sys.modules.get(_MODULE)
    try:
        if c10d is not None and c10d.is_initialized():
            rank = c10d.get_rank()
    except Exception:  # noqa: BLE001
        rank = None
    line = {"event": event, "pid": os.getpid(), "ray_node": node, "rank": rank, "nccl": nccl, **fields}
    with open(os.path.join(_DIR, f"probe-{os.getpid()}.jsonl"), "a") as fh:
        fh.write(json.dumps(line, default=str) + "\n")


def _sglang_group():
    """``group_name`` of the SGLang ``GroupCoordinator.__init__`` up the stack, if any."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        if frame.f_code.co_name == "__init__" and "group_name" in frame.f_locals:
            return frame.f_locals["group_name"]
        frame = frame.f_back
    return None


def _wrap(module):
    real_init, real_new = module.init_process_group, module.new_group

    def init_process_group(*args, **kwargs):
        result = real_init(*args, **kwargs)
        _write("init_process_group", backend=str(kwargs.get("backend", args[0] if args else None)))
        return result

    def new_group(*args, **kwargs):
        ranks = kwargs.get("ranks", args[0] if args else None)
        _write(
            "new_group",
            ranks=list(ranks) if ranks is not None else None,
            backend=str(kwargs.get("backend")),
            group=_sglang_group(),
        )
        return real_new(*args, **kwargs)

    module.init_process_group, module.new_group = init_process_group, new_group


class _Loader:
    """The real loader, then :func:`_wrap` on the fresh module."""

    def __init__(self, real):
        self._real = real

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        _wrap(module)

    def __getattr__(self, name):
        return getattr(self._real, name)


class _Finder:
    """Wraps the module right after it is executed (before ``torch.distributed`` re-exports it)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


if _DIR:
    sys.meta_path.insert(0, _Finder())
