"""Long CI steps say how they progress (ci/progress.py; issue 27: `pip wheel -q` printed nothing and
"installing 37 dependencies ..." sat silent for two minutes).

Generated pip-like output is counted against a reference written here; a real slow command, run
through the script's command line, prints lines of progress with the time elapsed while it runs,
and on failure the command's own last lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "ci"))
try:
    import progress
finally:
    sys.path.pop(0)

_names = st.sampled_from(["torch", "numpy", "sglang", "pyzmq", "tqdm"])
_line = st.one_of(
    _names.map(lambda n: ("collected", f"Collecting {n}==1.0")),
    _names.map(lambda n: ("downloaded", f"  Downloading {n}-1.0-py3-none-any.whl (1.2 MB)")),
    _names.map(lambda n: ("already installed", f"Requirement already satisfied: {n} in /venv (1.0)")),
    _names.map(lambda n: ("built", f"  Building wheel for {n} (pyproject.toml): started")),
    st.sampled_from([(None, "  Using cached x.whl"), (None, ""), (None, "Preparing metadata (pyproject.toml): done")]),
)


@settings(max_examples=200)
@given(lines=st.lists(_line, max_size=30), installing=st.lists(_names, max_size=5, unique=True))
def test_pip_lines_are_counted(lines, installing):
    tally = progress.Tally()
    for _, text in lines:
        tally.see(text)
    if installing:
        tally.see("Installing collected packages: " + ", ".join(installing))
    want: dict[str, int] = {}
    for kind, _ in lines:
        if kind:
            want[kind] = want.get(kind, 0) + 1
    assert tally.counts == want
    summary = tally.summary()
    for kind, n in want.items():
        assert f"{n} {kind}" in summary
    assert ("installing" in summary) == bool(installing)


def test_a_slow_command_shows_progress_with_elapsed_time(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('Collecting a', flush=True)\ntime.sleep(2.5)\nprint('Collecting b', flush=True)\n")
    proc = subprocess.run(
        [sys.executable, str(REPO / "ci" / "progress.py"), "--prefix", "t", "--what", "slow step", "--",
         sys.executable, str(script)],
        capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("slow step ...")
    assert any("slow step: 1 collected" in line and line.endswith("s)") for line in lines), lines
    assert lines[-1].startswith("[t ") and "slow step: done in" in lines[-1]


def test_a_failing_command_shows_its_last_lines(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "ci" / "progress.py"), "--what", "failing", "--", sys.executable, "-c",
         "import sys; print('the reason'); sys.exit(3)"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 3
    assert "FAILED" in proc.stdout and "the reason" in proc.stderr
