"""What preflight shows of its ranks' output (offline/launch/rank_output.py): SGLang's usual CPU-only
notices folded into one line, every other line relayed with its rank, known errors with their cause.

The rules checked against references written here: a line is held back only if it carries one of the
notices' own phrases (so no other line can be hidden, whatever it says); the summary counts exactly the
lines held back and names exactly their kinds; the relay, with real spawned processes writing to
stdout and stderr, relays every other line once, in order per rank.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.offline.launch import rank_output as ro
from support import noisy_rank

# The phrase of each notice that must be present for a line to be held back (the reference).
PHRASES = {
    "custom all-reduce off": "Setup Custom allreduce failed with",
    "cores bound per rank": "SGLANG_CPU_OMP_THREADS_BIND is set for explicit control",
    "more ranks than NUMA nodes": "is larger than numa node number",
    "no shared-memory all-reduce": "shared memory based AllReduce is disabled",
    "CUDA graphs off": "Cuda graph is disabled because of using torch native attention backend",
    "GPU-only quantization": "support AWQ|support GGUF",
}


def reference_notice(line: str) -> str | None:
    for name, phrase in PHRASES.items():
        if any(p in line for p in phrase.split("|")):
            return name
    return None


def test_the_reference_covers_every_notice():
    assert sorted(PHRASES) == sorted(n.name for n in ro.CPU_NOTICES)


def test_every_real_notice_line_is_held_back():
    for line in noisy_rank.REAL_NOTICES:
        assert ro.is_cpu_notice(line) is not None, line
        # With a log prefix such as SGLang's own formatter writes, too.
        assert ro.is_cpu_notice(f"[2026-12-02 06:08:55 TP0] {line}") is not None


_words = st.sampled_from(["error", "failed", "Setup", "Custom", "allreduce", "CUDA", "graph", "numa", "rank",
                          "AllReduce", "shared", "memory", "support", "AWQ", "GGUF", "Only", "with", ".", " "])


@settings(max_examples=300)
@given(line=st.one_of(st.text(max_size=80), st.lists(_words, max_size=12).map(" ".join)))
def test_no_other_line_is_held_back(line):
    """Whatever a rank prints, it is held back only if it carries a notice's own phrase."""
    got = ro.is_cpu_notice(line)
    if reference_notice(line) is None:
        assert got is None, line


@settings(max_examples=100)
@given(counts=st.dictionaries(st.sampled_from(sorted(PHRASES)), st.integers(0, 20)), ranks=st.integers(1, 8))
def test_the_summary_counts_and_names_what_was_held_back(counts, ranks):
    line = ro.notice_summary(Counter(counts), ranks)
    if not sum(counts.values()):
        assert line is None
        return
    assert line is not None
    assert f"{sum(counts.values())} line(s)" in line and f"from {ranks} rank(s)" in line
    for name in PHRASES:
        assert (f"{name} (" in line) == bool(counts.get(name)), name


def test_known_cause_of_the_torchvision_mismatch_names_the_switch():
    cause = ro.known_cause("RuntimeError: operator torchvision::nms does not exist")
    assert cause is not None and "SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS=1" in cause and "Troubleshooting" in cause
    assert ro.known_cause("RuntimeError: something else") is None


def test_real_ranks_output_is_relayed_with_notices_folded():
    """Two spawned processes print notices and other lines on stdout and stderr; through the relay,
    every other line arrives once with its rank, in its order, and the notices only as counts."""
    plans = {
        0: [("err", noisy_rank.REAL_NOTICES[0]), ("out", "loading weights 1/2"), ("err", noisy_rank.REAL_NOTICES[1]),
            ("err", "Traceback: a real problem"), ("out", noisy_rank.REAL_NOTICES[5])],
        1: [("out", "rank one says hello"), ("err", noisy_rank.REAL_NOTICES[0]), ("err", "")],
    }
    got: list[str] = []
    relay = ro.RankRelay(write=got.append)
    ctx = mp.get_context("spawn")
    procs = []
    for rank, lines in plans.items():
        p = ctx.Process(target=noisy_rank.main, args=(lines,))
        relay.starting(rank, p.start)
        procs.append(p)
    relay.relay()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    summary = relay.finish()
    for rank, lines in plans.items():
        wanted = [f"[rank {rank}] {t}" for _, t in lines if t and reference_notice(t) is None]
        # Within one stream the order holds; stdout and stderr are two streams, so compare per stream.
        for stream in ("out", "err"):
            mine = [f"[rank {rank}] {t}" for s, t in lines if s == stream and t and reference_notice(t) is None]
            assert [g for g in got if g in mine] == mine
        assert sorted(g for g in got if g.startswith(f"[rank {rank}] ")) == sorted(wanted)
    assert summary is not None and re.match(r"\[preflight\] 4 line\(s\) .* from 2 rank\(s\)", summary), summary
    assert relay.notices == Counter({"custom all-reduce off": 2, "cores bound per rank": 1, "GPU-only quantization": 1})


