"""One decision, asked everywhere (issue 25, item 3): the five entry points agree on generated profiles.

The rule (sglang_eagle_nccl/decision/decide.py): ``validate``, ``env``, ``doctor``, the launcher and
activation answer from the same function on the same inputs, so for every profile -- hostile ones
included: NUL and control characters in every name, integers of every size in every TOML base,
hand-offs too large to start a process with, another library in the plugin variables of the profile
or of the environment -- they all accept it, or all refuse it and name the same first problem.

Each is asked through its real entry point: the click commands (in-process, CliRunner), the
launcher's decision (:func:`decide` with a launch's inputs: a launch directory chosen, the server as
the root), activation through the ``.pth`` door function in this process (support/inproc.py makes it
a fresh process and puts everything back) and, for a sample, in a real fresh interpreter. The
expected answer is not the code's: a first problem is compared as each command prints it, numbers
aside (the hand-off's size is counted with the inputs each one records).

``doctor`` exits 1 on this machine for reasons of its own (no SGLang, no torch): its answer about
the profile is its exit 2 (the profile itself is invalid) or its "activation would refuse" problem.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.decision.decide import Inputs, decide
from support.inproc import fresh_process

REPO = Path(__file__).resolve().parents[3]
LIMIT = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300

# --- a small TOML writer for the test (never the code's own) -----------------------------------------


def toml_str(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_int(value: int, base: str) -> str:
    if base == "hex":
        return f"0x{value:x}"
    if base == "oct":
        return f"0o{value:o}"
    if base == "bin":
        return f"0b{value:b}"
    return str(value)  # only generated below Python's limit: TOML decimal beyond it is written as digits


# --- generated profiles ------------------------------------------------------------------------------

HOSTILE = ["\x00", "\x01", "\x1b", "\x7f", "\n", " ", "\u202e", "\u200b", "é"]
VALID = {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "Simple"], "NCCL_SOCKET_IFNAME": ["eth0", "ib0"],
         "NCCL_DEBUG": ["INFO", "WARN"]}
HOSTILE_TEXT = st.builds(lambda a, h, b: a + h + b, st.sampled_from(["t", "tp", "NCCL_AL", ""]),
                         st.sampled_from(HOSTILE), st.sampled_from(["p", "", "GO"]))
# bits of a generated integer: fits NCCL, beyond 64 bits, beyond Python's decimal digit limit.
BITS = st.sampled_from([4, 20, 70, 300, 4 * LIMIT, 5 * LIMIT])
BASES = st.sampled_from(["hex", "oct", "bin", "dec"])
# One twist per profile (or none), so each hostile kind is met on its own and the rest stays valid:
# an accepted profile is as much a claim as a refused one.
TWISTS = ["none", "none", "none", "group_name", "var_name", "value", "env_int", "rule_int", "node_key",
          "oversized", "plugin_in_profile", "plugin_in_shell", "node_rank", "description", "rule_group"]


def integer_text(bits: int, base: str) -> str:
    if base == "dec" and bits > 64:
        return "9" * (bits // 3)  # decimal: digits written out (beyond the limit TOML's reader refuses them)
    return toml_int((1 << bits) - 1, base)


@st.composite
def profiles(draw, lib: str) -> tuple[str, dict[str, str]]:
    """(TOML text, the variables of the shell the launch starts from)."""
    twist = draw(st.sampled_from(TWISTS))
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append(f'extends = {toml_str(draw(st.sampled_from(["pcie-8gpu", "audit-only"])))}')
    if twist == "description":
        lines.append(f"description = {toml_str('mine' + draw(st.sampled_from(HOSTILE)))}")
    env = {k: draw(st.sampled_from(v)) for k, v in VALID.items() if draw(st.booleans())}
    if twist == "var_name":
        env[draw(HOSTILE_TEXT)] = "Ring"
    if twist == "value":
        env[draw(st.sampled_from(sorted(VALID)))] = "Ri" + draw(st.sampled_from(HOSTILE)) + "ng"
    lines.append("[env]")
    lines += [f"{toml_str(k)} = {toml_str(v)}" for k, v in env.items()]
    if twist == "env_int":
        var = draw(st.sampled_from(["NCCL_BUFFSIZE", "NCCL_NTHREADS", "NCCL_MAX_NCHANNELS"]))
        lines.append(f"{var} = {integer_text(draw(BITS), draw(BASES))}")
    if twist == "plugin_in_profile":
        var = draw(st.sampled_from(["NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_ENV_PLUGIN"]))
        lines.append(f"{var} = {toml_str(draw(st.sampled_from([lib, '/nonexistent/libnccl-net-x.so', 'ib'])))}")
    groups = draw(st.lists(st.sampled_from(["tp", "world", "attn_tp", "verify"]), max_size=2, unique=True))
    if twist == "group_name":
        groups.append(draw(st.one_of(HOSTILE_TEXT, st.sampled_from(["", "x" * 65]))))
    for group in groups:
        lines.append(f"[groups.{toml_str(group)}.env]")
        lines.append(f"NCCL_ALGO = {toml_str(draw(st.sampled_from(['Ring', 'Tree'])))}")
    nodes = draw(st.lists(st.sampled_from(["0", "1", "7"]), max_size=2, unique=True))
    if twist == "node_key":
        nodes.append(draw(st.sampled_from(["x", "-1", "1\x00", " 1", "99999999999", "\u202e1"])))
    for key in nodes:
        lines.append(f"[nodes.{toml_str(key)}.env]")
        lines.append(f"NCCL_SOCKET_IFNAME = {toml_str(draw(st.sampled_from(['eth1', 'ib1'])))}")
    if twist == "oversized":  # a hand-off far too large to start a process with
        lines += [f'[nodes.{n}.env]\nNCCL_SOCKET_IFNAME = "enp{n}s0f0np0"' for n in range(100, 2100)]
    if twist in ("rule_int", "rule_group") or draw(st.integers(0, 3)) == 0:
        upper = integer_text(draw(BITS), draw(BASES)) if twist == "rule_int" else "65536"
        lines += ["[[tuner.rules]]", 'collective = "AllReduce"', f"bytes = [0, {upper}]",
                  'algorithm = "Ring"', 'protocol = "LL"']
        if twist == "rule_group":
            lines.append(f"group = {toml_str(draw(HOSTILE_TEXT))}")
    shell: dict[str, str] = {}
    if twist == "plugin_in_shell":
        shell[draw(st.sampled_from(["NCCL_ENV_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_NET_PLUGIN"]))] = lib
    if twist == "node_rank":
        shell[names.ENV_NODE_RANK] = draw(st.sampled_from(["1", "node-1", "0x1", "7"]))
    return "\n".join(lines) + "\n", shell


# --- the five answers ---------------------------------------------------------------------------------


def normal(message: str) -> str:
    return re.sub(r"\d+", "N", message)


def first_listed(output: str) -> str:
    """The first problem of a ProfileError as the commands print it (``  - <finding>``)."""
    line = next((ln for ln in output.splitlines() if ln.startswith("  - ")), None)
    assert line is not None, output
    return normal(line[4:])


@contextmanager
def shell(extra: dict[str, str]):
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))]:
        del os.environ[key]
    os.environ.update(extra)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def cli(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def answers(path: str, extra: dict[str, str]) -> dict[str, str | None]:
    """Each entry point's answer: None (accepted) or its first problem."""
    out: dict[str, str | None] = {}
    with shell(extra):
        validate = cli("validate", path)
        assert validate.exit_code in (0, 1), validate.output
        out["validate"] = None if validate.exit_code == 0 else first_listed(validate.output)
        env = cli("env", "--profile", path)
        assert env.exit_code in (0, 2), env.output
        out["env"] = None if env.exit_code == 0 else first_listed(env.output)
        doctor = cli("doctor", "--json", "--profile", path)
        data = json.loads(doctor.stdout)
        if doctor.exit_code == 2:
            out["doctor"] = normal(next(f for f in data["findings"] if f["severity"] == "error")["message"]) \
                if "message" in data["findings"][0] else first_listed(data["error"])
        else:
            refusal = next((p for p in data["problems"] if p.startswith("activation would refuse")), None)
            out["doctor"] = None if refusal is None else normal(refusal.split(" here: ", 1)[1])
        decision = decide(Inputs(os.environ, (path,), opens_launch=True, root_pid=None))
        out["launcher"] = None if decision.ok else normal(decision.first.message())
    with fresh_process() as state, shell({**extra, names.ENV_ENABLE: path}):
        from sglang_eagle_nccl.inproc.boot import bootstrap

        bootstrap.interpreter_start(enabled=True, cli_flags=False)
        out["activation"] = None if state.active else first_listed(state.refused or "")
    return out


