#!/usr/bin/env python3
"""Each plain-tier file alone: a file that passes only when other files ran first fails here.

    python ci/files_alone.py [--jobs N] [--seed SEED] FILE...     (run from the repository root)

Every FILE runs in a pytest session of its own (``-x -q -p no:cacheprovider -p randomly``, the given
seed), in a process of its own; the files of one session are exactly one file. Prints one line per
file (``alone: FILE: <pytest's last line>``), and for a file that fails, its exit status and the last
40 lines of its output. Exit 0 when every file passed alone, 1 otherwise, 2 for bad usage.

Why a fork, not a fresh interpreter per file: in ci/test's cold run this step took 167 s for 127
files one at a time, and most of each file's cost was starting Python, pytest and pytest's plugins
(~0.6 s of ~0.9 s for a small file). This parent imports pytest and the pytest plugins the test
extra installs -- code that every one of those fresh interpreters imported first anyway -- and
nothing else: no test file, no conftest, no module of the plugin under test, no fixture run. Each
child forked from it starts its own pytest session, which collects the file, imports its conftest
and whatever the file imports, and runs its fixtures, as a fresh process would. The plugins were
imported before the session could register them for assertion rewriting, so pytest's warning that
it cannot rewrite *them* is silenced (it concerns their own asserts, never the test file's).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

# Imported before any fork: what each pytest session would otherwise import again.
import pytest

try:  # the test extra's plugins (a file runs without them when they are absent, as pytest would)
    import hypothesis  # noqa: F401
    import pytest_randomly  # noqa: F401
except ImportError:  # pragma: no cover - the CI venvs have both
    pass

TAIL = 40


def pytest_args(file: str, seed: int | None) -> list[str]:
    """The arguments of one file's session: stop at the first failure, no cache, in a random order."""
    args = ["-x", "-q", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    if seed is not None:
        args += ["-p", "randomly", f"--randomly-seed={seed}"]
    return [*args, file]


def _child(file: str, seed: int | None, out_fd: int) -> None:
    """In the forked child: one pytest session over ``file``, its output to ``out_fd``; never returns."""
    code = 1
    try:
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        code = int(pytest.main(pytest_args(file, seed)))
    except BaseException:  # noqa: BLE001 - a crash of the session is a failure of this file, said below
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _summary(file: str, code: int, output: str) -> tuple[bool, str]:
    lines = output.rstrip().splitlines()
    if code == 0:
        return True, f"  alone: {file}: {lines[-1] if lines else '(no output)'}"
    tail = "\n".join(f"    | {line}" for line in lines[-TAIL:])
    return False, (
        f"  alone: {file} FAILED (exit {code}) -- it passed in the full run, so it depends on another file:\n{tail}"
    )


def run(files: list[str], jobs: int, seed: int | None) -> int:
    """Run every file alone, ``jobs`` at a time; print each result as it ends; 0 when all passed."""
    pending = list(files)
    running: dict[int, tuple[str, int, str]] = {}  # pid -> (file, output fd, output path)
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="files-alone-") as tmp:
        while pending or running:
            while pending and len(running) < jobs:
                file = pending.pop(0)
                fd, path = tempfile.mkstemp(dir=tmp, suffix=".log")
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(file, seed, fd)
                running[pid] = (file, fd, path)
            pid, status = os.wait()
            if pid not in running:  # pragma: no cover - only our children exist
                continue
            file, fd, path = running.pop(pid)
            os.close(fd)
            ok, text = _summary(file, os.waitstatus_to_exitcode(status), Path(path).read_text(errors="replace"))
            print(text, flush=True)
            if not ok:
                failed.append(file)
    if failed:
        print(f"ci/files_alone: {len(failed)} of {len(files)} file(s) fail alone: {', '.join(failed)}", flush=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1, help="files at a time (default 1)")
    parser.add_argument("--seed", type=int, default=None, help="pytest-randomly's seed (default: no -p randomly)")
    parser.add_argument("files", nargs="+", metavar="FILE")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: at least 1")
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    return run(args.files, args.jobs, args.seed)


if __name__ == "__main__":
    sys.exit(main())
