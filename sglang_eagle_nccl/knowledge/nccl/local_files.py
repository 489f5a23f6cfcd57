"""Checks of values that name files on this machine: libraries NCCL loads, NCCL's debug file.

``NCCL_NET_PLUGIN``, ``NCCL_TUNER_PLUGIN``, ``NCCL_PROFILER_PLUGIN`` and ``NCCL_ENV_PLUGIN`` make
NCCL ``dlopen`` a shared library and run its code in every process (``src/plugin/plugin_open.cc``
``openPluginLib``): the value is code, not a setting. NCCL first passes the value to ``dlopen`` as
given (a name containing '/' is a path, relative ones resolved in the process's working
directory; any other name is searched by the dynamic linker), then, for a bare name that is not
itself a ``lib*.so`` file name, ``libnccl-<kind>-<name>.so``. ``none`` (any case) disables the
plugin; ``NCCL_NET_PLUGIN`` also takes a comma list (``src/plugin/net.cc``). Names are copied into
255-byte buffers (``MAX_STR_LEN``), so longer ones are cut.

What the plugin requires, and why:

- an absolute path must exist and be a regular file (after symlinks, as ``dlopen`` follows them),
  not writable by group or others: whoever can write it runs code in every NCCL process;
- no directory on the way to it (before and after resolving symlinks) may be writable by others
  unless it has the sticky bit (``/tmp``): in such a directory anyone can replace the file or a
  symlink to it. Group-writable directories (shared installs) and files owned by another user
  are reported as warnings: that group or user can change the code you run;
- a relative path is refused (it would be resolved against each process's working directory);
- every library that will be loaded is named in a warning, bare names included (the dynamic
  linker's search path decides which file that is);
- the plugin's own shipped libraries (``sglang_eagle_nccl/native/``) are exempt.

These checks look at the file system, so they live apart from the pure parsing rules in
:mod:`sglang_eagle_nccl.knowledge.nccl.parsing`; :func:`check_plugin_library` takes the file facts from an
injectable function so its decisions stay testable.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sglang_eagle_nccl.contract.findings import Finding, error, warning
from sglang_eagle_nccl.knowledge.nccl.parsing import AUDIT_DIR_PLACEHOLDER

# NCCL copies plugin names into char[MAX_STR_LEN = 255] buffers (plugin_open.cc, net.cc).
NCCL_PLUGIN_NAME_MAX = 254
# The installed plugin's own native libraries (built at wheel-build time): exempt from the checks.
NATIVE_DIR = Path(__file__).resolve().parents[2] / "native"


@dataclass(frozen=True)
class PathFacts:
    """What ``os.stat`` says about a library path and the directories leading to it."""

    exists: bool
    regular: bool = False
    mode: int = 0
    uid: int = -1
    real_path: str = ""
    error: str = ""
    # (directory, mode, uid) for every directory on the way, before and after resolving symlinks.
    directories: tuple[tuple[str, int, int], ...] = ()


def _ancestors(path: str) -> list[str]:
    out = []
    current = os.path.dirname(path)
    while True:
        out.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            return out
        current = parent


def inspect_path(path: str) -> PathFacts:
    """Facts about an absolute path (follows symlinks like ``dlopen``); never raises."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return PathFacts(False, error=exc.strerror or str(exc))
    real = os.path.realpath(path)
    dirs: list[tuple[str, int, int]] = []
    for d in dict.fromkeys(_ancestors(os.path.abspath(path)) + _ancestors(real)):
        try:
            dst = os.stat(d)
        except OSError:
            continue
        dirs.append((d, dst.st_mode, dst.st_uid))
    return PathFacts(True, stat.S_ISREG(st.st_mode), st.st_mode, st.st_uid, real, "", tuple(dirs))


def _is_native(real_path: str) -> bool:
    native = str(NATIVE_DIR)
    return real_path == native or real_path.startswith(native + os.sep)


def _library_names(plugin: str, entry: str) -> list[str]:
    """The file names NCCL tries for a bare ``entry`` (openPluginLib's two attempts)."""
    names = [entry]
    if not (entry.startswith("lib") and entry.endswith(".so")):
        names.append(f"libnccl-{plugin}-{entry}.so")
    return names