def agree(out: dict[str, str | None]) -> None:
    refused = {k for k, v in out.items() if v is not None}
    assert refused in (set(), set(out)), f"accept/refuse differ: {out}"
    # The same first problem; doctor joins its problems with '; ', so its answer starts with it.
    assert len({v for k, v in out.items() if k != "doctor"}) == 1, out
    if out["doctor"] is not None:
        assert out["doctor"].startswith(out["validate"]), out


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("foreign")
    base.chmod(0o700)
    folder = base / "lib"
    folder.mkdir(mode=0o755)
    path = folder / "libnccl-net-mine.so"
    path.write_bytes(b"\x7fELF")
    path.chmod(0o644)
    return str(path)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_the_five_entry_points_give_one_answer(data, lib, tmp_path):
    text, extra = data.draw(profiles(lib))
    path = tmp_path / "generated.toml"
    path.write_text(text, encoding="utf-8")
    out = answers(str(path), extra)
    agree(out)
    # What was exercised (pytest --hypothesis-show-statistics): accepted, or refused and by which rule.
    event("accepted" if out["validate"] is None else "refused: " + re.sub(r"^\[[^]]*\] ", "", out["validate"])[:40])


# --- activation in a real fresh interpreter, for a sample ------------------------------------------------

ACTIVATE = """
    import json
    from sglang_eagle_nccl.inproc.boot import bootstrap
    from sglang_eagle_nccl.inproc.boot.state import STATE
    bootstrap.interpreter_start(enabled=True, cli_flags=False)
    print(json.dumps({"active": STATE.active, "refused": STATE.refused}))
"""


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_activation_in_a_fresh_interpreter_gives_the_decisions_answer(data, lib, tmp_path):
    text, extra = data.draw(profiles(lib))
    path = tmp_path / "generated.toml"
    path.write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL"))}
    env.update(extra)
    env[names.ENV_ENABLE] = str(path)
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(ACTIVATE)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout.strip().splitlines()[-1])
    with shell(extra):
        decision = decide(Inputs(os.environ, (str(path),), opens_launch=True, root_pid=None))
    assert child["active"] == decision.ok, (child, decision.problems)
    if not decision.ok:
        assert first_listed(child["refused"]) == normal(decision.first.message())
