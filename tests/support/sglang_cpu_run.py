"""Run a real SGLang engine or HTTP server on a CPU-only machine, from a test or a script.

Meant for the venvs ``ci/sglang_venv.py`` builds (CPU torch, the CPU stand-ins behind
``SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS=1``). Nothing here imports SGLang, so it is safe to import from a
pytest process that only launches SGLang in children.

    env = full_env(tp_size=2)                       # the parent's environment + what SGLang on CPU needs
    kwargs = engine_kwargs(target, tp_size=2, draft_path=draft, speculative_algorithm="EAGLE")
    # in a child started with env (the launching module must be guarded by ``if __name__ == "__main__"``):
    #     engine = sglang.Engine(**kwargs); engine.generate(input_ids=[...], sampling_params=...)
    cmd = server_cmd(target, port=port, tp_size=2, draft_path=draft, speculative_algorithm="EAGLE")
    proc = subprocess.Popen(cmd, env=env); wait_http_ready(port, 120, proc=proc)
    generate_http(port, [1, 5, 7, 9])

Version differences handled here:
  * EAGLE / EAGLE-3 run on 0.5.23 (newer too) with ``attention_backend="intel_amx"`` (the stand-ins set
    the platform's AMX fact so SGLang keeps it); plain decoding uses ``torch_native``.
  * 0.5.4 and older: plain decoding only. Their EAGLE path launches a Triton kernel while building the
    KV pool (no CPU branch), so ``engine_kwargs`` refuses EAGLE there with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

STANDINS_ENV_VAR = "SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS"
OMP_BIND_VAR = "SGLANG_CPU_OMP_THREADS_BIND"

# First SGLang release whose EAGLE path runs on CPU with the stand-ins (intel_amx attention + the
# sgl_kernel CPU ops); releases checked: 0.5.23 yes, 0.5.4 no.
FIRST_CPU_EAGLE_VERSION = (0, 5, 23)

# STANDALONE: SGLang's EAGLE machinery with an ordinary model as the draft. With the target's own
# directory as the draft, the dummy weights are identical (same seed), every draft token is accepted,
# and the accept path of verification runs (accept length 2.00) -- random EAGLE drafts never match.
SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE")


def installed_sglang_version() -> str:
    """The SGLang version installed in this interpreter (the plugin's one lookup; SGLang is not imported)."""
    # Imported here: ci/gpu-check loads this module in a Python that may not have the plugin installed.
    from sglang_eagle_nccl.contract import versions

    found = versions.installed_sglang_version()
    if found is None:
        raise metadata.PackageNotFoundError("sglang")
    return found


def _release(version: str) -> tuple[int, ...]:
    """(0, 5, 23) for "0.5.23", "0.5.23.post1", "0.5.24rc1", "0.5.23+local"."""
    from sglang_eagle_nccl.contract import versions

    return versions.stands_for(version).release[:3]


def supports_cpu_eagle(version: str | None = None) -> bool:
    """Whether EAGLE / EAGLE-3 can run on CPU with this SGLang version."""
    return _release(version or installed_sglang_version()) >= FIRST_CPU_EAGLE_VERSION


def omp_threads_bind(tp_size: int, cpus: Sequence[int] | None = None) -> str | None:
    """``SGLANG_CPU_OMP_THREADS_BIND`` for ``tp_size`` ranks: the usable CPUs split evenly, one
    ``|``-separated entry per rank (``"0|1"`` for TP=2 on 2 cores). None for TP=1: SGLang must not see
    the variable then."""
    if tp_size <= 1:
        return None
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    per_rank = len(cpus) // tp_size
    if per_rank == 0:
        raise ValueError(f"TP={tp_size} needs at least {tp_size} CPUs; this process may use {len(cpus)}")
    groups = [cpus[r * per_rank : (r + 1) * per_rank] for r in range(tp_size)]
    return "|".join(",".join(str(c) for c in group) for group in groups)


def env_for(tp_size: int, *, standins: bool = True, torch_compile: bool = False) -> dict[str, str]:
    """Environment variables a CPU SGLang run needs on top of the caller's environment.

    * ``SGLANG_USE_CPU_ENGINE=1`` (otherwise model construction imports ``vllm._custom_ops``);
    * ``SGLANG_CPU_OMP_THREADS_BIND``, one CPU set per TP rank (TP > 1 only; for TP=1 the variable must
      be absent -- ``full_env`` removes it);
    * the stand-in gate ``SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS=1`` (spawned children inherit it, so the
      venv's ``.pth`` activates the stand-ins in every SGLang process);
    * unless ``torch_compile``: ``TORCHDYNAMO_DISABLE=1``. At TP > 1 SGLang ``torch.compile``s its
      vocab-parallel embedding; on 2 cores compiling it stalls the first request by 15-30 s and changes
      nothing the plugin cares about (outputs are identical).
    """
    extra = {"SGLANG_USE_CPU_ENGINE": "1"}
    bind = omp_threads_bind(tp_size)
    if bind is not None:
        extra[OMP_BIND_VAR] = bind
    if standins:
        extra[STANDINS_ENV_VAR] = "1"
    if not torch_compile:
        extra["TORCHDYNAMO_DISABLE"] = "1"
    return extra


def full_env(
    tp_size: int, base: Mapping[str, str] | None = None, *, torch_compile: bool = False, **overrides: str
) -> dict[str, str]:
    """A complete environment for a child process: ``base`` (default ``os.environ``) plus ``env_for``,
    without a stale ``SGLANG_CPU_OMP_THREADS_BIND`` for TP=1, plus ``overrides``."""
    env = dict(os.environ if base is None else base)
    env.pop(OMP_BIND_VAR, None)
    env.update(env_for(tp_size, torch_compile=torch_compile))
    env.update(overrides)
    return env


def engine_kwargs(
    model_path: str | Path,
    *,
    tp_size: int = 1,
    draft_path: str | Path | None = None,
    speculative_algorithm: str | None = None,
    version: str | None = None,
    random_seed: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    """Keyword arguments for ``sglang.Engine`` (and, through ``server_cmd``, the server flags).

    Dummy weights, no tokenizer (token ids in and out), bfloat16, tiny memory and context. With
    ``speculative_algorithm`` ("EAGLE", "EAGLE3", or "STANDALONE" with the target as its own draft) and
    ``draft_path``: one draft step, top-1, two draft tokens -- the shape the CPU stand-ins implement.
    ``extra`` overrides or adds arguments.
    """
    version = version or installed_sglang_version()
    kwargs: dict[str, Any] = {
        "model_path": str(model_path),
        "device": "cpu",
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "tp_size": tp_size,
        "attention_backend": "torch_native",
        "dtype": "bfloat16",
        # SGLang sizes the KV pool from the memory still free after the weights load minus
        # (1 - mem_fraction_static) x what was free before; on CPU "free" is the machine's, which other
        # processes change meanwhile. 0.05 failed once when ~1 GiB went elsewhere during the load
        # ("Loaded weights leave no GPU memory for the KV cache", kv_cache_configurator.py in 0.5.23);
        # 0.5 tolerates half the machine's free memory going. max_total_tokens still fixes the pool at
        # 2048 tokens, so nothing larger is allocated.
        "mem_fraction_static": 0.5,
        "context_length": 256,
        "max_total_tokens": 2048,
        "disable_cuda_graph": True,
        "random_seed": random_seed,
        # One "Decode batch" log line per decode batch (default: every 40), with accept length and
        # throughput: the log lines tests and log parsers look at.
        "decode_log_interval": 1,
        # The Engine API defaults to "error"; "info" shows start-up timings and the batch lines.
        "log_level": "info",
    }
    if speculative_algorithm is not None:
        if speculative_algorithm not in SPECULATIVE_ALGORITHMS:
            raise ValueError(f"speculative_algorithm must be one of {SPECULATIVE_ALGORITHMS}")
        if draft_path is None:
            raise ValueError(f"{speculative_algorithm} needs draft_path (see tiny_models)")
        if not supports_cpu_eagle(version):
            raise ValueError(
                f"EAGLE on CPU is not available with sglang {version}: its KV-pool setup launches a "
                "Triton kernel that has no CPU branch (works from 0.5.23)"
            )
        kwargs.update(
            speculative_algorithm=speculative_algorithm,
            speculative_draft_model_path=str(draft_path),
            speculative_num_steps=1,
            speculative_eagle_topk=1,
            speculative_num_draft_tokens=2,
            # torch_native has no EAGLE support; intel_amx is SGLang's CPU backend for it.
            attention_backend="intel_amx",
        )
    kwargs.update(extra)
    return kwargs


def _cli_flags(kwargs: Mapping[str, Any]) -> list[str]:
    flags: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
        else:
            flags += [flag, str(value)]
    return flags


def server_cmd(
    model_path: str | Path,
    *,
    port: int,
    host: str = "127.0.0.1",
    python: str | None = None,
    **kwargs: Any,
) -> list[str]:
    """argv for ``python -m sglang.launch_server`` with the same settings as ``engine_kwargs``
    (which receives ``kwargs``) plus host and port."""
    settings = engine_kwargs(model_path, **kwargs)
    settings.update(host=host, port=port)
    return [python or sys.executable, "-m", "sglang.launch_server", *_cli_flags(settings)]


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http_ready(
    port: int, timeout: float, *, host: str = "127.0.0.1", proc: subprocess.Popen[Any] | None = None
) -> float:
    """Poll ``/health`` until the server answers 200; returns the seconds waited.

    Raises ``TimeoutError`` after ``timeout`` seconds, or ``RuntimeError`` as soon as ``proc`` (the
    server process, if given) exits.
    """
    started = time.monotonic()
    url = f"http://{host}:{port}/health"
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"SGLang server exited with code {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return time.monotonic() - started
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"SGLang server on port {port} not ready after {timeout:.0f}s")
        time.sleep(0.5)


def generate_http(
    port: int,
    input_ids: Sequence[int],
    *,
    max_new_tokens: int = 8,
    host: str = "127.0.0.1",
    timeout: float = 120.0,
) -> dict[str, Any]:
    """POST one greedy ``/generate`` request by token ids; returns the decoded JSON answer (its
    ``output_ids`` hold the generated token ids, ``meta_info`` the counts)."""
    body = json.dumps(
        {
            "input_ids": list(input_ids),
            "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0},
        }
    ).encode()
    request = urllib.request.Request(
        f"http://{host}:{port}/generate", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())
