"""What a test driver of the tests/ray tier gives Ray and SGLang: the job's runtime env, the driver's own
environment, and the group probe's records."""

from __future__ import annotations

from pathlib import Path

from support import sglang_cpu_run as run
from support.jsonl import read_jsonl
from support.ray_cluster import clean_environ

PROBE_PATH = Path(__file__).resolve().parents[1] / "probes" / "ray_probe"


def job_env_vars(probe_dir: Path) -> dict[str, str]:
    """The job's runtime_env env_vars: what SGLang on CPU needs in every actor (stand-ins gate included)
    and the group probe, shipped the way a user ships any module to Ray workers (PYTHONPATH)."""
    probe_dir.mkdir(parents=True, exist_ok=True)
    return {
        **run.env_for(2),
        "PYTHONPATH": str(PROBE_PATH),
        "SEN_TEST_GROUP_PROBE_DIR": str(probe_dir),
        "PYTHONWARNINGS": "ignore",
    }


def driver_env(**extra: str) -> dict[str, str]:
    """The driver's own environment: this one without plugin, NCCL or Ray variables, plus SGLang's CPU settings."""
    return run.full_env(2, clean_environ(), PYTHONWARNINGS="ignore", **extra)


def probe_records(probe_dir: Path) -> dict[int, list[dict]]:
    """pid -> the group probe's records of that process."""
    out: dict[int, list[dict]] = {}
    for path in sorted(probe_dir.glob("probe-*.jsonl")):
        for record in read_jsonl(path):
            out.setdefault(record["pid"], []).append(record)
    return out
