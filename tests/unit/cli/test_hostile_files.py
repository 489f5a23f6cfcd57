"""Special and oversized files at every door a command reads a file through (issue 18, item 3).

``open()`` waits forever on a FIFO and reads ``/dev/zero`` until memory runs out, so these cases
run in one child process with an address-space limit and an alarm per case: a door without the
regular-file guard shows up as a timeout or a MemoryError there, never as a hung or swapping
test run. Every door must refuse at once with exit 2 (doctor: list the problem, exit 1), naming
the file and what it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

CHILD = """
    import json, os, resource, signal, sys
    from click.testing import CliRunner
    from sglang_eagle_nccl.cli.main import main

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a read of /dev/zero fails, not the machine

    class Stuck(Exception):
        pass

    def alarm(signum, frame):
        raise Stuck("still waiting after 10 s")

    signal.signal(signal.SIGALRM, alarm)
    for case in json.loads(sys.argv[1]):
        signal.alarm(10)
        try:
            result = CliRunner().invoke(main, case["argv"], env=case.get("env"))
            exc = result.exception
            out = {"id": case["id"], "exit": result.exit_code, "output": result.output[-4000:],
                   "exception": None if exc is None or isinstance(exc, SystemExit) else repr(exc)}
        except BaseException as exc:  # Stuck raised outside the runner's own handling
            out = {"id": case["id"], "exit": None, "output": "", "exception": repr(exc)}
        finally:
            signal.alarm(0)
        print(json.dumps(out), flush=True)
"""

MIB = 1024 * 1024


def _cases(tmp: Path) -> list[dict]:
    fifo = tmp / "pipe"
    os.mkfifo(fifo)
    (tmp / "model").mkdir()
    os.mkfifo(tmp / "model" / "config.json")
    for name, size in (
        ("huge.json", 16 * MIB + 1),
        ("huge.toml", 256 * 1024 + 1),
        ("huge.log", 256 * MIB + 1),
    ):
        with open(tmp / name, "wb") as f:
            f.truncate(size)  # sparse: nothing is written, the size alone must be refused
    t = str(tmp)
    tuner = ["--bytes", "1", "--nranks", "2"]
    return [
        {
            "id": "sizes: config is a FIFO",
            "argv": ["sizes", "--model-config", f"{t}/pipe"],
            "expect": (
                2,
                f"--model-config='{t}/pipe': cannot be read (a FIFO (named pipe), not a regular file)",
            ),
        },
        {
            "id": "sizes: config.json in the directory is a FIFO",
            "argv": ["sizes", "--model-config", f"{t}/model"],
            "expect": (
                2,
                f"--model-config='{t}/model': cannot be read (a FIFO (named pipe), not a regular file)",
            ),
        },
        {
            "id": "sizes: config is /dev/zero",
            "argv": ["sizes", "--model-config", "/dev/zero"],
            "expect": (
                2,
                "--model-config='/dev/zero': cannot be read (a character device, not a regular file)",
            ),
        },
        {
            "id": "sizes: config over 16 MiB",
            "argv": ["sizes", "--model-config", f"{t}/huge.json"],
            "expect": (2, f"cannot be read ({16 * MIB + 1} bytes, larger than the {16 * MIB}-byte limit)"),
        },
        {
            "id": "tuner: model config is a FIFO",
            "argv": ["tuner", "--model-config", f"{t}/pipe", "--nranks", "2"],
            "expect": (
                2,
                f"--model-config='{t}/pipe': cannot be read (a FIFO (named pipe), not a regular file)",
            ),
        },
        {
            "id": "tuner: rules file is a FIFO",
            "argv": ["tuner", "--rules", f"{t}/pipe", *tuner],
            "expect": (2, f"--rules {t}/pipe: cannot read it: a FIFO (named pipe), not a regular file"),
        },
        {
            "id": "tuner: rules file is /dev/zero",
            "argv": ["tuner", "--rules", "/dev/zero", *tuner],
            "expect": (2, "--rules /dev/zero: cannot read it: a character device, not a regular file"),
        },
        {
            "id": "tuner: rules file over 256 KiB",
            "argv": ["tuner", "--rules", f"{t}/huge.toml", *tuner],
            "expect": (2, f"cannot read it: {256 * 1024 + 1} bytes, larger than the {256 * 1024}-byte limit"),
        },
        {
            "id": "analyze: log is a FIFO",
            "argv": ["analyze", f"{t}/pipe"],
            "expect": (2, f"{t}/pipe: cannot read this log: a FIFO (named pipe), not a regular file"),
        },
        {
            "id": "analyze: log is /dev/zero",
            "argv": ["analyze", "/dev/zero"],
            "expect": (2, "/dev/zero: cannot read this log: a character device, not a regular file"),
        },
        {
            "id": "analyze: log over 256 MiB",
            "argv": ["analyze", f"{t}/huge.log"],
            "expect": (
                2,
                f"cannot read this log: {256 * MIB + 1} bytes, larger than the {256 * MIB}-byte limit",
            ),
        },
        {
            "id": "doctor: NCCL_CONF_FILE is a FIFO",
            "argv": ["doctor"],
            "env": {"NCCL_CONF_FILE": f"{t}/pipe"},
            "expect": (1, f"{t}/pipe: unreadable: a FIFO (named pipe), not a regular file"),
        },
        {
            "id": "doctor: NCCL_CONF_FILE is /dev/zero",
            "argv": ["doctor"],
            "env": {"NCCL_CONF_FILE": "/dev/zero"},
            "expect": (1, "/dev/zero: unreadable: a character device, not a regular file"),
        },
    ]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile-files")
    cases = _cases(tmp)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
    }
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), json.dumps(cases)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    return {c["id"]: (c, got.get(c["id"])) for c in cases}


# The ids, written out so pytest names each case (the cases need a directory to exist).
IDS = [
    "sizes: config is a FIFO",
    "sizes: config.json in the directory is a FIFO",
    "sizes: config is /dev/zero",
    "sizes: config over 16 MiB",
    "tuner: model config is a FIFO",
    "tuner: rules file is a FIFO",
    "tuner: rules file is /dev/zero",
    "tuner: rules file over 256 KiB",
    "analyze: log is a FIFO",
    "analyze: log is /dev/zero",
    "analyze: log over 256 MiB",
    "doctor: NCCL_CONF_FILE is a FIFO",
    "doctor: NCCL_CONF_FILE is /dev/zero",
]


@pytest.mark.parametrize("case_id", IDS)
def test_a_special_or_oversized_file_is_refused_at_once(results, case_id):
    case, got = results[case_id]
    assert got is not None, f"{case_id}: the child never reported it"
    assert got["exception"] is None, got["exception"]
    code, message = case["expect"]
    assert "Traceback" not in got["output"]
    assert got["exit"] == code, got["output"]
    assert message in got["output"], got["output"]
    if code == 2:
        assert "Fix:" in got["output"]


def test_every_case_is_tested(results):
    assert sorted(results) == sorted(IDS)
