"""The describer's records in full (issue 19): whole entries, the exact key sets the audit reads,
the helpers that read stored values, and the audit lines. Complements
test_allreduce_path_decisions.py, which asserts each decision; here every field of what a GPU
process would record is pinned, so a field that changes or disappears fails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pytest

from sglang_eagle_nccl.inproc.evidence import allreduce_readers as rd
from sglang_eagle_nccl.knowledge.sglang import allreduce_paths as ap
from support.allreduce_groups import CustomAllreduce, Device, Stored, full_gpu_group, group, tuned

MiB = 1024 * 1024
KEYS = {
    "group",
    "unique_name",
    "world_size",
    "rank",
    "rank_in_group",
    "device",
    "device_group_backend",
    "device_group_is_nccl",
    "sglang_version",
    "implementations",
    "order",
    "order_source",
    "order_note",
    "takes_everything",
    "summary",
    "error",
}
ENTRY_KEYS = {
    "path",
    "title",
    "nccl",
    "requested",
    "present",
    "class",
    "enabled",
    "why_not",
    "thresholds",
    "carries",
}


def describe(g, version="0.5.23"):
    return rd.describe_group(g, sglang_version=version)


def test_the_record_has_exactly_the_keys_the_audit_reads():
    for obj in (object(), full_gpu_group(), group(world_size=1)):
        d = describe(obj)
        assert set(d) == KEYS
        for path, e in d["implementations"].items():
            assert set(e) == ENTRY_KEYS and e["path"] == path and e["title"] == ap.path_info(path).title
            assert e["nccl"] == ap.path_info(path).nccl or path == "torch_pg"
        for step in d["order"]:
            assert set(step) == {"path", "title", "implementation", "active", "when", "unless"}


def test_a_whole_custom_allreduce_entry():
    ca = CustomAllreduce(
        disabled=False,
        max_size=8 * MiB,
        max_pull_size=MiB,
        max_push_size=2 * MiB,
        world_size=2,
        full_nvlink=True,
        config=None,
    )
    e = describe(group(ca_comm=ca, use_custom_allreduce=True), "0.5.10")["implementations"][
        "custom_allreduce"
    ]
    assert e == {
        "path": "custom_allreduce",
        "title": ap.path_info("custom_allreduce").title,
        "nccl": False,
        "requested": True,
        "present": True,
        "class": "CustomAllreduce",
        "enabled": True,
        "why_not": None,
        "thresholds": {
            "max_size": 8 * MiB,
            "max_pull_size": MiB,
            "max_push_size": 2 * MiB,
            "world_size": 2,
            "full_nvlink": True,
        },
        "carries": "sizes <= 8388608 bytes (8 MiB), multiples of 16 bytes, eager and CUDA graph",
    }


def test_a_v1_object_with_a_config_reads_as_v2():
    config = Stored(graph=None, eager=None)
    e = describe(group(ca_comm=CustomAllreduce(disabled=False, max_size=MiB, config=config)))[
        "implementations"
    ]
    assert e["custom_allreduce"]["thresholds"]["config"] == repr(config)
    assert (
        e["custom_allreduce"]["carries"]
        == "sizes <= 1048576 bytes (1 MiB), multiples of 16 bytes, eager and CUDA graph"
    )


def test_whole_entries_of_the_other_paths():
    d = describe(
        full_gpu_group(
            pcie_ipc_comm=Stored(disabled=False, max_numel=1, _world_size=4),
            pymscclpp_comm=Stored(available=True),
            use_mscclpp=True,
            torch_symm_mem_comm=Stored(disabled=False, max_size=MiB),
            qr_comm=Stored(disabled=False, qr_max_size=MiB),
            _fi_workspace_hint="tp",
        )
    )
    impls = d["implementations"]
    assert impls["pcie_ipc"]["class"] == "Stored" and impls["pcie_ipc"]["present"] is True
    assert impls["pcie_ipc"]["thresholds"] == {"max_numel": 1, "world_size": 4, "dtype": "bfloat16"}
    assert impls["pcie_ipc"]["carries"].startswith("bfloat16 tensors of at most 1 elements (2 bytes)")
    assert impls["mscclpp"]["present"] is True and impls["mscclpp"]["class"] == "Stored"
    assert impls["torch_symm_mem"]["present"] is True and impls["torch_symm_mem"]["requested"] is False
    assert impls["quick_allreduce"]["present"] is True and impls["quick_allreduce"]["enabled"] is True
    assert impls["flashinfer_allreduce"]["carries"].startswith("2-D contiguous tensors")
    assert impls["torch_pg"]["present"] is True and impls["torch_pg"]["class"] == "object"
    assert d["summary"].startswith("outside NCCL: FlashInfer") or d["summary"].startswith(
        "outside NCCL: " + impls["flashinfer_allreduce"]["title"]
    )
    titles = [
        impls[p]["title"]
        for p in (
            "flashinfer_allreduce",
            "custom_allreduce",
            "pcie_ipc",
            "quick_allreduce",
            "mscclpp",
            "torch_symm_mem",
        )
    ]
    head = d["summary"].split("; the rest reaches NCCL:")[0]
    positions = [head.index(t + " (") for t in titles]
    assert positions == sorted(positions)  # each bypass named, in SGLang's own order


def test_flags_of_older_releases_are_read():
    e = describe(group(torch_symm_mem_comm=None, use_torch_symm_mem=False))["implementations"][
        "torch_symm_mem"
    ]
    assert e["requested"] is False
    assert e["why_not"] == (
        "not requested for this group (use_torch_symm_mem=False): --enable-torch-symm-mem not "
        "given, or a group built without it"
    )
    e = describe(group(torch_symm_mem_comm=None))["implementations"]["torch_symm_mem"]
    assert e["requested"] is None and e["why_not"] == "not created (SGLang skipped it)"
    e = describe(group(pymscclpp_comm=None, use_pymscclpp=True, world_size=1))["implementations"]["mscclpp"]
    assert e["why_not"] == "one rank: SGLang creates no communicator" and e["requested"] is True
    e = describe(group(pynccl_comm=None, world_size=1))["implementations"]["pynccl"]
    assert e["why_not"] == "one rank: SGLang creates no communicator"
    e = describe(group(torch_symm_mem_comm=None, world_size=1))["implementations"]["torch_symm_mem"]
    assert e["why_not"] == "one rank: SGLang creates no communicator"


def test_other_accelerators_each_counted():
    for attr in ("hpu_communicator", "xpu_communicator", "npu_communicator"):
        assert describe(group(**{attr: Stored(disabled=False)}))["takes_everything"] == [attr]


def test_a_reader_that_fails_is_named_and_the_rest_is_still_described(monkeypatch):
    def boom(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(rd, "_read_pcie_ipc", boom)
    d = describe(full_gpu_group())
    assert d["error"] == "pcie_ipc: RuntimeError: boom"
    assert "pcie_ipc" not in d["implementations"] and "custom_allreduce" in d["implementations"]
    step = next(s for s in d["order"] if s["path"] == "pcie_ipc")
    assert step["active"] is None  # unknown, not off
    lines = ap.format_paths(d)
    assert any(ln.endswith("?   ") or " ?   " in ln for ln in lines)
    monkeypatch.setattr(rd, "_read_other_accelerators", boom)
    monkeypatch.setattr(rd, "_summary", boom)
    d = describe(full_gpu_group())
    assert d["error"] == (
        "pcie_ipc: RuntimeError: boom; other accelerators: RuntimeError: boom; summary: RuntimeError: boom"
    )
    assert d["takes_everything"] == [] and d["summary"] is None
    monkeypatch.setattr(rd, "dispatch_for", boom)
    assert describe(full_gpu_group())["error"].startswith(
        "pcie_ipc: RuntimeError: boom; other accelerators: "
        "RuntimeError: boom; dispatch order: RuntimeError: boom; SGLang 0.5.23 is older"
    )


def test_a_failure_outside_every_reader_is_reported_not_raised(monkeypatch):
    def boom(*args):
        raise KeyError("k")

    monkeypatch.setattr(rd, "_peek", boom)
    d = describe(full_gpu_group())
    assert d["error"] == "KeyError: 'k'" and set(d) == KEYS


def test_group_name_is_everything_before_the_last_colon():
    assert describe(group(unique_name="moe:ep:7"))["group"] == "moe:ep"
    assert describe(group(unique_name="world"))["group"] == "world"
    assert describe(group(rank_in_group=1, rank=5))["rank_in_group"] == 1


# --- the helpers --------------------------------------------------------------------------------------


class WithClassValues:
    limit = 7
    names = ("a",)

    def method(self):
        return 1

    @property
    def prop(self):
        raise AssertionError("a property must not run")


def test_peek_reads_stored_values_only():
    obj = WithClassValues()
    obj.own = 3
    assert rd._peek(obj, "own") == 3 and rd._peek(obj, "limit") == 7 and rd._peek(obj, "names") == ("a",)
    assert rd._peek(obj, "method", "d") == "d" and rd._peek(obj, "prop", "d") == "d"
    assert rd._peek(obj, "missing", "d") == "d" and rd._peek(None, "x", "d") == "d"
    assert rd._peek(5, "real", "d") == "d"  # a descriptor of int's type: not a stored value
    assert rd._has(obj, "own") and not rd._has(obj, "missing") and not rd._has(obj, "method")


class Pair(NamedTuple):
    a: int
    b: str


@dataclass
class Box:
    inner: object
    n: int = 1


class Level:
    name = "INT4"


def test_plain_makes_stored_values_json_safe():
    assert rd._plain(Pair(1, "x")) == {"a": 1, "b": "x"}
    assert rd._plain(Box(Pair(2, "y"))) == {"inner": {"a": 2, "b": "y"}, "n": 1}
    assert rd._plain([1, (2, 3), {4}]) == [1, [2, 3], [4]]
    assert rd._plain({1: (1,), "k": None}) == {"1": [1], "k": None}
    assert rd._plain(Level()) == "INT4" and rd._plain(True) is True and rd._plain(1.5) == 1.5
    marker = object()
    assert rd._plain(marker) == repr(marker)
    deep = [[[[[["bottom"]]]]]]
    assert rd._plain(deep) == [[[[["['bottom']"]]]]]  # below four levels: the repr
    assert rd._plain([[[["x"]]]]) == [[[["x"]]]]


def test_device_kind():
    assert rd._device_kind(group(device=Device(type="cuda"))) == "cuda"
    assert rd._device_kind(group(device="cpu")) == "cpu"
    assert rd._device_kind(group(device=Stored(type=3))) is not None
    assert rd._device_kind(group(device=None)) is None


@pytest.mark.parametrize(
    "n,text",
    [
        (1024**3, "1073741824 bytes (1 GiB)"),
        (3 * 1024**3 // 2, "1610612736 bytes (1.5 GiB)"),
        (MiB, "1048576 bytes (1 MiB)"),
        (MiB - 1, "1048575 bytes (1024.0 KiB)"),
        (1536, "1536 bytes (1.5 KiB)"),
        (1024, "1024 bytes (1 KiB)"),
        (1023, "1023 bytes"),
        (0, "0 bytes"),
    ],
)
def test_fmt_bytes(n, text):
    assert ap.fmt_bytes(n) == text


def test_at_least_and_version_order():
    from packaging.version import Version

    assert (
        rd._at_least(Version("0.5.20"), "0.5.20") is True
        and rd._at_least(Version("0.5.19"), "0.5.20") is False
    )
    assert rd._at_least(None, "0.5.20") is None
    assert ap.normalize_version(ap.normalize_version("0.5.4.post3")) == Version("0.5.4.post3")


def test_v2_config_from_exactly_0_5_20():
    at = describe(group(ca_comm=tuned()), "0.5.20")["implementations"]["custom_allreduce"]["carries"]
    before = describe(group(ca_comm=tuned()), "0.5.19")["implementations"]["custom_allreduce"]["carries"]
    assert at.startswith("multiples of 16 bytes up to") and before.startswith("sizes <= ")


def test_v2_one_shot_text_needs_both_tables():
    from types import SimpleNamespace

    graph = SimpleNamespace(one_shot_push_threshold=4096, two_shot_push_threshold=MiB)
    eager = SimpleNamespace(two_shot_push_threshold=MiB)
    config = SimpleNamespace(graph=graph, eager=eager, num_mc_blocks=None)
    comm = Stored(disabled=False, max_size=MiB, config=config)
    comm.__class__ = type("CustomAllReduceV2", (Stored,), {})
    text = describe(group(ca_comm=comm))["implementations"]["custom_allreduce"]["carries"]
    assert (
        "one-shot" not in text
        and "up to 1048576 bytes (1 MiB) in CUDA graphs and 1048576 bytes (1 MiB) eager" in text
    )
    empty = SimpleNamespace(graph=SimpleNamespace(), eager=SimpleNamespace(), num_mc_blocks=1)
    comm.config = empty
    assert (
        "up to unknown in CUDA graphs"
        in describe(group(ca_comm=comm))["implementations"]["custom_allreduce"]["carries"]
    )


# --- the audit lines ------------------------------------------------------------------------------------


def test_header_line_names_backend_and_whether_it_is_nccl():
    base = describe(full_gpu_group())
    for is_nccl, word in ((True, "NCCL"), (False, "not NCCL"), (None, "backend unknown")):
        d = {
            **base,
            "device_group_is_nccl": is_nccl,
            "device_group_backend": "gloo" if is_nccl is False else None,
        }
        head = ap.format_paths(d)[0]
        assert head.endswith(f"({word}), SGLang 0.5.23"), head
    assert (
        "device group gloo (not NCCL)"
        in ap.format_paths({**base, "device_group_is_nccl": False, "device_group_backend": "gloo"})[0]
    )
    assert ap.format_paths({**base, "sglang_version": None})[0].endswith("SGLang unknown")


def test_order_lines_show_source_note_state_and_detail():
    d = describe(full_gpu_group(), "9.0.0")
    lines = ap.format_paths(d)
    assert lines[1] == f"  order SGLang tries ({d['order_source']}):"
    assert lines[2] == f"    note: {d['order_note']}"
    width = max(len(s["title"]) for s in d["order"])
    for i, step in enumerate(d["order"], 1):
        line = lines[2 + i]
        impl = d["implementations"][step["implementation"]]
        state = {True: "on ", False: "off"}[step["active"]]
        assert line.startswith(f"    {i:>2}. {step['title']:<{width}}  {state}  "), line
        if step["path"] == "pynccl_symm_mem":
            assert line.endswith("symmetric memory off (--enable-symm-mem not given)")
        elif step["path"] == "pynccl_piecewise":
            assert line.endswith("only inside a piecewise CUDA graph")
        elif step["active"]:
            assert line.endswith(impl["carries"])
        else:
            assert line.endswith(impl["why_not"] or ""), line


def test_unknown_order_lists_each_path_on_or_off():
    d = describe(full_gpu_group(), "not a version")
    lines = ap.format_paths(d)
    listed = [ln for ln in lines if ln.startswith("    - ")]
    assert len(listed) == len(d["implementations"])
    for ln, impl in zip(listed, d["implementations"].values(), strict=True):
        if impl["enabled"]:
            assert ln == f"    - {impl['title']}: on  {impl['carries']}"
        else:
            assert ln == f"    - {impl['title']}: off {impl['why_not'] or ''}"


def test_a_description_that_cannot_be_formatted_names_the_exception():
    assert ap.format_paths({"order": [{"bad": 1}], "world_size": 2})[-1] == (
        "all-reduce paths: cannot format (KeyError: 'title')"
    )
