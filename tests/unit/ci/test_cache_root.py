"""One cache rule for every CI script (issue 27: ci/sglang_venv.py ignored XDG_CACHE_HOME, ci/matrix.py
honoured it, so the two looked for SGLang's wheels in different folders).

The rule (ci/cache_root.py): SGLANG_EAGLE_NCCL_CACHE when set and not empty; else
$XDG_CACHE_HOME/sglang-eagle-nccl when XDG_CACHE_HOME is absolute; else ~/.cache/sglang-eagle-nccl.
Checked against a reference written here, and each script asked in its own process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "ci"))
try:
    from cache_root import cache_root
finally:
    sys.path.pop(0)


def reference(env: dict[str, str]) -> Path:
    if env.get("SGLANG_EAGLE_NCCL_CACHE"):
        return Path(env["SGLANG_EAGLE_NCCL_CACHE"])
    xdg = env.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "sglang-eagle-nccl"
    return Path(env["HOME"]) / ".cache" / "sglang-eagle-nccl"


_paths = st.sampled_from(["", "/abs/cache", "relative/cache", "/", "/x y/z", "./dot"])


@st.composite
def environments(draw):
    env = {"HOME": draw(st.sampled_from(["/home/u", "/root"]))}
    for name in ("SGLANG_EAGLE_NCCL_CACHE", "XDG_CACHE_HOME"):
        if draw(st.booleans()):
            env[name] = draw(_paths)
    return env


@settings(max_examples=200, deadline=None)
@given(env=environments())
def test_rule_matches_the_reference(env):
    before = os.environ.get("HOME")
    os.environ["HOME"] = env["HOME"]  # expanduser("~") reads HOME
    try:
        assert cache_root(env) == reference(env)
    finally:
        if before is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = before


CASES = [
    {"SGLANG_EAGLE_NCCL_CACHE": "/c", "XDG_CACHE_HOME": "/x"},  # the override wins
    {"XDG_CACHE_HOME": "/x"},  # ci/sglang_venv.py ignored this before
    {"XDG_CACHE_HOME": "relative"},  # ignored, as the XDG spec says (ci/matrix.py took it before)
    {"SGLANG_EAGLE_NCCL_CACHE": ""},  # empty counts as unset
]


def _script_env(extra: dict[str, str], home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SGLANG_EAGLE_NCCL_CACHE", "XDG_CACHE_HOME")}
    return {**env, "HOME": str(home), **extra}


def test_every_script_follows_the_rule(tmp_path):
    for case in CASES:
        env = _script_env(case, tmp_path)
        want = reference(env)
        venv = subprocess.run([sys.executable, str(REPO / "ci" / "sglang_venv.py"), "path", "0.5.23"],
                              capture_output=True, text=True, env=env, check=True).stdout.strip()
        assert Path(venv) == want / "venvs" / "sglang-0.5.23", case
        code = ("import sys; sys.path.insert(0, 'ci'); import matrix, smoke_cpu_engine; "
                "print(matrix.cache_dir()); print(smoke_cpu_engine.cache_dir())")
        wheels, smoke = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                       check=True, cwd=REPO).stdout.split()
        assert Path(wheels) == want / "wheels", case
        assert Path(smoke) == want, case


def test_the_plugins_key_lives_in_the_same_folder(tmp_path):
    """Without the CI override, the plugin keeps the hand-off key in the folder the CI scripts use."""
    for case in ({"XDG_CACHE_HOME": "/x"}, {"XDG_CACHE_HOME": "relative"}, {}):
        env = _script_env(case, tmp_path)
        code = "from sglang_eagle_nccl.contract.handoff import key_path; print(key_path())"
        key = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                             check=True).stdout.strip()
        assert Path(key).parent == reference(env), case
