"""--help text that never splits a word at its hyphens.

The rule: click rewraps help paragraphs to the terminal's width, and Python's ``textwrap`` (which it
uses) may break a line after any hyphen inside a word. A command's name (``sglang-eagle-nccl``), a
flag (``--nccl-profile``) or a profile (``pcie-8gpu-eagle``) split across two lines cannot be read
or pasted. So in every --help text, a line breaks only at whitespace, never after a hyphen. (Below
about 64 columns an option's help column gets narrower than its longest words, and click cuts such a
word wherever it must, as it does any word longer than its column.)

How: before click wraps a text, each hyphen between two non-space characters is replaced by a
character ``textwrap`` never breaks at (U+2011, the non-breaking hyphen, one column wide like
``-``), and the finished help is given back its hyphens. Every command of the group gets this
formatter through :func:`unbroken_hyphens` (``main.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

import click

_GLUE = "\u2011"
# A hyphen with a non-space character before it: where textwrap would break a word. A leading
# hyphen (``-h``, ``--json``) never splits a word, but is glued too when it follows one (``a--b``).
_INNER_HYPHEN = re.compile(r"(?<=\S)-")


def _glued(text: str) -> str:
    return _INNER_HYPHEN.sub(_GLUE, text)


class UnbrokenHyphenFormatter(click.HelpFormatter):
    """click's formatter, wrapping only at whitespace."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(_glued(prog), _glued(args), prefix)

    def write_text(self, text: str) -> None:
        super().write_text(_glued(text))

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(first, _glued(second)) for first, second in rows], col_max, col_spacing)

    def getvalue(self) -> str:
        return super().getvalue().replace(_GLUE, "-")


class UnbrokenHyphenContext(click.Context):
    formatter_class = UnbrokenHyphenFormatter


def _commands(command: click.Command) -> Iterator[click.Command]:
    yield command
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            yield from _commands(sub)


def unbroken_hyphens(commands: Iterable[click.Command]) -> None:
    """Give ``commands`` and every subcommand the formatter that never splits a word at a hyphen."""
    for root in commands:
        for command in _commands(root):
            command.context_class = UnbrokenHyphenContext
