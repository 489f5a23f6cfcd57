"""The plugin's one way to talk to the operator from inside a process: a prefixed line on stderr.

Import-free (it runs at interpreter start). ``once`` keys guard messages that several paths may
reach in one process (the ``.pth`` line runs twice in a venv with a ``lib64 -> lib`` symlink).
Every line goes through the one terminal escaper (:func:`~sglang_eagle_nccl.contract.terminal.printable_lines`):
a message quotes profile names, group labels and values that anyone may have written.
"""

import sys

from sglang_eagle_nccl.contract.terminal import printable_lines

PREFIX = "[sglang-eagle-nccl]"
_said: set[str] = set()


def log(message: str, *, once: str | None = None) -> None:
    """Print ``message`` on stderr with the plugin's prefix (once per process for a given ``once`` key)."""
    if once is not None:
        if once in _said:
            return
        _said.add(once)
    try:
        print(printable_lines(f"{PREFIX} {message}"), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr closed (daemonised process): nothing left to tell
