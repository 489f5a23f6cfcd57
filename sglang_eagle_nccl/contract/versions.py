"""The one answer to "which SGLang release is this, and is it in that range" (PEP 440), and the one
lookup of the installed SGLang's version. Every gate calls these: patch-set selection (the
start-up index and :mod:`~sglang_eagle_nccl.knowledge.sglang.patchsets`), hook installation,
``doctor``, the all-reduce dispatch tables, ``sizes`` / ``tuner``, ``ci/matrix.py`` and the
benchmarks. A test fails if a second copy appears in the package, ``ci/`` or ``bench/``.

Start-up cost: this module imports nothing at import time (``os`` and ``sys`` are already
loaded). ``packaging.version`` is imported when a version is first parsed; ``packaging.specifiers``
(~20 M instructions) only for a range that the plain comparisons below cannot answer, as
:mod:`~sglang_eagle_nccl.contract.manifests` has always done at start-up.

What a version stands for:

- a pre-release or dev build of X (``0.5.24rc1``, ``0.5.21.dev0``) counts as X: it precedes X
  and carries X's code;
- a local label (``0.5.23+cu130``) is dropped: a rebuild of the same source;
- a post release stays itself (``0.5.4.post3`` changed code, e.g. the all-reduce dispatch).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from packaging.version import Version

# Longer strings are refused before parsing: packaging calls int() on every release component,
# and a 5000-digit component raises ValueError (Python's int limit), not InvalidVersion.
MAX_LENGTH = 64


def parse(text: str) -> Version:
    """``Version(text)``; raises ``packaging.version.InvalidVersion`` for anything else (also overlong input)."""
    from packaging.version import InvalidVersion, Version

    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        raise InvalidVersion(str(text)[:MAX_LENGTH])
    try:
        return Version(text)
    except ValueError:
        raise InvalidVersion(text[:MAX_LENGTH]) from None


def _as_version(version: str | Version) -> Version:
    return parse(version) if isinstance(version, str) else version


def stands_for(version: str | Version) -> Version:
    """The release whose code ``version`` runs: pre/dev/local dropped, post kept (see the module doc)."""
    from packaging.version import Version

    v = _as_version(version)
    text = v.base_version
    if v.post is not None:
        text += f".post{v.post}"
    return Version(text)


def public(version: str | Version) -> Version:
    """``version`` without its local label (``0.5.23+cu130`` -> 0.5.23): the published release it rebuilds."""
    from packaging.version import Version

    v = _as_version(version)
    return v if v.local is None else Version(v.public)


def release_of(version: str | Version) -> Version | None:
    """``version`` as a plain release (a local label dropped), or None for pre/dev/post releases and epochs.

    The start-up fast path answers only plain releases against plain bounds (see :func:`contains`).
    """
    v = _as_version(version)
    if v.epoch or v.pre is not None or v.post is not None or v.dev is not None:
        return None
    return public(v)


_COMPARISONS = {
    ">=": lambda v, b: v >= b,
    "<=": lambda v, b: v <= b,
    ">": lambda v, b: v > b,
    "<": lambda v, b: v < b,
    "==": lambda v, b: v == b,
    "!=": lambda v, b: v != b,
}


def _plain(version: Version) -> bool:
    return version.epoch == 0 and version.pre is None and version.post is None and version.dev is None and version.local is None


def _contains_plain(spec: str, release: Version) -> bool | None:
    """``spec`` contains ``release`` (a release or post release, no local label), or None when packaging must decide.

    For such a version against plain-release bounds, every special case of PEP 440's
    comparisons (pre-releases of the bound for ``<``, local labels for ``==``) is out of play and
    each clause is the plain ordering of versions, which is what ``SpecifierSet.contains(v,
    prereleases=True)`` computes -- except ``>V`` for a post release of V, which PEP 440 excludes:
    that one, and anything else (``~=``, wildcards, pre/post/dev/local bounds), goes to
    ``packaging`` itself.
    """
    from packaging.version import InvalidVersion, Version

    for clause in spec.split(","):
        clause = clause.strip()
        if not clause:
            return None
        op = clause[:2] if clause[:2] in _COMPARISONS else clause[:1]
        if op not in _COMPARISONS or clause.startswith(("===", "~=")):
            return None
        text = clause[len(op):].strip()
        if "*" in text:
            return None
        try:
            bound = Version(text)
        except InvalidVersion:
            return None
        if not _plain(bound) or (op == ">" and release.post is not None):
            return None
        if not _COMPARISONS[op](release, bound):
            return False
    return True


def contains(spec: str, version: str | Version) -> bool:
    """``SpecifierSet(spec).contains(version, prereleases=True)``, without importing it when it need not.

    A local label changes none of these comparisons against plain bounds (packaging compares the
    public version, and excludes local builds of the bound itself from ``>``), so a local build
    is answered as its public release.
    """
    v = _as_version(version)
    if not (v.epoch or v.pre is not None or v.dev is not None):
        fast = _contains_plain(spec, public(v))
        if fast is not None:
            return fast
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(spec).contains(v, prereleases=True)


def in_range(spec: str, version: str | Version) -> bool:
    """Is the release ``version`` stands for inside ``spec``? (How patch sets, hooks and data tables are gated.)"""
    return contains(spec, stands_for(version))


# --- the installed SGLang ---------------------------------------------------------------------------


def _version_beside_package(package: str) -> str | None:
    """``Version:`` of the one ``<package>-*.dist-info`` next to the imported package, or None.

    That directory is where pip installed the package this process runs; a single directory
    listing and a few lines of one file, instead of ``importlib.metadata``'s scan of every
    distribution on sys.path (~18 M instructions in an SGLang venv).
    """
    package_file = getattr(sys.modules.get(package), "__file__", None)
    if not package_file:
        return None
    site = os.path.dirname(os.path.dirname(package_file))
    try:
        found = [n for n in os.listdir(site) if n.startswith(package + "-") and n.endswith(".dist-info")]
        if len(found) != 1:
            return None  # none (editable install) or several (a broken upgrade): ask importlib.metadata
        with open(os.path.join(site, found[0], "METADATA"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    return None  # end of the headers
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        return None
    return None


def record_beside(site: str, package: str = "sglang") -> str | None:
    """The ``RECORD`` of the one ``<package>-*.dist-info`` in the folder ``site`` (pip's hash of every
    installed file: what keys a result derived from the installed source), or None."""
    try:
        found = [n for n in os.listdir(site) if n.startswith(package + "-") and n.endswith(".dist-info")]
    except OSError:
        return None
    record = os.path.join(site, found[0], "RECORD") if len(found) == 1 else None
    return record if record is not None and os.path.isfile(record) else None


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` from its package metadata, or None when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except (PackageNotFoundError, ValueError):
        return None


def installed_sglang_version() -> str | None:
    """The version of the SGLang this Python environment runs, or None when none is installed.

    The installed distribution's metadata is authoritative (it carries local tags such as
    ``+cu130``): read beside the imported package when SGLang is imported (cheap, and the copy
    this process really runs), else through ``importlib.metadata``; the package's own
    ``__version__`` only for a source checkout without metadata. Never imports SGLang.
    """
    return (
        _version_beside_package("sglang")
        or installed_version("sglang")
        or getattr(sys.modules.get("sglang"), "__version__", None)
    )
