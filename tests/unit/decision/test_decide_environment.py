"""The launch's decision is made from the environment it is given (issue 25, item 7).

The rule (sglang_eagle_nccl/decision/decide.py): :func:`decide` answers for ``Inputs.environ`` -- the
shell a launch starts from, the environment ``env`` prints, the one doctor inspects -- and never for
the environment of the process that asks. Asked the same question from a process whose own
``os.environ`` holds another profile, another node rank, a foreign plugin or a stale hand-off, it
gives the answer it gives where ``os.environ`` is that very environment: the same refusals in the
same order (each once), the same profile, values, group values and hand-off.

And the answer itself, against a small reference written here (never the code's helpers): the
launcher's values are the profile's ``[env]``, the plugin variables' ``SGLANG_EAGLE_NCCL_ENV`` on top
and the node's ``[nodes.<rank>.env]`` (the node rank of that environment); the hand-off carries the
launch's node rank and root marker and its node's values, records a launch directory as long as the
longest a launcher names, under the audit root (the profile's, else ``$TMPDIR/sglang-eagle-nccl-<uid>``),
and fits Linux's limit on one environment entry (``MAX_ARG_STRLEN``: 32 pages, the terminating NUL
included). A decision re-made for another launch directory keeps the launch's root marker. A refusal of
the launcher comes before the children's, and a problem they share is named once.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.cli.main import main
from sglang_eagle_nccl.contract import names
from sglang_eagle_nccl.decision.decide import Inputs, decide

PREFIXES = ("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")
PLUGIN_VARS = ("NCCL_ENV_PLUGIN", "NCCL_TUNER_PLUGIN")
# Linux's MAX_ARG_STRLEN (32 pages of 4 KiB) bounds "NAME=value" plus its terminating NUL.
ENTRY_LIMIT = 32 * 4096 - len(names.ENV_PROFILE + "=") - 1
LAUNCH_ID_CHARS = len("YYYYMMDD-HHMMSS-") + len("4194304") + len("-0000")

PROFILE_A = """\
[env]
NCCL_ALGO = "Ring"
[groups.tp.env]
NCCL_PROTO = "LL"
[nodes.1.env]
NCCL_SOCKET_IFNAME = "ib1"
"""
PROFILE_B = """\
[env]
NCCL_ALGO = "Tree"
NCCL_PROTO = "Simple"
"""


@contextmanager
def process_environ(values: dict[str, str]):
    """This process's own environment: every plugin/NCCL variable replaced by ``values``."""
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith(PREFIXES)]:
        del os.environ[key]
    os.environ.update(values)
    try:
        yield
    finally:
        for key in [k for k in os.environ if k not in saved]:
            del os.environ[key]
        os.environ.update(saved)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("decide-environ")
    base.chmod(0o700)
    (base / "a.toml").write_text(PROFILE_A)
    (base / "b.toml").write_text(PROFILE_B)
    lib = base / "lib" / "libnccl-net-mine.so"
    lib.parent.mkdir(mode=0o755)
    lib.write_bytes(b"\x7fELF")
    lib.chmod(0o644)
    (base / "audit").mkdir(mode=0o700)
    with process_environ({}):
        printed = CliRunner().invoke(main, ["env", "--profile", str(base / "a.toml"), "--format", "json"])
    assert printed.exit_code == 0, printed.output
    return {"a": str(base / "a.toml"), "b": str(base / "b.toml"), "lib": str(lib), "audit": str(base / "audit"),
            "handed": printed.stdout}


# One environment: each plugin input present or not, hostile values among them.
PARTS = st.fixed_dictionaries({
    # "handed": the environment `env --profile a` prints (its hand-off signed with this user's key).
    "gate": st.sampled_from([None, "a", "b", "handed"]),
    "extra": st.sampled_from([None, "NCCL_DEBUG=INFO", "NCCL_DEBUG=WARN"]),
    "rank": st.sampled_from([None, "0", "1", "node-1"]),
    "audit": st.booleans(),
    "foreign": st.sampled_from([None, "NCCL_ENV_PLUGIN", "NCCL_TUNER_PLUGIN"]),
})


