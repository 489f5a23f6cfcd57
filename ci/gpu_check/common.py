"""What every part of gpu-check shares: paths, constants, the options, one step's record, and the
small pure helpers (environment scrubbing, NCCL debug settings, reading a child's output)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent.parent
SUPPORT_DIR = REPO_ROOT / "tests" / "support"

DEFAULT_PROFILE = "pcie-8gpu"
DEBUG_SUBSYS = "INIT,ENV,TUNING"
# The budget is 8 minutes end to end; steps get what is left of it.
DEFAULT_BUDGET_S = 470.0

RESULT_MARK = "GPU_CHECK_RESULT "
FACTS_MARK = "GPU_CHECK_FACTS "
PLUGIN_DIST = "sglang-eagle-nccl"
# First SGLang release whose EAGLE path runs on CPU with the stand-ins (tests/support/sglang_cpu_run.py).
FIRST_CPU_EAGLE = (0, 5, 23)


class Progress:
    """Prints one line per event with the time since start: the run is watched live on a device
    whose time is counted, so every step says when it started and how long it took."""

    def __init__(self, stream: Any = None) -> None:
        self.start = time.monotonic()
        self.stream = stream or sys.stdout

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __call__(self, message: str) -> None:
        print(f"[gpu-check {self.elapsed():6.1f}s] {message}", file=self.stream, flush=True)


@dataclasses.dataclass
class Options:
    mode: str  # "gpu" or "cpu-rehearsal"
    python: str | None
    wheels: Path | None
    out: Path
    work: Path
    profile: str
    nccl_env: list[str]
    skip_engine: bool
    check_only: bool
    nccl_lib: Path | None
    budget_s: float
    # Step (d) needs a profile with [[tuner.rules]] so that both native plugins are set.
    native_profile: str = "pcie-8gpu-eagle"

    @property
    def rehearsal(self) -> bool:
        return self.mode == "cpu-rehearsal"


@dataclasses.dataclass
class Step:
    """One step of the check and everything the report says about it."""

    name: str
    title: str
    status: str = "pending"  # ok / fail / missing / skipped
    wall_s: float = 0.0
    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def finish(self, started: float) -> Step:
        self.wall_s = round(time.monotonic() - started, 1)
        if self.status == "pending":
            self.status = "fail" if self.problems else "ok"
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_out_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env["OUT"]) if env.get("OUT") else Path.cwd() / "gpu-check-report"


def release(version: str | None) -> tuple[int, ...]:
    """(0, 5, 23) for "0.5.23", "0.5.23.post1", "0.5.24rc1", "0.5.23+local"; () for None."""
    match = re.match(r"\d+(?:\.\d+)*", version or "")
    return tuple(int(p) for p in match.group(0).split(".")) if match else ()


def scrubbed_environment(base: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The driver's environment without NCCL_*, TORCH_NCCL_* and the plugin's own variables.

    The check must compare NCCL's reports with the profile alone: a variable inherited from the
    shell or the machine image would show up as a disagreement nobody asked for. The removed names
    go into the report."""
    env = dict(os.environ if base is None else base)
    removed = sorted(k for k in env if k.startswith(("NCCL_", "TORCH_NCCL_", "SGLANG_EAGLE_NCCL")))
    for key in removed:
        del env[key]
    env["PYTHONUNBUFFERED"] = "1"
    return env, removed


def debug_env(nccl_dir: Path) -> list[str]:
    """The NCCL debug settings added to the profile: one file per host and pid (NCCL opens the file
    with mode "w", so a shared name would let processes truncate each other's output)."""
    return [
        "NCCL_DEBUG=INFO",
        f"NCCL_DEBUG_SUBSYS={DEBUG_SUBSYS}",
        f"NCCL_DEBUG_FILE={nccl_dir}/nccl.%h.%p.log",
    ]


def last_json_line(text: str, mark: str = "") -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if mark:
            if line.startswith(mark):
                return json.loads(line[len(mark):])
        elif line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def last_exception_line(text: str) -> str | None:
    """The final ``SomeError: message`` line of the last traceback in ``text``."""
    found = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            for follow in lines[i + 1:]:
                if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*", follow):
                    found = follow.strip()
                    break
    return found
