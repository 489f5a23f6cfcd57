"""SGLang's plugin loader (>= 0.5.11) as a fact: will it call this plugin's entry point?

Read by ``doctor`` (to say so) and by the hook installer in SGLang's processes (to choose the
mechanism), so both read ``SGLANG_PLUGINS`` the one way SGLang does.
"""

from __future__ import annotations

import os
from typing import Any

# The entry point's name in the ``sglang.srt.plugins`` group (pyproject.toml).
PLUGIN_NAME = "sglang_eagle_nccl"


def sglang_plugins_allowlist(environ: Any = None) -> frozenset[str] | None:
    """``SGLANG_PLUGINS`` read exactly as SGLang reads it; None means "no restriction".

    SGLang >= 0.5.11 (``sglang/srt/plugins/__init__.py`` ``load_plugins_by_group``, unchanged
    through 0.5.23) takes ``envs.SGLANG_PLUGINS.get()`` (the raw string, default ""), and only
    when it is non-empty builds ``{x.strip() for x in value.split(",") if x.strip()}``; entry
    point names are compared case-sensitively. So an unset or empty variable allows every
    plugin, while a value of only spaces or commas is non-empty and allows none.
    """
    env = os.environ if environ is None else environ
    value = env.get("SGLANG_PLUGINS")
    if not value:
        return None
    return frozenset(x.strip() for x in value.split(",") if x.strip())


def entry_point_allowed(environ: Any = None) -> bool:
    """Will SGLang's load_plugins() call our entry point? (``SGLANG_PLUGINS`` is an allow-list.)"""
    allowed = sglang_plugins_allowlist(environ)
    return allowed is None or PLUGIN_NAME in allowed