def environment(parts: dict, world: dict[str, str]) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin")}
    if parts["gate"] == "handed":
        env.update(json.loads(world["handed"]))
    elif parts["gate"]:
        env[names.ENV_ENABLE] = world[parts["gate"]]
    if parts["extra"]:
        env[names.ENV_ENV] = parts["extra"]
    if parts["rank"] is not None:
        env[names.ENV_NODE_RANK] = parts["rank"]
    if parts["audit"]:
        env[names.ENV_AUDIT_DIR] = world["audit"]
    if parts["foreign"]:
        env[parts["foreign"]] = world["lib"]
    return env


def read_wire(wire: str) -> tuple[dict, dict, str | None]:
    """The hand-off's body as the wire carries it (prefix, hex of the JSON body, signature or '-')."""
    _prefix, payload, _mac = wire.rsplit(".", 2)
    body = json.loads(bytes.fromhex(payload))
    return body["profile"], body["inputs"], body["run_dir"]


def answer(inputs: Inputs) -> dict:
    """Everything a caller of decide() reads, as plain data (the hand-off decoded)."""
    d = decide(inputs)
    out = {
        "problems": [f.message() for f in d.problems],
        "profile": d.profile.to_dict() if d.profile is not None else None,
        "values": d.values, "groups": d.group_values, "chars": d.handoff_chars, "limit": d.handoff_limit,
        "launch": d.launch_name(), "handoff": None,
    }
    if d.handoff is not None:
        updates = dict(d.handoff.updates)
        wire = updates.pop(names.ENV_PROFILE)
        out["handoff"] = (updates, *read_wire(wire))
    return out


def expected_values(env: dict[str, str]) -> dict[str, str]:
    """The reference: profile A's [env], SGLANG_EAGLE_NCCL_ENV on top, the node's section."""
    values = {"NCCL_ALGO": "Ring"}
    if names.ENV_ENV in env:
        values.update([env[names.ENV_ENV].split("=", 1)])
    if env.get(names.ENV_NODE_RANK) == "1":
        values["NCCL_SOCKET_IFNAME"] = "ib1"
    return values


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(given_parts=PARTS, own_parts=PARTS, from_environment=st.booleans(), node_rank=st.sampled_from([None, 1]),
       standalone=st.booleans())
def test_decide_answers_for_the_environment_it_is_given(world, given_parts, own_parts, from_environment, node_rank,
                                                        standalone):
    env = environment(given_parts, world)
    specs = () if from_environment else (world["a"],)

    def inputs() -> Inputs:
        return Inputs(dict(env), specs, from_environment=from_environment, node_rank=node_rank,
                      standalone=standalone)

    with process_environ({k: v for k, v in env.items() if k != "PATH"}):
        there = answer(inputs())
    with process_environ({k: v for k, v in environment(own_parts, world).items() if k != "PATH"}):
        here = answer(inputs())
    assert here == there

    problems = there["problems"]
    # What was exercised (pytest --hypothesis-show-statistics).
    event("refused" if problems else "accepted")
    event("hand-off decided" if there["handoff"] else "no hand-off")
    assert len(set(problems)) == len(problems), problems  # each problem once
    if (from_environment and given_parts["gate"] == "handed" and not given_parts["extra"] and not given_parts["audit"]
            and given_parts["rank"] != "node-1" and given_parts["foreign"] != "NCCL_ENV_PLUGIN"):
        # Exactly what `env` printed, or with a node rank or the user's tuner: that profile, accepted.
        assert not problems and there["profile"]["env"] == {"NCCL_ALGO": "Ring"}, problems
    if there["profile"] is None:
        return
    assert there["limit"] == ENTRY_LIMIT and there["launch"] is None  # no launch directory chosen
    assert there["groups"] == ({"tp": {"NCCL_PROTO": "LL"}} if not from_environment or given_parts["gate"] in ("a", "handed")
                               else {})
    if not from_environment and not problems:
        assert {k: v for k, v in there["values"].items() if k not in PLUGIN_VARS} == expected_values(env)
    if there["handoff"] is None:
        return
    updates, data, recorded, run_dir = there["handoff"]
    assert there["chars"] <= ENTRY_LIMIT and there["chars"] > 0
    assert data["env"] == there["profile"]["env"]
    assert updates[names.ENV_ROOT_PID] == str(os.getpid())  # Inputs' default: this process is the root's parent
    assert updates[names.ENV_ENABLE] == env.get(names.ENV_ENABLE, "1")  # the shell's gate, else on
    assert updates.get(names.ENV_NODE_RANK) == (None if node_rank is None else str(node_rank))
    assert updates.get("NCCL_SOCKET_IFNAME") == ("ib1" if node_rank == 1 and "ib1" in str(data["nodes"]) else None)
    root = there["profile"]["policy"].get("audit_dir") or os.path.join(tempfile.gettempdir(),
                                                                      f"sglang-eagle-nccl-{os.getuid()}")
    assert os.path.dirname(run_dir) == os.path.abspath(root) and len(os.path.basename(run_dir)) == LAUNCH_ID_CHARS
    # Standalone (env's output, a Ray actor): every input the hand-off records travels with it.
    travelling = {k: v for k, v in updates.items() if k.startswith("SGLANG_EAGLE_NCCL") and v is not None}
    if standalone:
        assert recorded.items() <= travelling.items()
    else:
        assert names.ENV_ENV not in updates and names.ENV_AUDIT_DIR not in updates


