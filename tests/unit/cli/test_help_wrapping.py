"""--help never splits a word at its hyphens (cli/help_format.py), at any terminal width from 64 columns.

The reference: every hyphenated word of a command's own texts (its docstring, each option's help,
its usage) appears whole in the help click renders for it, wherever the lines break; and the
lines break only at whitespace: no line ends in a word's hyphen. (Narrower than 64 columns an option's
help column is shorter than its longest words, which click then cuts anywhere: not a hyphen rule.)
"""

from __future__ import annotations

import re

import click
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.cli.main import main

HYPHENATED = re.compile(r"[^\s\-][^\s]*-[^\s]*[^\s\-]")


def _commands(command: click.Command, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += _commands(sub, (*path, name))
    return found


COMMANDS = _commands(main, ("sglang-eagle-nccl",))


def _rendered(path: tuple[str, ...], command: click.Command, width: int) -> str:
    ctx = command.context_class(command, info_name=" ".join(path), terminal_width=width, max_content_width=width)
    return command.get_help(ctx)


def _source_words(command: click.Command) -> set[str]:
    texts = [command.help or "", command.short_help or ""]
    texts += [p.help or "" for p in command.params if isinstance(p, click.Option)]
    return {w.strip(".,;:()'\"`") for t in texts for w in t.split() if HYPHENATED.fullmatch(w.strip(".,;:()'\"`"))}


def test_every_command_uses_the_formatter():
    assert len(COMMANDS) > 10
    for path, command in COMMANDS:
        assert command.context_class.formatter_class.__name__ == "UnbrokenHyphenFormatter", path


@settings(max_examples=60, deadline=None)
@given(width=st.integers(min_value=64, max_value=200), which=st.integers(min_value=0))
def test_no_hyphenated_word_is_split(width, which):
    path, command = COMMANDS[which % len(COMMANDS)]
    out = _rendered(path, command, width)
    words = _source_words(command)
    # The command's own name in its usage line, always.
    words.add(path[0])
    for word in words:
        core = word.split("\b")[-1]
        if len(core) > 3:
            assert core in out.replace("\n", " \n"), (path, width, core)
    for line in out.splitlines():
        assert not re.search(r"\w-$", line), (path, width, line)


def test_main_help_names_the_audit_command_whole_at_80_columns():
    """The shrunk example of issue 27: `sglang-eagle-nccl audit` was split after 'sglang-eagle-'."""
    out = _rendered(("sglang-eagle-nccl",), main, 80)
    assert "sglang-eagle-nccl audit <audit dir printed at start>" in out
