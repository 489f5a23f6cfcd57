"""README.md and docs/*.md stay true by construction (issue 27).

The rule (tests/support/readme.py): every shell or console block is either run by a test, exactly as
written, with its output checked (``<!-- tested as written: tests/...::test -->`` right above it), or
says why it cannot run here (``<!-- not run here: <why> -->``). Each "tested" marker names a test that
exists and marks one block only. The blocks a plain machine can run are run below: the commands of the
profiles page, its example profile, the speculative-decoding transcripts (their whole output), the
tuner query. Each runs through the installed console script, from a fresh working directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support.readme import NOT_RUN, REPO, TESTED, blocks, code_block

CLI_DIR = Path(sys.executable).parent  # the console script sits beside this interpreter
FIXTURES = REPO / "tests" / "fixtures" / "sglang_logs"


def test_every_shell_block_is_run_or_says_why_not():
    shell = [b for b in blocks() if b.is_shell]
    assert len(shell) > 15
    bare = [b.where for b in shell if not (TESTED.match(b.marker) or NOT_RUN.match(b.marker))]
    assert not bare, f"shell blocks without a marker (tested as written / not run here): {bare}"
    for b in shell:
        why = NOT_RUN.match(b.marker)
        if why:
            assert len(why.group(1).split()) >= 3, f"{b.where}: say why it cannot run here"


def test_every_tested_marker_names_one_block_and_a_real_test():
    markers = [TESTED.match(b.marker) for b in blocks()]
    named = [(m.group(1), m.group(2)) for m in markers if m]
    assert len(named) == len(set(named)), "a test marks two blocks"
    for path, name in named:
        source = (REPO / path).read_text("utf-8")
        assert re.search(rf"^def {name}\(", source, re.M), f"{path} has no test or fixture {name}"


def _shell(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_EAGLE_NCCL", "NCCL_"))}
    env["PATH"] = f"{CLI_DIR}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _commands(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_profiles_page_commands(tmp_path):
    """Each line as written; `my.toml` is the page's own example profile (the next block)."""
    _, commands = code_block("tests/unit/test_doc_blocks.py::test_profiles_page_commands")
    _, example = code_block("tests/unit/test_doc_blocks.py::test_profile_file_example_is_valid")
    (tmp_path / "my.toml").write_text(example)
    expect = {  # the command's start -> (exit status, what its output must hold)
        "sglang-eagle-nccl profiles list": (0, "pcie-8gpu-eagle"),
        "sglang-eagle-nccl profiles show pcie-8gpu debug": (0, "Profile: pcie-8gpu+debug"),
        "sglang-eagle-nccl validate my.toml --nccl-env NCCL_BUFFSIZE=4M": (1, "NCCL_BUFFSIZE='4M'"),
        "sglang-eagle-nccl explain NCCL_P2P_LEVEL": (0, "NCCL_P2P_LEVEL"),
    }
    lines = _commands(commands)
    assert [next(k for k in expect if line.startswith(k)) for line in lines] == list(expect)
    for line in lines:
        code, shows = next(v for k, v in expect.items() if line.startswith(k))
        proc = _shell(line, tmp_path)
        assert proc.returncode == code, (line, proc.stdout + proc.stderr)
        assert shows in proc.stdout + proc.stderr, (line, proc.stdout + proc.stderr)
    # The comment on the validate line says what it does: exit 1, every problem listed.
    assert "# exit 1, every problem listed" in commands


def test_profile_file_example_is_valid(tmp_path):
    _, example = code_block("tests/unit/test_doc_blocks.py::test_profile_file_example_is_valid")
    (tmp_path / "my.toml").write_text(example)
    proc = _shell("sglang-eagle-nccl validate my.toml", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: profile 'my.toml' is valid" in proc.stdout


def _transcript(test_id: str, cwd: Path) -> None:
    """A console block: `$ command` lines, each followed by its whole output, compared line by line."""
    _, text = code_block(test_id)
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    assert steps
    for command, want in steps:
        proc = _shell(command, cwd)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.rstrip("\n").splitlines() == want


def test_estimate_transcript(tmp_path):
    _transcript("tests/unit/test_doc_blocks.py::test_estimate_transcript", tmp_path)


def test_analyze_transcript(tmp_path):
    """The page names the fixtures it ran on, saved as plain.log and eagle3.log."""
    shutil.copy(FIXTURES / "real-cpu-0.5.23-engine-tp2-plain.log", tmp_path / "plain.log")
    shutil.copy(FIXTURES / "real-cpu-0.5.23-engine-tp2-eagle3.log", tmp_path / "eagle3.log")
    _transcript("tests/unit/test_doc_blocks.py::test_analyze_transcript", tmp_path)


def test_tuner_asks_the_shipped_library(tmp_path):
    _, text = code_block("tests/unit/test_doc_blocks.py::test_tuner_asks_the_shipped_library")
    (line,) = _commands(text)
    proc = _shell(line, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # pcie-8gpu-eagle's rule: LL over Ring below 512 KiB, so a 14 KiB all-reduce of the tp group gets it.
    assert re.search(r"^Answer of \S+ [^:]+: tuner\.rules#1: Ring/LL$", proc.stdout, re.M), proc.stdout