def _check_path_entry(
    name: str, value: str, entry: str, facts_of: Callable[[str], PathFacts]
) -> list[Finding]:
    if not entry.startswith("/"):
        return [
            error(
                name, value,
                f"{entry!r} is a relative path: dlopen resolves it in each process's working directory, "
                "so which library runs depends on where each process was started",
                f"give the absolute path of the library, e.g. {name}=/opt/nccl-plugins/{os.path.basename(entry) or 'libnccl-plugin.so'}",
            )
        ]
    facts = facts_of(entry)
    if not facts.exists:
        return [
            error(
                name, value,
                f"library {entry} cannot be found ({facts.error}); NCCL would skip the plugin with only an INFO line",
                "install the library there or correct the path",
            )
        ]
    if _is_native(facts.real_path):
        return []
    if not facts.regular:
        return [error(name, value, f"{entry} is not a regular file", "point it at the shared library file itself")]
    findings: list[Finding] = []
    if facts.mode & 0o022:
        findings.append(
            error(
                name, value,
                f"library {entry} is writable by group or others (mode {oct(stat.S_IMODE(facts.mode))}): "
                "anyone who can write it runs code in every NCCL process",
                f"chmod go-w {facts.real_path}",
            )
        )
    for directory, mode, uid in facts.directories:
        if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
            findings.append(
                error(
                    name, value,
                    f"directory {directory} is writable by everyone without the sticky bit: anyone can replace "
                    f"library {entry} there",
                    f"move the library to a directory only you or root can write, or chmod o-w {directory}",
                )
            )
        elif mode & stat.S_IWGRP and not mode & stat.S_ISVTX:
            findings.append(
                warning(
                    name, value,
                    f"directory {directory} is group-writable: members of its group can replace library {entry}",
                    f"make sure you trust that group, or chmod g-w {directory}",
                )
            )
        elif uid not in (0, os.getuid()):
            findings.append(
                warning(
                    name, value,
                    f"directory {directory} belongs to uid {uid}, neither root nor you: that user can replace "
                    f"library {entry}",
                    "make sure you trust its owner, or install your own copy",
                )
            )
    if facts.uid not in (0, os.getuid()):
        findings.append(
            warning(
                name, value,
                f"library {entry} belongs to uid {facts.uid}, neither root nor you: that user decides what code runs",
                "make sure you trust its owner, or install your own copy",
            )
        )
    if not any(f.severity == "error" for f in findings):
        findings.append(
            warning(
                name, value,
                f"NCCL will load library {facts.real_path} and run its code in every process",
                "make sure this is the library you intend",
            )
        )
    return findings


def check_plugin_library(
    name: str, value: str, plugin: str, *, facts_of: Callable[[str], PathFacts] = inspect_path
) -> list[Finding]:
    """Findings about an NCCL plugin variable (``plugin`` is net, tuner, profiler or env)."""
    if value.strip() == "":
        return [
            error(
                name, value,
                f"an empty value makes NCCL look for its default library libnccl-{plugin}.so",
                f"remove {name}, or write {name}=none to disable the plugin",
            )
        ]
    if value.strip().lower() == "none":
        return []
    # NCCL_NET_PLUGIN is split with strtok(",") (empty entries skipped); the others are one name.
    entries = [e for e in value.split(",") if e] if plugin == "net" else [value]
    findings: list[Finding] = []
    for entry in entries:
        if entry.lower() == "none":
            continue
        if "/" in entry:
            if len(entry) > NCCL_PLUGIN_NAME_MAX:
                findings.append(
                    error(
                        name, value,
                        f"a library path longer than {NCCL_PLUGIN_NAME_MAX} characters is cut short by NCCL",
                        "install the library under a shorter path",
                    )
                )
                continue
            findings += _check_path_entry(name, value, entry, facts_of)
            continue
        libraries = _library_names(plugin, entry)
        if any(len(lib) > NCCL_PLUGIN_NAME_MAX for lib in libraries):
            findings.append(
                error(
                    name, value,
                    f"NCCL builds the library name {libraries[-1][:40]}... in a {NCCL_PLUGIN_NAME_MAX + 1}-byte "
                    "buffer and cuts it short",
                    "use the plugin's short name or an absolute path",
                )
            )
            continue
        findings.append(
            warning(
                name, value,
                f"NCCL will load library {' or '.join(libraries)} from the dynamic linker's search path "
                "(LD_LIBRARY_PATH, ld.so.cache) and run its code in every process",
                f"make sure the library found first is the one you intend, or give its absolute path in {name}",
            )
        )
    return findings


def check_debug_file_directory(
    name: str, value: str, *, facts_of: Callable[[str], PathFacts] = inspect_path
) -> list[Finding]:
    """NCCL_DEBUG_FILE without %p in a world-writable directory: the name can be taken first.

    NCCL opens the file with ``fopen(name, "w")``, which follows symlinks and truncates: in a
    directory anyone can write (``/tmp``), another user can create the file or a symlink under a
    predictable name before NCCL does. ``%p`` makes each process's name depend on its pid.
    """
    if "%p" in value or not value.startswith("/"):
        return []
    directory = os.path.dirname(value)
    if "%" in directory:  # %h in the directory part: depends on the host, not checkable here
        return []
    facts = facts_of(directory)
    if not facts.exists or not facts.mode & stat.S_IWOTH:
        return []
    return [
        warning(
            name, value,
            f"directory {directory} is writable by everyone and the file name has no %p: another user can "
            "create that file or a symlink there first, and NCCL opens it with fopen('w'), following symlinks",
            f"write NCCL's output into a private directory, e.g. {name}={AUDIT_DIR_PLACEHOLDER}/nccl.%h.%p.log",
        )
    ]