def test_a_summary_of_nothing_is_no_line():
    """Shrunk by hypothesis: a kind counted zero times is no notice held back."""
    assert ro.notice_summary(Counter({"CUDA graphs off": 0}), 1) is None


def test_raw_bytes_and_trailing_spaces_arrive_as_written(capfd):
    """Output no decoder has seen (a rank's C library, a broken locale) is relayed with its bad bytes
    replaced, never lost; a line keeps its own trailing spaces; stdout and stderr are both read."""
    got: list[str] = []
    relay = ro.RankRelay(write=got.append)
    plans = {3: [(2, b"\xff\xfebad bytes  \n"), (1, b"plain\r\n"), (1, b"ends in X\n"), (1, b"last line without newline")]}
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=noisy_rank.main_bytes, args=(plans[3],))
    relay.starting(3, p.start)
    relay.relay()
    p.join(60)
    assert relay.finish() is None
    assert sorted(got) == sorted(["[rank 3] \ufffd\ufffdbad bytes  ", "[rank 3] plain", "[rank 3] ends in X",
                                  "[rank 3] last line without newline"])


def test_the_parents_own_output_is_never_taken_into_a_rank_pipe(capfd):
    """While a rank starts, fds 1 and 2 point at its pipe; afterwards they are the parent's again."""
    got: list[str] = []
    relay = ro.RankRelay(write=got.append)
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=noisy_rank.main, args=([("out", "from the rank")],))
    relay.starting(0, p.start)
    os.write(1, b"parent stdout\n")
    os.write(2, b"parent stderr\n")
    relay.relay()
    p.join(60)
    relay.finish()
    out, err = capfd.readouterr()
    assert "parent stdout" in out and "parent stderr" in err
    assert got == ["[rank 0] from the rank"]


def test_by_default_lines_go_to_stderr(capfd):
    relay = ro.RankRelay()
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=noisy_rank.main, args=([("out", "hello"), ("err", noisy_rank.REAL_NOTICES[4])],))
    relay.starting(1, p.start)
    relay.relay()
    p.join(60)
    summary = relay.finish()
    out, err = capfd.readouterr()
    assert "[rank 1] hello\n" in err and "hello" not in out
    assert summary == ("[preflight] 1 line(s) of SGLang's usual CPU-only notices from 1 rank(s) not shown, "
                       "expected without a GPU: CUDA graphs off (no CUDA)")


def test_the_summary_names_each_kind_once_in_the_table_order():
    line = ro.notice_summary(Counter({"CUDA graphs off": 1, "custom all-reduce off": 2}), 2)
    assert line == ("[preflight] 3 line(s) of SGLang's usual CPU-only notices from 2 rank(s) not shown, expected "
                    "without a GPU: custom all-reduce off (SGLang's custom all-reduce needs CUDA); "
                    "CUDA graphs off (no CUDA)")


def test_a_grandchild_holding_the_pipe_does_not_hold_preflight(tmp_path):
    """A rank that leaves a process behind (it inherits the rank's stdout) does not keep finish waiting."""
    got: list[str] = []
    relay = ro.RankRelay(write=got.append)
    ctx = mp.get_context("spawn")
    flag = tmp_path / "grandchild-done"
    p = ctx.Process(target=noisy_rank.leave_a_grandchild, args=(str(flag), 60))
    relay.starting(0, p.start)
    relay.relay()
    p.join(60)
    try:
        relay.finish(timeout=1.0)
        # finish returned while the grandchild (60 s) still held the pipe.
        assert not flag.exists()
        assert got[:1] == ["[rank 0] grandchild started"]
    finally:
        os.kill(int((tmp_path / "grandchild-done.pid").read_text()), signal.SIGKILL)  # ours, by its pid


# Run as a fresh interpreter (preflight's own situation): the rank is the process's first spawn, so
# multiprocessing's resource tracker has not started yet. Run inside pytest, an earlier test may have
# started it already, which hid that the tracker, started during the rank's start, kept the rank's pipe
# open (its last line without a newline was lost, finish waited its whole timeout).
FIRST_SPAWN = """
import json, multiprocessing as mp, sys
from sglang_eagle_nccl.offline.launch import rank_output as ro
from support import noisy_rank
if __name__ == "__main__":
    got = []
    relay = ro.RankRelay(write=got.append)
    p = mp.get_context("spawn").Process(target=noisy_rank.main_bytes, args=([(1, b"first\\n"), (2, b"no newline")],))
    relay.starting(0, p.start)
    relay.relay()
    p.join(60)
    relay.finish(timeout=30.0)
    print(json.dumps(got))
"""


def test_the_first_spawn_of_a_fresh_process_loses_no_line(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "first_spawn.py"
    script.write_text(FIRST_SPAWN)
    tests_dir = str(Path(noisy_rank.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tests_dir, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == ["[rank 0] first", "[rank 0] no newline"]
