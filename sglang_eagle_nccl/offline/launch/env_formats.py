"""How ``sglang-eagle-nccl env`` writes an environment for the launcher that will use it.

Four formats, each read back unchanged by its consumer (``tests/wheel/test_env_formats.py`` starts a
fresh process from exactly what each one printed):

- ``shell``: ``export NAME='value'`` lines for ``eval``;
- ``json``: one object, for Ray's ``runtime_env={"env_vars": ...}``;
- ``dotenv``: ``NAME=value`` lines that systemd ``EnvironmentFile=`` and ``docker --env-file`` read
  the same (refused for a value they would read differently);
- ``k8s``: the ``env:`` list of a Kubernetes container (``EnvVar`` objects: string ``name`` and
  ``value``), for a pod template or, once, for both templates of a LeaderWorkerSet.

Pure functions: they take the variables and return text.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence

FORMATS = ("shell", "json", "dotenv", "k8s")


class FormatError(ValueError):
    """The environment cannot be written in this format without changing a value."""


def dotenv_safe(value: str) -> bool:
    """Read the same, byte for byte, by systemd ``EnvironmentFile=`` and ``docker --env-file``.

    docker takes everything after the first ``=`` verbatim; systemd strips surrounding whitespace
    and interprets quotes and backslashes. A value with none of those reads the same in both.
    """
    return value == value.strip() and not any(c in value for c in "\"'\\$\n\r") and not value.startswith("#")


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


def _yaml_string(text: str) -> str:
    # A JSON string is a YAML double-quoted scalar (YAML 1.2 reads JSON's escapes): always a string,
    # never a number or a boolean ("1" stays "1"), whatever the value looks like.
    return json.dumps(text, ensure_ascii=True)


def render(variables: Mapping[str, str], fmt: str, *, node_rank_from: str | None = None,
           unset: Sequence[str] = ()) -> str:
    """The text ``env --format fmt`` prints (no trailing newline). Raises FormatError.

    ``unset``: variables the environment must not hold. Only ``shell`` says so (``unset NAME``): it is
    evaluated in a shell that may still hold them from an earlier ``eval`` (a root marker left there
    would make the next launch a child that opens no launch directory); the other formats describe a
    whole environment, which holds nothing else.
    """
    if fmt == "json":
        return json.dumps(dict(variables), indent=2, sort_keys=True)
    if fmt == "dotenv":
        problems = [k for k, v in variables.items() if not dotenv_safe(v)]
        if problems:
            raise FormatError(
                f"{', '.join(problems)}: the value holds a quote, backslash, '$', a line break or surrounding "
                "whitespace, which systemd EnvironmentFile= and docker --env-file read differently; "
                "Fix: use --format json or shell for this profile"
            )
        return "\n".join(f"{k}={v}" for k, v in variables.items())
    if fmt == "k8s":
        lines = []
        for entry in k8s_env(variables, node_rank_from=node_rank_from):
            lines.append(f"- name: {_yaml_string(entry['name'])}")
            lines.append(f"  value: {_yaml_string(entry['value'])}")
        return "\n".join(lines)
    if fmt == "shell":
        lines = [f"unset {k}" for k in unset if k not in variables]
        return "\n".join(lines + [f"export {k}={shlex.quote(v)}" for k, v in variables.items()])
    raise FormatError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
