"""Group-shaped objects for the all-reduce describer's unit tests: the attributes SGLang's
GroupCoordinator and its communicators store in a GPU process, built without SGLang or a GPU."""

from __future__ import annotations

from types import SimpleNamespace

MiB = 1024 * 1024


class Stored:
    """An object whose attributes are stored values, as on SGLang's communicators."""

    def __init__(self, **attrs) -> None:
        self.__dict__.update(attrs)


class CustomAllreduce(Stored):
    """Named like SGLang's v1 class (the describer tells v1 from v2 by the class name)."""


class CustomAllReduceV2(Stored):
    """Named like SGLang's v2 class."""


class Device(Stored):
    def __str__(self) -> str:
        return f"{self.type}:0"


def group(**attrs) -> Stored:
    """A two-rank tp group on a CUDA device; ``attrs`` add or replace attributes."""
    base = {
        "unique_name": "tp:3",
        "world_size": 2,
        "rank": 1,
        "rank_in_group": 1,
        "device": Device(type="cuda"),
    }
    base.update(attrs)
    return Stored(**base)


def full_gpu_group(**over) -> Stored:
    """What SGLang 0.5.x builds for tp on two NVLink GPUs: custom all-reduce on, PyNccl available."""
    attrs = dict(
        ca_comm=CustomAllreduce(disabled=False, max_size=8 * MiB, full_nvlink=True),
        use_custom_allreduce=True,
        pcie_ipc_comm=None,
        pymscclpp_comm=None,
        use_mscclpp=False,
        torch_symm_mem_comm=None,
        use_torch_symm_mem_all_reduce=False,
        pynccl_comm=Stored(available=True),
        use_pynccl=True,
        is_symmetric_memory_enabled=lambda: False,
        _fi_workspace_hint=None,
        device_group=object(),
    )
    attrs.update(over)
    return group(**attrs)


def tuned(num_mc_blocks=None, override_algo=None) -> CustomAllReduceV2:
    """A CustomAllReduceV2 with SGLang 0.5.20+'s tuned graph / eager tables."""
    graph = SimpleNamespace(
        one_shot_push_threshold=64 * 1024,
        two_shot_push_threshold=4 * MiB,
        one_shot_pull_threshold=32 * 1024,
        two_shot_pull_threshold=2 * MiB,
        mc=SimpleNamespace(max_bytes=32 * MiB),
    )
    eager = SimpleNamespace(one_shot_push_threshold=16 * 1024, two_shot_push_threshold=MiB, mc=None)
    config = SimpleNamespace(graph=graph, eager=eager, num_mc_blocks=num_mc_blocks)
    return CustomAllReduceV2(disabled=False, max_size=16 * MiB, config=config, override_algo=override_algo)
