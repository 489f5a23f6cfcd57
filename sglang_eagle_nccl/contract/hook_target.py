"""The names derived from a hook's target (``"package.module:Qualified.name"``).

Shared by the manifest model (``patchsets.Hook``) and the start-up index
(``manifest_index.IndexedHook``), which must answer the same questions without importing
dataclasses or packaging. Imports nothing.
"""

from __future__ import annotations


class TargetNames:
    """Mixin: ``module``, ``qualname``, ``dotted`` and ``is_sglang`` from ``self.target``."""

    __slots__ = ()
    target: str

    @property
    def module(self) -> str:
        return self.target.split(":", 1)[0]

    @property
    def qualname(self) -> str:
        return self.target.split(":", 1)[1]

    @property
    def dotted(self) -> str:
        """The target as one dotted path (SGLang's HookRegistry format)."""
        return self.target.replace(":", ".")

    @property
    def is_sglang(self) -> bool:
        return self.module == "sglang" or self.module.startswith("sglang.")
