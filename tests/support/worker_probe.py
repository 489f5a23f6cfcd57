"""A test-only start-up hook for SGLang's worker processes: look from inside, or write as a stranger would.

``install(directory, ...)`` writes a ``sitecustomize.py`` into ``directory``; put that directory on
``PYTHONPATH`` of a real SGLang launch. In every process that imports SGLang's ``parallel_state``, the
call that builds the distributed groups (``init_distributed_environment``, inside the scheduler, after
the plugin applied and restored its profile) first

- writes the process's NCCL_* / TORCH_NCCL_* environment to ``<directory>/probe-<pid>.json``
  (evidence from inside the worker, independent of the plugin's own audit), and
- optionally sets one variable, the way a stray library call in the worker would (``foreign``).

It is neither a stand-in for SGLang nor for the plugin: SGLang and the plugin run unchanged.
"""

from __future__ import annotations

from pathlib import Path

SITECUSTOMIZE = """
import json, os
_DIR = {directory!r}
_FOREIGN = {foreign!r}


def _probe(wrapped, instance, args, kwargs):
    env = {{k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_"))}}
    with open(os.path.join(_DIR, "probe-%d.json" % os.getpid()), "w") as fh:
        json.dump(env, fh)
    if _FOREIGN:
        name, value = _FOREIGN
        os.environ[name] = value
    return wrapped(*args, **kwargs)


def _when_imported(module):
    import wrapt
    wrapt.wrap_function_wrapper(module, "init_distributed_environment", _probe)


try:
    import wrapt
    wrapt.register_post_import_hook(_when_imported, "sglang.srt.distributed.parallel_state")
except ImportError:
    pass
"""


def install(directory: Path, *, foreign: tuple[str, str] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        SITECUSTOMIZE.format(directory=str(directory), foreign=foreign)
    )
    return directory


def probes(directory: Path) -> dict[int, dict[str, str]]:
    """pid -> the NCCL environment each probed worker held when it started building its groups."""
    import json

    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in directory.glob("probe-*.json")}
