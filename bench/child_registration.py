"""Child of bench/registration.py: hook registration in an SGLang process, measured after
``sglang.srt.managers.scheduler`` is imported (what a scheduler child holds when SGLang's plugin
loader calls the entry point: ~5,900 modules).

The gate is not in the environment at interpreter start (``BENCH_GATE`` carries it), so nothing
of the plugin runs before the windows; the rest of the environment is what SGLang's children
inherit (the signed serialised profile). Windows:

- ``activation``: plan + apply of the serialised profile (SGLang already imported here; the
  interpreter-start figure is bench/activation_cost.py);
- ``registration``: selection of the patch set and installation of every hook, then
  ``HookRegistry.apply_hooks()`` as ``load_plugins()`` runs it after the entry point;
- ``native``: configuring the native NCCL plugins library (ctypes), the rest of the entry point.
"""

from __future__ import annotations

import os
import sys

import sglang  # noqa: F401
import sglang.srt.managers.scheduler  # noqa: F401
from _probe import record, report, window

try:
    from sglang.srt.plugins.hook_registry import HookRegistry
except ImportError:  # SGLang < 0.5.11
    HookRegistry = None

os.environ["SGLANG_EAGLE_NCCL"] = os.environ.pop("BENCH_GATE")
modules = len(sys.modules)

with window("activation"):
    from sglang_eagle_nccl.inproc.boot import activation

    activation.apply(activation.plan(), origin="bench")

with window("registration"):
    from sglang_eagle_nccl.inproc.hooks import installer

    installer.install_patches(from_entry_point=True)
    if HookRegistry is not None:
        HookRegistry.apply_hooks()

with window("native"):
    from sglang_eagle_nccl.inproc.boot import native

    native.sync()

from sglang_eagle_nccl.inproc.boot.state import STATE  # noqa: E402
from sglang_eagle_nccl.inproc.hooks.patching import STATE as installed  # noqa: E402

record(modules=modules, installed=installed.installed, pending=sorted(installed.pending), patch_set=STATE.selection.patch_set.id,
       index=type(STATE.selection).__name__ == "IndexedSelection")
report()
