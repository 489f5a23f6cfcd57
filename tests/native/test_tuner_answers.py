"""What the tuner actually answered, counted in C per communicator and (collective, size, answer), read by
the audit (native/src/tuner_plugin.c, offline/audit/tuner_answers.py, issue 28 item 2).

A real spawned process gets the environment ``sglang-eagle-nccl env --audit-dir`` prints (the plugin's
activation configures the library and opens the reads log when ctypes is imported, as torch does) and
then calls the tuner exactly as NCCL does: it dlopens ``NCCL_TUNER_PLUGIN``, and through the exported
``ncclTunerPlugin_v<abi>`` struct calls init, getCollInfo per collective and destroy/finalize -- one
communicator is destroyed, the other left alive at exit (its answers come from the exit flush). The
expected answers come from the profile's TOML rule, evaluated here by a small reference (first rule
whose collective and byte range match), never from the library's own helpers.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_eagle_nccl.knowledge._toml import loads as toml_loads
from sglang_eagle_nccl.offline.audit.ledger_audit import ledger_view
from sglang_eagle_nccl.offline.audit.ledger_join import summarize
from sglang_eagle_nccl.offline.audit.ledger_read import LaunchLedger, parse_lines
from sglang_eagle_nccl.offline.audit.ledger_render import format_ledger
from sglang_eagle_nccl.offline.audit.tuner_answers import read_tuner_answers

REPO = Path(__file__).resolve().parents[2]
TOML = REPO / "sglang_eagle_nccl" / "profile" / "builtin" / "pcie-8gpu-eagle.toml"
COLLECTIVE_IDS = {"Broadcast": 0, "AllGather": 2, "ReduceScatter": 3, "AllReduce": 4}

# The child: NCCL's calls, through the struct NCCL resolves (dlsym of ncclTunerPlugin_v<abi>).
CHILD = r"""
import ctypes, json, os, sys
from sglang_eagle_nccl.native.abi import TUNER_STRUCTS
plan = json.loads(sys.argv[1])
lib = ctypes.CDLL(os.environ["NCCL_TUNER_PLUGIN"])
for comm in plan:
    abi = comm["abi"]
    plugin = TUNER_STRUCTS[abi].in_dll(lib, f"ncclTunerPlugin_v{abi}")
    ctx = ctypes.c_void_p()
    if abi >= 5:
        assert plugin.init(ctypes.byref(ctx), comm["comm_id"], comm["nranks"], 1, None, None, None) == 0
    else:
        assert plugin.init(comm["nranks"], 1, None, ctypes.byref(ctx)) == 0
    for coll, nbytes in comm["calls"]:
        table = (ctypes.c_float * 21)(*([1.0] * 21))
        nch = ctypes.c_int(0)
        args = [ctx, coll, nbytes, 1, ctypes.cast(table, ctypes.c_void_p), 7, 3]
        if abi >= 4:
            args.append(0)
        assert plugin.getCollInfo(*args, ctypes.byref(nch)) == 0
    if comm["destroy"]:
        (plugin.destroy if abi <= 4 else plugin.finalize)(ctx)
