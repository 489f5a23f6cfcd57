"""How ``sglang-eagle-nccl env`` writes an environment for the launcher that will use it.

Each format names the reader it is written for, what that reader does to a value, and how a value is
protected from it; what a format cannot carry unchanged is refused (``FormatError``, exit 2, with
the format to use instead), never written altered. No output holds a character the terminal escaper
(:mod:`sglang_eagle_nccl.contract.terminal`) would touch, so printing it changes nothing.
Every value is text that Linux can put in an environment: no NUL (refused by every format).

- ``shell``: ``export NAME=...`` lines for ``eval "$(...)"`` in a POSIX shell. A value is single-quoted
  (nothing is special inside ``'...'``; a ``'`` is written ``'\\''``). A value holding a character
  the terminal escaper escapes (a control, bidirectional or invisible format character, an
  undecodable byte) is written ``$'...'`` instead, with those characters as octal escapes of their
  bytes, so the text printed holds none of them raw: ``eval`` in bash, zsh, ksh93 (and a POSIX.1-2024
  ``sh``) reads it back byte for byte; an older ``dash`` cannot, so such a value needs bash.
- ``json``: one object, for Ray's ``runtime_env={"env_vars": ...}``. Ray passes every value through
  Python's ``os.path.expandvars`` when it starts a worker and then deletes every ``${NAME}`` (upper
  case, digits, ``_``) that was not set (``ray._private.utils.update_envs``); there is no escape
  for ``$``. A value Ray would rewrite (:func:`ray_rewrites`: ``$name`` or ``${...}``) is refused:
  every actor would see another value than the one the profile was resolved from.
- ``dotenv``: ``NAME=value`` lines, unquoted, read the same by ``docker --env-file`` (no quoting at
  all: the value is everything after the first ``=``, up to the end of the line), systemd
  ``EnvironmentFile=`` (strips leading and trailing whitespace, reads backslashes and leading
  quotes, refuses U+FEFF and noncharacters) and ``python-dotenv`` (strips whitespace, cuts
  `` #...`` comments, expands ``${NAME}``). A value any of them would read differently
  (:func:`dotenv_problem`) is refused: the format has no quoting that all three read.
- ``k8s``: the ``env:`` list of a Kubernetes container (``EnvVar`` objects: string ``name`` and
  ``value``), for a pod template or, once, for both templates of a LeaderWorkerSet. YAML
  double-quoted scalars, escaped so that the file is printable ASCII whatever the value holds
  (``\\uNNNN``, ``\\UNNNNNNNN`` above the Basic Multilingual Plane: YAML has no surrogate pairs);
  the kubelet expands ``$(NAME)`` in a value and reads ``$$`` as ``$``, so every ``$`` of a value
  is doubled (:func:`k8s_value`). A lone surrogate (an undecodable byte) is not Unicode text: refused.

Pure functions: they take the variables and return text.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence

from sglang_eagle_nccl.contract.terminal import is_unsafe
from sglang_eagle_nccl.decision.ray_env import ray_rewrites

FORMATS = ("shell", "json", "dotenv", "k8s")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


class FormatError(ValueError):
    """The environment cannot be written in this format without changing a value."""


# --- shell ---------------------------------------------------------------------------------------


def shell_quote(value: str) -> str:
    """``value`` as one shell word that ``eval`` reads back byte for byte (see the module docstring)."""
    if not any(is_unsafe(ch) for ch in value):
        return shlex.quote(value)
    out = ["$'"]
    for ch in value:
        if ch in "\\'":
            out.append("\\" + ch)
        elif is_unsafe(ch):
            # Three octal digits always: a digit that follows is never read as part of the escape.
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogateescape"))
        else:
            out.append(ch)
    out.append("'")
    return "".join(out)


# --- dotenv --------------------------------------------------------------------------------------


def _noncharacter(ch: str) -> bool:
    code = ord(ch)
    return 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE


def dotenv_problem(value: str) -> str | None:
    """Why docker ``--env-file``, systemd ``EnvironmentFile=`` and python-dotenv would not all read
    ``NAME=value`` as ``value``; None when they would."""
    if any(is_unsafe(ch) for ch in value):
        return "a control, line break, bidirectional or invisible character (written raw, read differently)"
    if any(_noncharacter(ch) for ch in value):
        return "a Unicode noncharacter (systemd refuses the file)"
    if value and (value[0].isspace() or value[-1].isspace()):
        return "leading or trailing whitespace (systemd and python-dotenv strip it)"
    if any(c in value for c in "\\'\"`"):
        return "a quote or a backslash (systemd and python-dotenv read them, docker does not)"
    if "${" in value:
        return "'${' (python-dotenv expands it, docker and systemd do not)"
    if value.startswith("#") or re.search(r"\s#", value):
        return "'#' at the start or after whitespace (python-dotenv reads a comment)"
    return None


def dotenv_safe(value: str) -> bool:
    """Read the same, character for character, by every dotenv reader the format targets."""
    return dotenv_problem(value) is None


# --- k8s -----------------------------------------------------------------------------------------


def k8s_value(value: str) -> str:
    """``value`` as written in an ``EnvVar.value``: the kubelet expands ``$(NAME)`` references to
    earlier variables there and reads ``$$`` as ``$``, so every ``$`` of a literal value is doubled."""
    return value.replace("$", "$$")


def k8s_env(variables: Mapping[str, str], *, node_rank_from: str | None = None) -> list[dict[str, str]]:
    """Kubernetes ``EnvVar`` objects for ``variables``, in order.

    ``node_rank_from``: the name of a variable the pod already has (LeaderWorkerSet's
    ``LWS_WORKER_INDEX``, which its webhook puts first in every container's list) whose value is
    this pod's node rank; the node-rank entry then refers to it, so one list serves every pod.
    """
    from sglang_eagle_nccl.contract.names import ENV_NODE_RANK

    entries = [{"name": k, "value": k8s_value(v)} for k, v in variables.items() if k != ENV_NODE_RANK]
    if node_rank_from is not None:
        entries.append({"name": ENV_NODE_RANK, "value": f"$({node_rank_from})"})
    elif ENV_NODE_RANK in variables:
        entries.append({"name": ENV_NODE_RANK, "value": k8s_value(variables[ENV_NODE_RANK])})
    return entries


def yaml_string(text: str) -> str:
    """``text`` as a YAML double-quoted scalar of printable ASCII: always a string (``"1"`` stays
    ``"1"``), every other character a YAML escape (``\\xNN``, ``\\uNNNN``, ``\\UNNNNNNNN``)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


# --- all formats ---------------------------------------------------------------------------------


def _problems(variables: Mapping[str, str], fmt: str) -> list[str]:
    problems = []
    for name, value in variables.items():
        if not _NAME.fullmatch(name):
            problems.append(f"{name!r}: not a variable name")
        elif "\0" in value:
            problems.append(f"{name}: a NUL character, which no environment can hold")
        elif fmt == "json" and ray_rewrites(value):
            problems.append(f"{name}={value!r}: Ray expands '$NAME' and '${{...}}' in every runtime_env value "
                            "(os.path.expandvars, then deletes unset '${NAME}'), with no escape")
        elif fmt == "dotenv" and (why := dotenv_problem(value)):
            problems.append(f"{name}={value!r}: {why}")
        elif fmt == "k8s" and any(0xD800 <= ord(ch) < 0xE000 for ch in value):
            problems.append(f"{name}={value!r}: an undecodable byte (a lone surrogate), which YAML cannot hold")
    return problems


_FIX = {
    "json": ("Fix: remove the '$' from that value (a profile path, the audit directory, SGLANG_EAGLE_NCCL_ENV), "
             "e.g. rename the directory; on Ray, nothing can carry it"),
    "dotenv": "Fix: use --format shell (eval) or --format k8s, or remove those characters from the value",
    "k8s": "Fix: use a value that is valid UTF-8",
    "shell": "Fix: remove that character from the value",
}


def render(variables: Mapping[str, str], fmt: str, *, node_rank_from: str | None = None,
           unset: Sequence[str] = ()) -> str:
    """The text ``env --format fmt`` prints (no trailing newline). Raises FormatError.

    ``unset``: variables the environment must not hold. Only ``shell`` says so (``unset NAME``): it is
    evaluated in a shell that may still hold them from an earlier ``eval`` (a root marker left there
    would make the next launch a child that opens no launch directory); the other formats describe a
    whole environment, which holds nothing else.
    """
    if fmt not in FORMATS:
        raise FormatError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    problems = _problems(variables, fmt)
    if problems:
        raise FormatError(f"--format {fmt} cannot carry this environment unchanged: " + "; ".join(problems)
                          + f". {_FIX[fmt]}")
    if fmt == "json":
        return json.dumps(dict(variables), indent=2, sort_keys=True)
    if fmt == "dotenv":
        return "\n".join(f"{k}={v}" for k, v in variables.items())
    if fmt == "k8s":
        lines = []
        for entry in k8s_env(variables, node_rank_from=node_rank_from):
            lines.append(f"- name: {yaml_string(entry['name'])}")
            lines.append(f"  value: {yaml_string(entry['value'])}")
        return "\n".join(lines)
    lines = [f"unset {k}" for k in unset if k not in variables]
    return "\n".join(lines + [f"export {k}={shell_quote(v)}" for k, v in variables.items()])
