"""The hand-off key: where it lives (XDG rules), what is never trusted or waited on, and its HMAC.

Every gated interpreter reads the key (``pip`` in a shell that holds a profile included), so a
FIFO planted at its path must not block anything: checked in a real child process with a timeout.
"""

from __future__ import annotations

import hmac
import json
import os
import stat
import subprocess
import sys
import textwrap
from hashlib import sha256
from pathlib import Path

import pytest

from sglang_eagle_nccl.contract import handoff

REPO = Path(__file__).resolve().parents[3]
MESSAGES = ["", "a", "73656e33", "0123456789abcdef" * 40, "x" * 63, "x" * 64, "x" * 65, "x" * 1000]


@pytest.mark.parametrize("message", MESSAGES)
def test_digest_is_hmac_sha256_for_every_key_length(message):
    for length in range(0, 201):
        key = bytes((i * 37 + length) % 256 for i in range(length))
        assert handoff.digest(key, message) == hmac.new(key, message.encode("ascii"), sha256).hexdigest(), (
            length
        )


# --- where the key lives ----------------------------------------------------------------------


def _home_of_passwd() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir


@pytest.mark.parametrize(
    "xdg,home,expected",
    [
        ("/srv/cache", "/home/u", "/srv/cache/sglang-eagle-nccl/handoff.key"),
        ("/", "/home/u", "/sglang-eagle-nccl/handoff.key"),  # absolute, however odd: the spec's rule
        ("", "/home/u", "/home/u/.cache/sglang-eagle-nccl/handoff.key"),  # empty: as if unset
        (None, "/home/u", "/home/u/.cache/sglang-eagle-nccl/handoff.key"),
        ("cache", "/home/u", "/home/u/.cache/sglang-eagle-nccl/handoff.key"),  # relative: ignored
        ("./cache", "/home/u", "/home/u/.cache/sglang-eagle-nccl/handoff.key"),
        ("~/cache", "/home/u", "/home/u/.cache/sglang-eagle-nccl/handoff.key"),  # no shell expansion
    ],
)
def test_key_path_follows_the_xdg_rules(monkeypatch, xdg, home, expected):
    if xdg is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    monkeypatch.setenv("HOME", home)
    assert handoff.key_path() == expected


@pytest.mark.parametrize("home", ["", "relative/home", ".", None])
def test_an_unusable_home_falls_back_to_the_passwd_entry(monkeypatch, home):
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home)
    expected = os.path.join(_home_of_passwd(), ".cache", "sglang-eagle-nccl", "handoff.key")
    assert handoff.key_path() == expected and expected.startswith("/")


@pytest.mark.parametrize("home", ["", "relative/home"])
def test_no_absolute_directory_means_no_key_and_nothing_written(monkeypatch, tmp_path, home):
    monkeypatch.setenv("XDG_CACHE_HOME", "relative-cache")
    monkeypatch.setenv("HOME", home)
    monkeypatch.setattr(handoff, "_passwd_home", lambda: None)
    monkeypatch.chdir(tmp_path)
    assert handoff.key_path() is None
    assert handoff.read_key() is None and handoff.ensure_key() is None
    # Unsigned, so every reader re-validates; nothing was created under the working directory.
    assert handoff.encode({"name": "x", "env": {}}, inputs={}, run_dir=None).endswith(".-")
    assert list(tmp_path.iterdir()) == []


# --- what is at the key path ------------------------------------------------------------------


def _key_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "cache" / "sglang-eagle-nccl"
    folder.mkdir(parents=True, mode=0o700)
    return folder


def _plant(kind: str, path: Path, tmp_path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        path.mkdir(mode=0o700)
    elif kind == "symlink to a fifo":
        os.mkfifo(tmp_path / "elsewhere", 0o600)
        path.symlink_to(tmp_path / "elsewhere")
    elif kind == "symlink to a key":
        (tmp_path / "real.key").write_bytes(b"k" * handoff.KEY_BYTES)
        (tmp_path / "real.key").chmod(0o600)
        path.symlink_to(tmp_path / "real.key")
    elif kind == "readable by others":
        path.write_bytes(b"k" * handoff.KEY_BYTES)
        path.chmod(0o644)
    elif kind == "too short":
        path.write_bytes(b"k" * (handoff.KEY_BYTES - 1))
        path.chmod(0o600)
    elif kind == "too long":
        path.write_bytes(b"k" * (handoff.KEY_BYTES + 1))
        path.chmod(0o600)
    elif kind == "device":
        path.symlink_to("/dev/zero")


KINDS = [
    "fifo",
    "symlink to a fifo",
    "directory",
    "symlink to a key",
    "readable by others",
    "too short",
    "too long",
    "device",
]
READ_AND_DECODE = """
    import json, os, sys
    from sglang_eagle_nccl.contract import handoff
    from sglang_eagle_nccl.decision.plan import plan
    for kind, cache in json.loads(os.environ["CASES"]):
        os.environ["XDG_CACHE_HOME"] = cache
        read, ensure = handoff.read_key() is not None, handoff.ensure_key() is not None
        p = plan()  # the door every gated interpreter goes through: decode the hand-off, check, decide
        print(json.dumps([kind, read, ensure, p.desired.get("NCCL_PROTO")]), flush=True)
"""


def test_nothing_at_the_key_path_blocks_or_is_trusted(tmp_path):
    cases = []
    for i, kind in enumerate(KINDS):
        base = tmp_path / str(i)
        path = _key_dir(base) / handoff.KEY_FILE
        _plant(kind, path, base)
        cases.append([kind, str(base / "cache")])
    # A hand-off signed with the planted bytes where there are any: a reader must not trust it.
    data = {
        "name": "planted",
        "env": {"NCCL_PROTO": "Simple"},
        "groups": {},
        "nodes": {},
        "policy": {},
        "sources": [],
    }
    text = handoff.encode(data, inputs={"SGLANG_EAGLE_NCCL": "1"}, run_dir=None, key=b"k" * handoff.KEY_BYTES)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))
    }
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "CASES": json.dumps(cases),
            "SGLANG_EAGLE_NCCL": "1",
            "SGLANG_EAGLE_NCCL_PROFILE": text,
        }
    )
    # A FIFO opened without O_NONBLOCK waits for a writer forever: the timeout is the failure.
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(READ_AND_DECODE)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        [kind, False, False, "Simple"] for kind in KINDS
    ]
    # Whatever was planted is still there, unchanged in kind: the reader only looked.
    for i, kind in enumerate(KINDS):
        st = os.lstat(tmp_path / str(i) / "cache" / "sglang-eagle-nccl" / handoff.KEY_FILE)
        assert stat.S_ISLNK(st.st_mode) == (kind.startswith("symlink") or kind == "device"), kind
        assert stat.S_ISFIFO(st.st_mode) == (kind == "fifo"), kind


def test_a_private_regular_key_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = _key_dir(tmp_path) / handoff.KEY_FILE
    path.write_bytes(b"k" * handoff.KEY_BYTES)
    path.chmod(0o600)
    assert handoff.read_key() == b"k" * handoff.KEY_BYTES
    path.chmod(0o640)
    assert handoff.read_key() is None