def test_a_launcher_refusal_comes_before_the_hand_offs_and_a_shared_one_is_named_once(tmp_path):
    # A shell whose node rank is no node rank: the launcher refuses it, and so would every child (it
    # inherits the variable); a profile too large to hand down: only the hand-off refuses it.
    big = tmp_path / "big.toml"
    big.write_text("\n".join(f'[nodes.{n}.env]\nNCCL_SOCKET_IFNAME = "enp{n}s0f0np0"' for n in range(2000)) + "\n")
    small = tmp_path / "small.toml"
    small.write_text('[env]\nNCCL_ALGO = "Ring"\n')
    with process_environ({}):
        bad_rank = {names.ENV_NODE_RANK: "node-1"}
        both = decide(Inputs(bad_rank, (str(big),)))
        shared = decide(Inputs(bad_rank, (str(small),)))
        alone = decide(Inputs({}, (str(big),)))
    first, second = (f.message() for f in both.problems)
    assert names.ENV_NODE_RANK in first and names.ENV_PROFILE in second, both.problems
    assert alone.handoff is None and len(alone.problems) == 1 and names.ENV_PROFILE in alone.first.message()
    assert len(shared.problems) == 1 and names.ENV_NODE_RANK in shared.first.message()


def test_a_decision_made_again_for_another_launch_directory_keeps_the_launchs_root(world, tmp_path):
    with process_environ({}):
        decision = decide(Inputs({}, (world["a"],), opens_launch=True, audit_root=str(tmp_path), root_pid="4242",
                                 node_rank=1))
        assert decision.launch_name() == Path(decision.run_dir).name and decision.run_dir.startswith(str(tmp_path))
        other = str(tmp_path / "opened-elsewhere")
        env = decision.child_environment(other, create_key=False)
    assert read_wire(env[names.ENV_PROFILE])[2] == other and env[names.ENV_ROOT_PID] == "4242"
    assert env[names.ENV_NODE_RANK] == "1" and env["NCCL_SOCKET_IFNAME"] == "ib1"


def test_doctor_in_a_shell_a_launcher_prepared_reads_the_handed_profile(world):
    # doctor without --profile decides from this shell: exactly what `env --profile a` printed, its
    # hand-off signed (the key makes it trusted: no second validation, the data as it was handed).
    with process_environ(json.loads(world["handed"])):
        result = CliRunner().invoke(main, ["doctor", "--json"])
    report = json.loads(result.stdout)
    assert report["profile"] is not None and report["profile"]["env"] == {"NCCL_ALGO": "Ring"}, report["problems"]
    assert report["profile"]["groups"] == {"tp": {"NCCL_PROTO": "LL"}}
    assert not [p for p in report["problems"] if "cannot be applied" in p or "would refuse" in p]
