"""Child of bench/registration.py: the plugin in SGLang's launcher when the launch flags, not
the gate, ask for it (``python -m sglang.launch_server ... --nccl-profile P``).

SGLang's ``launch_server`` module is imported (not run), ``sys.orig_argv`` says what the command
line would be, then the two calls the launcher makes before it starts anything are measured:

- ``load_plugins``: SGLang's plugin loader; it imports ``sglang_eagle_nccl._gate`` and calls the
  entry point, which adds the ``--nccl-*`` flags to SGLang's parser;
- ``parse``: ``prepare_server_args(argv)``; with the flags, the plugin resolves and validates the
  profile, applies it and installs the patch set in the launcher.

``BENCH_FLAGS=0`` runs the same calls without the flags and with the plugin left out of
``SGLANG_PLUGINS``: SGLang's own cost, which the parent subtracts.
"""

from __future__ import annotations

import os
import sys
import time

from _probe import record, report, window

FLAGS = os.environ.pop("BENCH_FLAGS", "1") == "1"
argv = ["--model-path", os.environ.pop("BENCH_MODEL_PATH")]
if FLAGS:
    argv += ["--nccl-profile", os.environ.pop("BENCH_PROFILE")]
sys.orig_argv = [sys.executable, "-m", "sglang.launch_server", *argv]

import sglang.launch_server  # noqa: E402, F401
from sglang.srt.plugins import load_plugins  # noqa: E402
from sglang.srt.server_args import prepare_server_args  # noqa: E402

# Time the plugin's own calls inside SGLang's. The plugin's modules are wrapped as they are
# imported (importing them here would take their import out of the windows).
spent: dict[str, float] = {}


def _timed(module: object, name: str, label: str) -> None:
    original = getattr(module, name)

    def timed(*args: object, **kwargs: object) -> object:
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + (time.process_time() - start) * 1000

    setattr(module, name, timed)  # callers look the name up at call time


class _Watch:
    """Meta-path finder that runs ``callback(module)`` right after one of ``targets`` is executed."""

    def __init__(self, targets: dict[str, object]) -> None:
        self.targets = targets

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if name not in self.targets:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None:
            return spec
        loader, callback = spec.loader, self.targets.pop(name)

        class Loader:
            def create_module(self, spec: object) -> object:
                return loader.create_module(spec)

            def exec_module(self, module: object) -> None:
                loader.exec_module(module)
                callback(module)

        spec.loader = Loader()
        return spec


if FLAGS:
    sys.meta_path.insert(0, _Watch({
        "sglang_eagle_nccl._gate": lambda m: _timed(m, "sglang_plugin", "entry_point_ms"),
        "sglang_eagle_nccl.inproc.hooks.hook_cli": lambda m: _timed(m, "activate_from_cli", "flags_activation_ms"),
        "sglang_eagle_nccl.inproc.hooks.installer": lambda m: _timed(m, "install_patches", "install_patches_ms"),
    }))

with window("load_plugins"):
    load_plugins()

with window("parse"):
    prepare_server_args(argv)

if FLAGS:
    from sglang_eagle_nccl.inproc.boot.state import STATE
    from sglang_eagle_nccl.inproc.hooks.patching import STATE as installed

    record(active=STATE.active, origin=STATE.origin, installed=installed.installed,
           **{k: round(v, 3) for k, v in spent.items()})
report()
