"""Where the CI scripts keep what they download and build (SGLang wheels, venvs, matrix results, logs).

One rule, for every script under ci/ and the tests that look there:

1. ``$SGLANG_EAGLE_NCCL_CACHE`` when set and not empty -- always first, so a run (CI, a helper,
   a test) can give itself a cache of its own whatever the other variables say;
2. else ``$XDG_CACHE_HOME/sglang-eagle-nccl`` when ``XDG_CACHE_HOME`` is an absolute path (the XDG
   Base Directory spec: an empty or relative value is ignored);
3. else ``~/.cache/sglang-eagle-nccl``.

Steps 2 and 3 are the folder where the plugin keeps the user's hand-off key
(``sglang_eagle_nccl/contract/handoff.py``, ``key_path``), by the same XDG rule.

Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

OVERRIDE = "SGLANG_EAGLE_NCCL_CACHE"


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """The cache folder of the CI scripts under ``environ`` (default: this process's environment)."""
    env = os.environ if environ is None else environ
    if env.get(OVERRIDE):
        return Path(env[OVERRIDE])
    xdg = env.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg.startswith("/") else Path(os.path.expanduser("~")) / ".cache"
    return base / "sglang-eagle-nccl"
