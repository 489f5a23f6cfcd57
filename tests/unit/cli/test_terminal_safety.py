"""Nothing untrusted reaches a terminal raw: hostile names through every command's text output, in real processes.

A profile name, a group label, values, a file and a directory name, an unknown command and variable, a log
file and an audit record whose host name hold C0/C1 controls, DEL, bidirectional controls (U+202E,
U+2066, U+061C, U+200E) and invisible format characters (U+200B, U+FEFF): each command is run as the user
runs it (``python -m sglang_eagle_nccl``, real stdout and stderr pipes), and neither stream holds one of
those characters raw -- only its escape, which proves the name did reach the output. Activation's own lines
(the "applied" line, the group warning) are read from a real process started with the profile.

Not run here: ``preflight`` (it needs torch and SGLang: its rank output goes through the same CLI streams),
``audit --ray`` (the Ray tier).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from support.jsonl import read_jsonl

HOSTILE = "x\u202ey\x1b[2J\x07\x7f\x9b\u2066\u061c\u200e\u200b\ufeffz"
ESCAPED = "\\u202e"  # how the first bidi control of HOSTILE shows, once escaped
UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def raw_unsafe(text: str) -> list[str]:
    return sorted({f"U+{ord(c):04X}" for c in text.replace("\n", "") if unicodedata.category(c) in UNSAFE})


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hostile")
    folder = base / f"d{HOSTILE}"
    folder.mkdir()
    good = folder / f"p{HOSTILE}.toml"
    good.write_text(f'name = {json.dumps(HOSTILE)}\nextends = "pcie-8gpu"\n'
                    '[groups.tpx.env]\nNCCL_PROTO = "Simple"\n')
    # A hostile group label is a profile error everywhere (decision/: 1-64 of letters, digits, _ . : -), so
    # it lives in the bad profile, whose refusal shows it escaped.
    bad = folder / f"bad{HOSTILE}.toml"
    bad.write_text(f'name = {json.dumps(HOSTILE)}\n[env]\nNCCL_PROTO = {json.dumps("LL" + HOSTILE)}\n'
                   f'NCCL_ALGO = "Tree"\n[groups.{json.dumps(HOSTILE)}.env]\nNCCL_BUFFSIZE = "4M"\n')
    log = folder / f"server{HOSTILE}.log"
    log.write_text(f"[2026-01-01 00:00:00] server_args=ServerArgs(model_path='{HOSTILE}')\n"
                   f"Decode batch. #running-req: 1, accept len: 2.5{HOSTILE}\n")
    return {"base": base, "folder": folder, "good": good, "bad": bad, "log": log}


def _env(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))}
    env["XDG_CACHE_HOME"] = str(base / "cache")  # the hand-off key of these runs, not the user's
    env["PYTHONIOENCODING"] = "utf-8:surrogateescape"
    return env


def run(world: dict[str, Path], *args: str) -> tuple[int, str]:
    """Exit code, and stdout then stderr as one text."""
    code, out, err = run_apart(world, *args)
    return code, out + err


def run_apart(world: dict[str, Path], *args: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "sglang_eagle_nccl", *args], capture_output=True,
                          env=_env(world["base"]), cwd=world["base"], timeout=120)
    return done.returncode, *(s.decode("utf-8", "surrogateescape") for s in (done.stdout, done.stderr))


def _commands(w: dict[str, Path]) -> dict[str, list[str]]:
    good, bad = str(w["good"]), str(w["bad"])
    return {
        "validate": ["validate", good],
        "validate (errors)": ["validate", bad],
        "validate --nccl-env": ["validate", "pcie-8gpu", "--nccl-env", f"NCCL_{HOSTILE}=1"],
        "profiles show": ["profiles", "show", good],
        "profiles show (errors)": ["profiles", "show", bad],
        "explain": ["explain", f"NCCL_{HOSTILE}"],
        "env --format dotenv": ["env", "--profile", good, "--format", "dotenv"],
        "env --format json": ["env", "--profile", good, "--audit-dir", str(w["folder"] / "a$x"),
                                         "--format", "json"],
        "env (errors)": ["env", "--profile", bad],
        "launch --dry-run": ["launch", "--dry-run", "--profile", bad, "--", "--model-path", HOSTILE],
        "doctor": ["doctor", "--profile", good],
        "tuner (errors)": ["tuner", "--profile", bad, "--bytes", "1024", "--nranks", "2"],
        "analyze": ["analyze", str(w["log"])],
        "sizes": ["sizes", "--model-config", str(w["folder"] / "missing")],
        "unknown command": [HOSTILE],
    }


@pytest.mark.parametrize("name", list(_commands({k: Path("/") for k in ("base", "folder", "good", "bad", "log")})))
def test_every_command_escapes_what_it_shows(world, name):
    code, out = run(world, *_commands(world)[name])
    assert out.strip(), name
    assert raw_unsafe(out) == [], (name, out[-2000:])
    if name not in CARRIED_ENCODED:
        assert ESCAPED in out, (name, code, out[-2000:])  # the hostile text did reach the output, escaped


# Machine formats whose only hostile input (the profile's path, the launch directory) travels inside the
# signed hand-off, hex-encoded: nothing hostile is shown, and nothing raw may be.
CARRIED_ENCODED = {"env --format dotenv", "env --format json"}


@pytest.mark.parametrize("fmt", ["shell", "json", "k8s"])
def test_env_output_is_quoted_for_its_reader_never_raw(world, fmt):
    # The launch directory's path holds the hostile characters: shell writes them as $'\ooo' escapes, k8s as
    # YAML escapes, json as JSON escapes (the readers' round trips are tests/unit/offline/launch).
    code, out = run(world, "env", "--profile", str(world["good"]), "--audit-dir", str(world["folder"]), "--format", fmt)
    assert code == 0, out
    assert raw_unsafe(out) == [], out


def test_audit_of_a_launch_with_a_hostile_host_record(world):
    env = _env(world["base"])
    root = world["folder"] / "audit"
    code, printed, err = run_apart(world, "env", "--profile", str(world["good"]), "--audit-dir", str(root),
                                   "--format", "json")
    assert code == 0, err
    child = {**env, **json.loads(printed)}
    started = subprocess.run([sys.executable, "-c", "pass"], env=child, capture_output=True, timeout=60)
    assert started.returncode == 0, started.stderr
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    # A record of a second machine whose host name is hostile: a copied or tampered launch directory.
    (proc,) = [p for p in run_dir.iterdir() if p.name.startswith("proc-")]
    lines = read_jsonl(proc)
    for record in lines:
        record["host"] = HOSTILE
        record["pid"] = record.get("pid", 1) + 1
    (run_dir / f"proc-{HOSTILE}-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    for args in (["audit", str(run_dir)], ["audit", "-v", str(run_dir)]):
        code, out = run(world, *args)
        assert raw_unsafe(out) == [], out[-3000:]
        assert ESCAPED in out, out[-3000:]


def test_activation_lines_escape_the_profile_and_group_names(world):
    # Accepted: no "applied" line at interpreter start any more (a later door may still refuse); the group
    # warning is the line activation shows. Refused: the one "not applied" line names the hostile path, values
    # and group label, escaped.
    env = {**_env(world["base"]), "SGLANG_EAGLE_NCCL": str(world["good"])}
    done = subprocess.run([sys.executable, "-c", "pass"], env=env, capture_output=True, timeout=60)
    err = done.stderr.decode("utf-8", "surrogateescape")
    assert done.returncode == 0, err
    assert "warning: groups.tpx" in err and "applied" not in err, err
    assert raw_unsafe(err) == [], err
    env["SGLANG_EAGLE_NCCL"] = str(world["bad"])
    done = subprocess.run([sys.executable, "-c", "import sglang_eagle_nccl"], env=env, capture_output=True, timeout=60)
    refused = done.stderr.decode("utf-8", "surrogateescape")
    assert "not applied" in refused and ESCAPED in refused, refused
    assert raw_unsafe(refused) == [], refused
    for text in (err, refused):
        # One line per message: the name's escaped line break cannot start a forged line.
        assert all(line.startswith("[sglang-eagle-nccl]") for line in text.splitlines()), text
