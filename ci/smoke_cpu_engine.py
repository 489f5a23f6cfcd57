#!/usr/bin/env python3
"""Smoke-test a real SGLang on this CPU-only machine, with the interpreter of a test venv.

    python3 ci/sglang_venv.py build 0.5.23
    "$(python3 ci/sglang_venv.py path 0.5.23)/bin/python" ci/smoke_cpu_engine.py [--steps a,b] [--list]

Steps for the installed SGLang version (tiny dummy-weight Llama, TP=2, gloo):
  SGLang with CPU EAGLE (0.5.23+): engine-tp2-plain, engine-tp2-eagle, engine-tp2-eagle3,
                                   engine-tp2-standalone, http-tp2-eagle
  older (0.5.4):                   engine-tp2-plain, http-tp2-plain
(standalone: SGLang's EAGLE worker with the target as its own draft, so every draft token is accepted and
the accept path runs -- random EAGLE drafts are never accepted.)
Each step runs in its own process session; it passes when it generated tokens and, after shutdown, no
process of that session is left. Greedy EAGLE output must equal the plain output at the same TP size
(dummy weights are seeded), which checks the CPU stand-in kernels end to end.

Every step's full stdout/stderr (SGLang's start-up timings, "Prefill batch" / "Decode batch" lines with
accept length and throughput -- logged for every batch, ``--decode-log-interval 1``) is kept in
``<cache>/logs/smoke-<version>-<step>.log`` (``<cache>``: ci/cache_root.py), with a summary
in ``smoke-<version>-summary.json``. Exit status 0 only if every step passed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))

import sglang_cpu_run as run  # noqa: E402

sys.path.insert(0, str(REPO_ROOT / "ci"))
import tiny_models  # noqa: E402
from cache_root import cache_root  # noqa: E402 - the CI scripts' one cache rule (ci/cache_root.py)

RESULT_MARK = "SMOKE_RESULT "
PROMPT = [1, 17, 33, 71, 105, 260]
MAX_NEW_TOKENS = 8
REQUESTS = 2
TP_SIZE = 2


def cache_dir() -> Path:
    return cache_root()  # ci/cache_root.py: the one rule of the CI scripts


def steps_for(version: str) -> list[str]:
    if run.supports_cpu_eagle(version):
        return ["engine-tp2-plain", "engine-tp2-eagle", "engine-tp2-eagle3", "engine-tp2-standalone",
                "http-tp2-eagle"]
    return ["engine-tp2-plain", "http-tp2-plain"]


def _algorithm(step: str) -> str | None:
    return {"plain": None, "eagle": "EAGLE", "eagle3": "EAGLE3", "standalone": "STANDALONE"}[
        step.rsplit("-", 1)[1]]


# ------------------------------------------------------------------------------------------------
# process bookkeeping
# ------------------------------------------------------------------------------------------------


def session_members(sid: int) -> list[tuple[int, str]]:
    """(pid, command) of every live process in session ``sid`` (zombies excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # Fields after the parenthesised command: state is the 1st, session the 4th.
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) != sid or fields[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            members.append((int(entry.name), cmd or stat[stat.index("(") + 1:stat.rindex(")")]))
        except (OSError, ValueError, IndexError):
            continue
    return members


def reap_session(sid: int, grace: float = 10.0) -> list[tuple[int, str]]:
    """Wait up to ``grace`` s for session ``sid`` to empty; return (and then kill) what is left."""
    deadline = time.monotonic() + grace
    left = session_members(sid)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = session_members(sid)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


# ------------------------------------------------------------------------------------------------
# steps (parent side)
# ------------------------------------------------------------------------------------------------


def run_engine_step(step: str, models: dict[str, Path], log: Path, timeout: float,
                    env: dict[str, str]) -> dict[str, Any]:
    algorithm = _algorithm(step)
    kwargs = run.engine_kwargs(
        models["target"], tp_size=TP_SIZE, speculative_algorithm=algorithm,
        draft_path=models.get(algorithm or "", None),
    )
    spec = {"kwargs": kwargs, "prompt": PROMPT, "max_new_tokens": MAX_NEW_TOKENS, "requests": REQUESTS}
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child-engine", json.dumps(spec)],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wall = time.monotonic() - started
    leftovers = reap_session(proc.pid)
    result: dict[str, Any] = {"step": step, "wall_s": round(wall, 1), "exit_code": rc,
                              "leftover_processes": [cmd[:120] for _, cmd in leftovers]}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(RESULT_MARK):
            result.update(json.loads(line[len(RESULT_MARK):]))
    result["ok"] = bool(rc == 0 and not leftovers and result.get("outputs"))
    if rc is None:
        result["error"] = f"timed out after {timeout:.0f}s"
    return result


def run_http_step(step: str, models: dict[str, Path], log: Path, timeout: float,
                  env: dict[str, str]) -> dict[str, Any]:
    algorithm = _algorithm(step)
    port = run.free_port()
    cmd = run.server_cmd(
        models["target"], port=port, tp_size=TP_SIZE, speculative_algorithm=algorithm,
        draft_path=models.get(algorithm or "", None),
    )
    result: dict[str, Any] = {"step": step, "command": " ".join(cmd[1:])}
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            result["ready_s"] = round(run.wait_http_ready(port, timeout, proc=proc), 1)
            outputs, times = [], []
            for _ in range(REQUESTS):
                t = time.monotonic()
                answer = run.generate_http(port, PROMPT, max_new_tokens=MAX_NEW_TOKENS)
                times.append(round(time.monotonic() - t, 2))
                outputs.append(answer.get("output_ids"))
                result["meta_info"] = _meta_subset(answer.get("meta_info", {}))
            result.update(outputs=outputs, request_s=times)
        except Exception as exc:  # report, then still shut down and check for leftovers
            result["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            t = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                result["exit_code"] = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                result["exit_code"] = None
                result.setdefault("error", "server did not exit within 60s of SIGTERM")
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            result["shutdown_s"] = round(time.monotonic() - t, 1)
    leftovers = reap_session(proc.pid)
    result["leftover_processes"] = [c[:120] for _, c in leftovers]
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["ok"] = bool(result.get("outputs") and "error" not in result and not leftovers)
    return result


def _meta_subset(meta: dict[str, Any]) -> dict[str, Any]:
    keys = ("prompt_tokens", "completion_tokens", "spec_accept_length", "spec_verify_ct", "e2e_latency")
    return {k: meta[k] for k in keys if k in meta}


def _standin_ops(log: Path) -> list[str]:
    ops = set()
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("[cpu-standins]") and " called " in line:
            ops.add(line.rsplit(" called ", 1)[1].strip())
    return sorted(ops)


# ------------------------------------------------------------------------------------------------
# child side: one Engine in this process (spawn needs the __main__ guard below)
# ------------------------------------------------------------------------------------------------


def child_engine(spec: dict[str, Any]) -> None:
    t = time.monotonic()
    import sglang

    import_s = time.monotonic() - t
    t = time.monotonic()
    engine = sglang.Engine(**spec["kwargs"])
    start_s = time.monotonic() - t
    outputs, times, meta = [], [], {}
    try:
        for _ in range(spec["requests"]):
            t = time.monotonic()
            answer = engine.generate(
                input_ids=spec["prompt"],
                sampling_params={"max_new_tokens": spec["max_new_tokens"], "temperature": 0},
            )
            times.append(round(time.monotonic() - t, 2))
            outputs.append(answer["output_ids"])
            meta = _meta_subset(answer.get("meta_info", {}))
    finally:
        t = time.monotonic()
        engine.shutdown()
        shutdown_s = time.monotonic() - t
    print(RESULT_MARK + json.dumps({
        "sglang": sglang.__version__, "import_s": round(import_s, 1), "engine_start_s": round(start_s, 1),
        "request_s": times, "shutdown_s": round(shutdown_s, 1), "outputs": outputs, "meta_info": meta,
    }), flush=True)


# ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", help="comma-separated subset of the steps (default: all for this version)")
    parser.add_argument("--list", action="store_true", help="print the steps for this version and exit")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per step (default 300)")
    parser.add_argument("--torch-compile", action="store_true",
                        help="leave torch.compile on (SGLang compiles the TP embedding; slow first request)")
    parser.add_argument("--child-engine", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child_engine:
        child_engine(json.loads(args.child_engine))
        return 0

    version = run.installed_sglang_version()
    all_steps = steps_for(version)
    if args.list:
        print("\n".join(all_steps))
        return 0
    steps = args.steps.split(",") if args.steps else all_steps
    unknown = [s for s in steps if s not in all_steps]
    if unknown:
        sys.exit(f"unknown step(s) for sglang {version}: {unknown}; available: {all_steps}")

    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = run.full_env(TP_SIZE, torch_compile=args.torch_compile,
                       SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS_TRACE="1", PYTHONUNBUFFERED="1")
    print(f"[smoke {version}] python={sys.executable}", flush=True)
    print(f"[smoke {version}] logs in {logs}", flush=True)

    total_started = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="sglang-smoke-") as tmp:
        models = {
            "target": tiny_models.write_target(Path(tmp) / "target"),
            "EAGLE": tiny_models.write_eagle_draft(Path(tmp) / "eagle", kind="EAGLE"),
            "EAGLE3": tiny_models.write_eagle_draft(Path(tmp) / "eagle3", kind="EAGLE3"),
        }
        models["STANDALONE"] = models["target"]
        for step in steps:
            log = logs / f"smoke-{version}-{step}.log"
            print(f"[smoke {version}] {step} ...", flush=True)
            runner = run_http_step if step.startswith("http") else run_engine_step
            result = runner(step, models, log, args.timeout, env)
            result["log"] = str(log)
            result["standin_ops"] = _standin_ops(log)
            results.append(result)
            print(f"[smoke {version}] {step}: {'PASS' if result['ok'] else 'FAIL'} {_describe(result)}",
                  flush=True)

    # Greedy speculative decoding must reproduce plain greedy decoding at the same TP size.
    plain = next((r for r in results if r["step"] == "engine-tp2-plain" and r.get("outputs")), None)
    for r in results:
        if plain is not None and r is not plain and r.get("outputs"):
            r["same_as_plain"] = all(o == plain["outputs"][0] for o in r["outputs"])
            if not r["same_as_plain"]:
                r["ok"] = False
                print(f"[smoke {version}] {r['step']}: FAIL output {r['outputs'][0]} != plain "
                      f"{plain['outputs'][0]}", flush=True)

    # With the target as its own draft every draft token must be accepted.
    for r in results:
        accept = r.get("meta_info", {}).get("spec_accept_length")
        if r["step"].endswith("standalone") and r["ok"] and (accept is None or accept < 1.5):
            r["ok"] = False
            print(f"[smoke {version}] {r['step']}: FAIL accept length {accept}, expected about 2", flush=True)

    total = time.monotonic() - total_started
    summary = {"sglang": version, "total_s": round(total, 1), "steps": results}
    (logs / f"smoke-{version}-summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    passed = sum(r["ok"] for r in results)
    print(f"[smoke {version}] {passed}/{len(results)} steps passed in {total:.1f}s "
          f"(summary: {logs / f'smoke-{version}-summary.json'})", flush=True)
    return 0 if passed == len(results) else 1


def _describe(r: dict[str, Any]) -> str:
    parts = [f"wall={r.get('wall_s')}s"]
    for key in ("engine_start_s", "ready_s", "request_s", "shutdown_s", "exit_code"):
        if key in r:
            parts.append(f"{key}={r[key]}")
    if r.get("meta_info", {}).get("spec_accept_length") is not None:
        parts.append(f"accept_len={r['meta_info']['spec_accept_length']:.2f}")
    if r.get("leftover_processes"):
        parts.append(f"LEFTOVER={r['leftover_processes']}")
    if r.get("error"):
        parts.append(f"error={r['error']}")
    return " ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
