"""``sglang-eagle-nccl``: the command group. Each command lives in the module of its group.

Exit codes: 0 success; 1 a negative verdict (``validate`` found errors, ``audit`` found a
communicator without the profile, ``preflight`` failed); 2 bad input (unknown profile,
malformed file or flag), in which case nothing was applied or started.

Everything a command writes to stdout and stderr (click's own usage errors included) goes through
the one terminal escaper (:func:`~sglang_eagle_nccl.contract.terminal.printable_lines`): a profile
name, group label, value, file or host name quoted in a line cannot act on the terminal. The
machine outputs pass through unchanged by construction: JSON is ASCII with its own escapes, and
``env``'s formats hold no character the escaper touches (they quote or refuse it).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import click

from sglang_eagle_nccl import __version__
from sglang_eagle_nccl.cli import audit, diagnose, profiles, run, tuner
from sglang_eagle_nccl.cli import sizes as sizes_cli
from sglang_eagle_nccl.cli.help_format import unbroken_hyphens
from sglang_eagle_nccl.contract.terminal import printable_lines


class _Escaping:
    """A text stream that writes everything through the terminal escaper (see the module docstring);
    its ``buffer`` does the same to bytes (click writes some of its output as bytes)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._stream.write(printable_lines(text))
        return len(text)

    @property
    def buffer(self) -> _EscapingBytes:
        return _EscapingBytes(self._stream)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding ... of the real stream
        return getattr(self._stream, name)


class _EscapingBytes:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, data: bytes) -> int:
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"a bytes-like object is required, not {type(data).__name__}")
        # An undecodable byte is shown as an escape, never written raw.
        self._stream.write(printable_lines(bytes(data).decode("utf-8", "surrogateescape")))
        return len(data)

    def flush(self) -> None:
        self._stream.flush()


class _EscapingGroup(click.Group):
    def main(self, *args: Any, **kwargs: Any) -> Any:
        out, err = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Escaping(out), _Escaping(err)  # type: ignore[assignment]
        try:
            return super().main(*args, **kwargs)
        finally:
            sys.stdout, sys.stderr = out, err


@click.group(cls=_EscapingGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="sglang-eagle-nccl")
def main() -> None:
    """Make NCCL settings reach every SGLang process and communicator, and prove it.

    \b
    Three ways to use a profile:
      sglang-eagle-nccl launch --profile pcie-8gpu -- --model-path M --tp 8 ...
      python -m sglang.launch_server ... --nccl-profile pcie-8gpu --nccl-env NCCL_PROTO=LL
      SGLANG_EAGLE_NCCL=pcie-8gpu python my_engine_script.py        (Engine API)

    \b
    Then read what every process and communicator actually got:
      sglang-eagle-nccl audit <audit dir printed at start>
    """


for _command in (
    profiles.profiles, profiles.explain, profiles.validate,
    run.launch, run.env_cmd, run.preflight,
    audit.audit_cmd,
    diagnose.doctor, diagnose.analyze, diagnose.estimate,
    tuner.tuner_cmd,
):
    main.add_command(_command)

main.add_command(sizes_cli.sizes)
unbroken_hyphens([main])


if __name__ == "__main__":  # pragma: no cover
    main()
