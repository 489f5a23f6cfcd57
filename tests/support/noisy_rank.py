"""A spawned child that prints like an SGLang rank on a CPU machine: SGLang's usual notices (the lines
real 0.5.23 ranks printed in preflight on this project's CPU VM) mixed with lines that must reach the
user, on stdout and stderr, unbuffered and buffered."""

from __future__ import annotations

import os
import sys

REAL_NOTICES = (
    "Setup Custom allreduce failed with . To silence this warning, specify --disable-custom-all-reduce explicitly.",
    "SGLANG_CPU_OMP_THREADS_BIND is set for explicit control of CPU cores for each TP rank.Please beware that in "
    "this case the available memory amounts of the ranks cannot be determined in prior.You need to set proper "
    "--max-total-tokens to avoid the out-of-memory error.",
    "The total number of ranks (2) is larger than numa node number (1), in this case the available memory amount "
    "of each rank cannot be determined in prior. Please set proper `--max-total-tokens` to avoid the "
    "out-of-memory error.",
    "init_cpu_threads_env and shared memory based AllReduce is disabled, only intel amx backend and arm64 are "
    "supported",
    "Cuda graph is disabled because of using torch native attention backend",
    "/venv/lib/python3.11/site-packages/sglang/srt/layers/quantization/awq/awq.py:53: UserWarning: Only CUDA, "
    "HIP and XPU support AWQ currently.",
    '  warnings.warn(f"Only CUDA, HIP and XPU support AWQ currently.")',
    "/venv/lib/python3.11/site-packages/sglang/srt/layers/quantization/gguf.py:76: UserWarning: Only CUDA, MUSA "
    "and NPU support GGUF quantization currently.",
)


def main(lines: list[tuple[str, str]]) -> None:
    """Print each (stream, text) in order: stream is "out" or "err"."""
    for stream, text in lines:
        print(text, file=sys.stdout if stream == "out" else sys.stderr)
    sys.stdout.flush()


def main_bytes(lines: list[tuple[int, bytes]]) -> None:
    """Write each (fd, raw bytes) as is: text no decoder has seen, straight to the file descriptor."""
    for fd, data in lines:
        os.write(fd, data)


def leave_a_grandchild(flag: str, seconds: int) -> None:
    """Start a process that inherits this one's stdout and outlives it by ``seconds``, then return."""
    import subprocess

    code = f"import time; time.sleep({seconds}); open({flag!r}, 'w').close()"
    grandchild = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    with open(flag + ".pid", "w") as f:
        f.write(str(grandchild.pid))
    print("grandchild started", flush=True)