"""


def _rule_answer(collective: str, nbytes: int) -> tuple[int | None, str | None, str | None]:
    """The reference: the first [[tuner.rules]] whose collective and [lo, hi) byte range match."""
    for i, rule in enumerate(toml_loads(TOML.read_text())["tuner"]["rules"]):
        lo, hi = rule["bytes"]
        if rule["collective"] == collective.lower() and lo <= nbytes < hi:
            return i, rule["algorithm"].lower(), rule["protocol"]
    return None, None, None


def _launch_env(tmp_path: Path) -> dict[str, str]:
    cli = [sys.executable, "-m", "sglang_eagle_nccl", "env", "--profile", "pcie-8gpu-eagle", "--audit-dir",
           str(tmp_path / "audit"), "--format", "json"]
    got = subprocess.run(cli, capture_output=True, text=True, timeout=120, check=True)
    printed = json.loads(got.stdout)
    # NCCL_ENV_PLUGIN / NCCL_TUNER_PLUGIN are set by the child's own activation (its installation's library).
    assert printed.get("SGLANG_EAGLE_NCCL") == "1", printed
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SGLANG_EAGLE_NCCL"))}
    return {**keep, **printed}


def _run_dirs(root: Path) -> list[str]:
    return sorted({str(p.parent) for p in root.rglob("nccl-reads-*.jsonl")})


@pytest.mark.parametrize("seed", [1, 2])
def test_a_real_process_reports_each_answer_per_communicator_and_size(tmp_path, seed):
    rng = random.Random(seed)
    sizes = [256, 43008, 524287, 524288, 4 << 20]
    plan, expected = [], {}
    for context, (abi, destroy) in enumerate([(rng.choice([5, 6]), True), (rng.choice([3, 4]), False)], 1):
        calls = [(rng.choice(list(COLLECTIVE_IDS)), rng.choice(sizes)) for _ in range(rng.randint(5, 40))]
        plan.append({"abi": abi, "comm_id": 0xC0FFEE + context, "nranks": 8, "destroy": destroy,
                     "calls": [(COLLECTIVE_IDS[c], n) for c, n in calls]})
        for c, n in calls:
            rule, algo, proto = _rule_answer(c, n)
            key = (context, c, n, rule, algo, proto)
            expected[key] = expected.get(key, 0) + 1
    env = _launch_env(tmp_path)
    subprocess.run([sys.executable, "-c", CHILD, json.dumps(plan)], env=env, check=True, timeout=120)

    run_dirs = _run_dirs(tmp_path / "audit")
    assert len(run_dirs) == 1, run_dirs
    answers = read_tuner_answers(run_dirs)
    (comms,) = answers.processes.values()
    got = {}
    for context, comm in comms.items():
        assert comm.nranks == 8 and comm.unrecorded == 0
        assert comm.final is (context == 1)  # destroyed, or only flushed at exit
        for a in comm.to_dict()["answers"]:
            algo = a["algorithm"].lower() if a["algorithm"] else None
            got[(context, a["collective"], a["bytes"], a["rule_index"], algo, a["protocol"])] = a["count"]
    assert got == expected


def test_the_ledger_shows_the_actual_answer_and_where_it_differs(tmp_path):
    """The join compares the rules' answer for the line (what the audit's decider says for its group) with
    what the tuner answered that process: equal -> no mark; another rule or cell -> ``differs``."""
    plan = [{"abi": 6, "comm_id": 7, "nranks": 2, "destroy": True, "calls": [(4, 43008)] * 3}]
    env = _launch_env(tmp_path)
    subprocess.run([sys.executable, "-c", CHILD, json.dumps(plan)], env=env, check=True, timeout=120)
    (run_dir,) = _run_dirs(tmp_path / "audit")
    reads = next(Path(run_dir).glob("nccl-reads-*.jsonl")).read_text().splitlines()
    ident = {k: json.loads(reads[0])[k] for k in ("host", "boot_id", "pidns", "pid", "start")}
    ledger = LaunchLedger()
    lines = [
        {"kind": "process", "identity": ident, "role": "scheduler"},
        {"kind": "step", "phase": "target verify", "mode": "eager", "batch": 1, "tokens": 3, "count": 1},
        {"kind": "collective", "phase": "target verify", "mode": "eager", "batch": 1, "tokens": 3,
         "op": "all_reduce", "group": "tp:0", "impl": "torch_nccl", "ranks": 2, "bytes": 43008,
         "dtype": "bfloat16", "count": 3},
    ]
    parse_lines("\n".join(json.dumps(x) for x in lines), "ledger", ledger)
    assert not ledger.unreadable, ledger.unreadable
    answers = read_tuner_answers([run_dir])

    def other_rule(collective, nbytes, nranks, nnodes, group):
        # Rules that answer this call for group "tp" with another rule and cell than the tuner used.
        assert (collective, nbytes, nranks, group) == ("AllReduce", 43008, 2, "tp")
        return {"rule_index": 1, "applied": True, "algorithm": "Tree", "protocol": "Simple", "channels": None,
                "answer": "tuner.rules#2: Tree/Simple"}

    view = summarize(ledger, other_rule, answers)
    (line,) = view.lines
    (actual,) = line.actual[43008]
    # The tuner (pcie-8gpu-eagle: all-reduces below 512 KiB -> Ring/LL) answered the unlabelled communicator 3 times.
    assert (actual["count"], actual["group"], actual["answer"]) == (3, None, "tuner.rules#1: Ring/LL")
    assert actual["differs"] is True and view.lines[0].to_dict()["sizes"][0]["differs"] is True
    same = summarize(ledger, lambda *a: {"rule_index": 0, "applied": True, "algorithm": "Ring", "protocol": "LL",
                                          "channels": None, "answer": "tuner.rules#1: Ring/LL"}, answers)
    assert same.lines[0].actual[43008][0]["differs"] is False
    screen = format_ledger(view)
    assert "the tuner answered: ⚠ differs: tuner.rules#1: Ring/LL × 3" in screen, screen
    # The screen of the real launch directory: the tuner's answers are listed even without a ledger file.
    shown = ledger_view([run_dir])
    assert shown is not None and shown.tuner_answers[0]["communicators"][0]["answers"][0]["count"] == 3


FORK_CHILD = r"""
import ctypes, os
from sglang_eagle_nccl.native.abi import TUNER_STRUCTS
lib = ctypes.CDLL(os.environ["NCCL_TUNER_PLUGIN"])
plugin = TUNER_STRUCTS[6].in_dll(lib, "ncclTunerPlugin_v6")
ctx = ctypes.c_void_p()
assert plugin.init(ctypes.byref(ctx), 99, 2, 1, None, None, None) == 0

def ask(times):
    for _ in range(times):
        table = (ctypes.c_float * 21)(*([1.0] * 21))
        assert plugin.getCollInfo(ctx, 4, 256, 1, ctypes.cast(table, ctypes.c_void_p), 7, 3, 0,
                                  ctypes.byref(ctypes.c_int(0))) == 0

ask(2)
pid = os.fork()
if pid == 0:  # a forked child (fork handlers take the tuner's lock): what it asks is not the parent's
    ask(5)
    plugin.finalize(ctx)
    os._exit(0)
os.waitpid(pid, 0)
ask(1)
plugin.finalize(ctx)
"""


def test_a_forked_child_does_not_count_or_report_its_parents_communicator(tmp_path):
    env = _launch_env(tmp_path)
    subprocess.run([sys.executable, "-c", FORK_CHILD], env=env, check=True, timeout=120)
    (run_dir,) = _run_dirs(tmp_path / "audit")
    (comms,) = read_tuner_answers([run_dir]).processes.values()
    (comm,) = comms.values()
    assert comm.final and comm.comm_id == f"{99:016x}"
    assert [(a["collective"], a["bytes"], a["count"]) for a in comm.to_dict()["answers"]] == [("AllReduce", 256, 3)]
