"""Child of bench/activation_cost.py: what the ``.pth`` line does at interpreter start in a process
SGLang spawned (gate set, signed serialised profile inherited), in one window.

The gate is not in the environment at start (``BENCH_GATE`` carries it), so the ``.pth`` line did
nothing; the window then runs the same call it would have made, with nothing of the plugin or
of SGLang imported yet, as at interpreter start.
"""

from __future__ import annotations

import os

from _probe import record, report, window

os.environ["SGLANG_EAGLE_NCCL"] = os.environ.pop("BENCH_GATE")

with window("activation"):
    from sglang_eagle_nccl import _gate

    _gate.pth_entry()

from sglang_eagle_nccl.inproc.boot.state import STATE  # noqa: E402

# The digest matched: the values were not validated again here (the profile object is built
# only if a hook needs it).
record(active=STATE.active, refused=STATE.refused, is_root=STATE.is_root, trusted=STATE._profile is None,
       audit=STATE.audit is not None)
report()
