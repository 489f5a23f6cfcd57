"""ci/files_alone.py: each file in a pytest session of its own, so a file that passes only after
another file ran fails there.

Run through the script's command line on files written here: one that stands alone, one that needs
state another file leaves behind (a module attribute, an environment variable), a conftest whose
session fixture every file's session must run again.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "ci" / "files_alone.py"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, body in files.items():
        (root / name).write_text(textwrap.dedent(body))


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=root, capture_output=True, text=True, timeout=120
    )


LEAVES_STATE = """
    import os
    import sys

    def test_leaves_state():
        sys.modules["leftover_from_a"] = sys  # a module another file finds in sys.modules
        os.environ["FILES_ALONE_FROM_A"] = "1"
"""
NEEDS_MODULE = """
    import sys

    def test_needs_what_a_left():
        assert "leftover_from_a" in sys.modules
"""
NEEDS_ENV = """
    import os

    def test_needs_the_variable_a_set():
        assert os.environ.get("FILES_ALONE_FROM_A") == "1"
"""
COUNTS_SESSIONS = """
    import os

    def test_its_own_session(session_marker):
        # the conftest's session fixture ran in this file's own session, in this process
        assert session_marker == os.getpid()
"""
CONFTEST = """
    import os
    import pytest

    @pytest.fixture(scope="session")
    def session_marker():
        return os.getpid()
"""


def test_files_that_need_another_file_fail_alone_and_the_others_pass(tmp_path):
    _write(tmp_path, {"conftest.py": CONFTEST, "test_a.py": LEAVES_STATE, "test_b.py": NEEDS_MODULE,
                      "test_c.py": NEEDS_ENV, "test_d.py": COUNTS_SESSIONS})
    # Together, in one session (a first), every file passes: the dependence is invisible there.
    together = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "test_a.py", "test_b.py", "test_c.py", "test_d.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert together.returncode == 0, together.stdout
    done = _run(tmp_path, "--jobs", "2", "--seed", "7", "test_a.py", "test_b.py", "test_c.py", "test_d.py")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "  alone: test_a.py: 1 passed" in "\n".join(lines)
    assert "  alone: test_d.py: 1 passed" in "\n".join(lines)
    for dependent in ("test_b.py", "test_c.py"):
        (said,) = [ln for ln in lines if ln.startswith(f"  alone: {dependent} FAILED (exit 1)")]
        assert "depends on another file" in said
    # The failing file's own output follows, quoted.
    assert any(ln.startswith("    | ") and "FILES_ALONE_FROM_A" in ln for ln in lines), done.stdout
    head, _, names = lines[-1].partition(" fail alone: ")
    assert head == "ci/files_alone: 2 of 4 file(s)" and set(names.split(", ")) == {"test_b.py", "test_c.py"}


def test_state_left_by_one_file_never_reaches_the_next(tmp_path):
    # One at a time, a before b: b still runs in a process that never saw a's session.
    _write(tmp_path, {"test_a.py": LEAVES_STATE, "test_b.py": NEEDS_MODULE})
    done = _run(tmp_path, "--jobs", "1", "test_a.py", "test_b.py")
    assert done.returncode == 1, done.stdout
    assert "  alone: test_a.py: 1 passed" in done.stdout
    assert "  alone: test_b.py FAILED (exit 1)" in done.stdout


def test_every_file_standing_alone_is_exit_0(tmp_path):
    _write(tmp_path, {"conftest.py": CONFTEST, "test_a.py": LEAVES_STATE, "test_d.py": COUNTS_SESSIONS})
    done = _run(tmp_path, "--seed", "1", "test_d.py", "test_a.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [ln.split(":")[0] for ln in done.stdout.splitlines()] == ["  alone"] * 2
    assert "PytestAssertRewriteWarning" not in done.stdout


def test_bad_usage_is_exit_2_and_names_the_file(tmp_path):
    done = _run(tmp_path, "test_nowhere.py")
    assert done.returncode == 2 and "no such file: test_nowhere.py" in done.stderr
    done = _run(tmp_path, "--jobs", "0", "test_nowhere.py")
    assert done.returncode == 2 and "--jobs 0: at least 1" in done.stderr
