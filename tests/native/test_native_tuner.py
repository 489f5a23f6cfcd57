"""Every exported ncclTunerPlugin_v2..v6, called through its struct's function pointers the way NCCL
calls them (init, getCollInfo, destroy/finalize), on synthetic cost tables."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle_nccl.knowledge.nccl.tuner_rules import (
    ALGORITHM_IDS,
    COLLECTIVE_IDS,
    PROTOCOL_IDS,
    TunerRule,
    first_match,
)
from sglang_eagle_nccl.native.library import TABLE_ALGOS, TABLE_PROTOS, TUNER_ABIS

TABLE_ABIS = [abi for abi in TUNER_ABIS if abi >= 3]
ALLREDUCE = COLLECTIVE_IDS["AllReduce"]
CELLS = TABLE_ALGOS * TABLE_PROTOS


def cell(algorithm: str, protocol: str) -> int:
    return ALGORITHM_IDS[algorithm] * TABLE_PROTOS + PROTOCOL_IDS[protocol]


def distinct_table(disabled: tuple[int, ...] = ()) -> list[float]:
    """Each cell a different positive cost (so any change is visible); ``disabled`` cells -1."""
    return [-1.0 if i in disabled else 10.0 + i * 1.5 for i in range(CELLS)]


def packed(cells) -> bytes:
    return struct.pack(f"{len(cells)}f", *cells)


SMALL_LL = TunerRule("AllReduce", 0, 65536, "Ring", "LL")
LARGE_SIMPLE = TunerRule("AllReduce", 65536, None, "Ring", "Simple", channels=16)
TREE_LL128_8 = TunerRule("AllReduce", 0, None, "Tree", "LL128", nranks=(8, 8))


def test_every_abi_is_exported_with_the_plugin_name(lib):
    assert lib.exported_abis()["tuner"] == [2, 3, 4, 5, 6]
    for abi in TUNER_ABIS:
        assert lib.tuner_struct(abi).name == b"sglang-eagle-nccl"
    # v6's getChunkSize is optional; NULL keeps NCCL's chunk size.
    assert not lib.tuner_struct(6).getChunkSize


# --- v2: out-parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nbytes", "expected"),
    [
        (0, ("Ring", "LL", 0)),
        (65535, ("Ring", "LL", 0)),
        (65536, ("Ring", "Simple", 16)),
        (1 << 30, ("Ring", "Simple", 16)),
    ],
)
def test_v2_returns_the_first_matching_rule_through_out_parameters(lib, nbytes, expected):
    lib.configure_tuner([SMALL_LL, LARGE_SIMPLE])
    call = lib.call_tuner(2, ALLREDUCE, nbytes, nranks=8)
    algorithm, protocol, channels = expected
    assert (call.algorithm, call.protocol, call.channels) == (
        ALGORITHM_IDS[algorithm],
        PROTOCOL_IDS[protocol],
        channels,
    )
    assert call.applied and call.table_after is None


def test_v2_without_a_matching_rule_leaves_every_out_parameter_alone(lib):
    lib.configure_tuner([SMALL_LL])
    call = lib.call_tuner(2, COLLECTIVE_IDS["AllGather"], 100, nranks=8, channels=3)
    assert (call.algorithm, call.protocol, call.channels, call.rule_index) == (-1, -1, 3, -1)


def test_v2_never_returns_what_nccl_2_21_cannot_run(lib):
    # NCCL 2.21 takes v2's answer unchecked: CollNet/NVLS only when supported, PAT (2.23+) never.
    lib.configure_tuner(
        [
            TunerRule("AllReduce", 0, 100, "CollNetDirect", "Simple"),
            TunerRule("AllReduce", 100, 200, "NVLS", "Simple"),
            TunerRule("AllGather", 0, None, "PAT", "Simple"),
        ]
    )
    assert lib.call_tuner(2, ALLREDUCE, 50, 8, collnet_support=0).algorithm == -1
    assert lib.call_tuner(2, ALLREDUCE, 50, 8, collnet_support=1).algorithm == ALGORITHM_IDS["CollNetDirect"]
    assert lib.call_tuner(2, ALLREDUCE, 150, 8, nvls_support=0).algorithm == -1
    assert lib.call_tuner(2, ALLREDUCE, 150, 8, nvls_support=1).algorithm == ALGORITHM_IDS["NVLS"]
    pat = lib.call_tuner(2, COLLECTIVE_IDS["AllGather"], 50, 8)
    assert (pat.algorithm, pat.rule_index, pat.applied) == (-1, 2, False)


# --- v3..v6: cost tables ----------------------------------------------------------------------------


@pytest.mark.parametrize("abi", TABLE_ABIS)
@pytest.mark.parametrize(
    ("nbytes", "chosen", "channels"),
    [
        (0, ("Ring", "LL"), 0),
        (65535, ("Ring", "LL"), 0),
        (65536, ("Ring", "Simple"), 16),
        (1 << 40, ("Ring", "Simple"), 16),
    ],
)
def test_table_rule_zeroes_exactly_its_cell_at_the_right_sizes(lib, abi, nbytes, chosen, channels):
    lib.configure_tuner([SMALL_LL, LARGE_SIMPLE])
    table = distinct_table()
    call = lib.call_tuner(abi, ALLREDUCE, nbytes, nranks=4, table=table)
    expected = list(table)
    expected[cell(*chosen)] = 0.0
    assert packed(call.table_after) == packed(expected)
    assert call.channels == channels and call.applied


@pytest.mark.parametrize("abi", TABLE_ABIS)
def test_table_without_matching_rule_is_unchanged_byte_for_byte(lib, abi):
    lib.configure_tuner([SMALL_LL, TunerRule("AllGather", 0, None, "Ring", "LL")])
    table = distinct_table(disabled=(0, 5, 20))
    call = lib.call_tuner(abi, COLLECTIVE_IDS["ReduceScatter"], 1000, nranks=4, table=table, channels=0)
    assert packed(call.table_after) == packed(table)
    assert (call.rule_index, call.channels) == (-1, 0)


@pytest.mark.parametrize("abi", TABLE_ABIS)
def test_table_never_reenables_a_minus_one_cell(lib, abi):
    # The first matching rule chose a combination NCCL disabled: table (and nChannels) stay as NCCL made them.
    lib.configure_tuner([LARGE_SIMPLE, TunerRule("AllReduce", 0, None, "Ring", "LL")])
    table = distinct_table(disabled=(cell("Ring", "Simple"),))
    call = lib.call_tuner(abi, ALLREDUCE, 1 << 20, nranks=4, table=table)
    assert packed(call.table_after) == packed(table)
    assert (call.rule_index, call.applied, call.channels) == (0, False, 0)


@pytest.mark.parametrize("abi", TABLE_ABIS)
def test_table_first_match_wins_over_later_rules(lib, abi):
    lib.configure_tuner([TunerRule("AllReduce", 0, 1000, "Tree", "LL"), SMALL_LL])
    call = lib.call_tuner(abi, ALLREDUCE, 10, nranks=4, table=distinct_table())
    assert call.rule_index == 0 and (call.algorithm, call.protocol) == (
        ALGORITHM_IDS["Tree"],
        PROTOCOL_IDS["LL"],
    )
    call = lib.call_tuner(abi, ALLREDUCE, 1000, nranks=4, table=distinct_table())
    assert call.rule_index == 1 and (call.algorithm, call.protocol) == (
        ALGORITHM_IDS["Ring"],
        PROTOCOL_IDS["LL"],
    )


@pytest.mark.parametrize("abi", TUNER_ABIS)
def test_size_range_rules_match_nranks_and_nnodes_inclusively(lib, abi):
    lib.configure_tuner([TREE_LL128_8, TunerRule("AllReduce", 0, None, "Ring", "LL", nnodes=(2, None))])
    assert lib.call_tuner(abi, ALLREDUCE, 10, nranks=8, nnodes=1).rule_index == 0
    assert lib.call_tuner(abi, ALLREDUCE, 10, nranks=7, nnodes=1).rule_index == -1
    assert lib.call_tuner(abi, ALLREDUCE, 10, nranks=9, nnodes=1).rule_index == -1
    assert lib.call_tuner(abi, ALLREDUCE, 10, nranks=16, nnodes=2).rule_index == 1
    assert lib.call_tuner(abi, ALLREDUCE, 10, nranks=16, nnodes=64).rule_index == 1


@pytest.mark.parametrize("abi", TUNER_ABIS)
def test_group_rules_apply_only_to_communicators_initialised_with_the_label(lib, abi):
    tp_rule = TunerRule("AllReduce", 0, None, "Ring", "LL", group="tp")
    lib.configure_tuner([tp_rule])
    # Label selected during init: the communicator keeps it even after the selection is cleared.
    lib.select_group("tp")
    plugin = lib.tuner_struct(abi)
    import ctypes

    ctx = ctypes.c_void_p()
    if abi >= 5:
        assert plugin.init(ctypes.byref(ctx), 0x1234, 8, 1, None, None, None) == 0
    else:
        assert plugin.init(8, 1, None, ctypes.byref(ctx)) == 0
    lib.select_group(None)
    table = (ctypes.c_float * CELLS)(*distinct_table())
    nch = ctypes.c_int(0)
    if abi == 2:
        a, p = ctypes.c_int(-1), ctypes.c_int(-1)
        plugin.getCollInfo(ctx, ALLREDUCE, 10, 1, 1, 1, ctypes.byref(a), ctypes.byref(p), ctypes.byref(nch))
        assert (a.value, p.value) == (ALGORITHM_IDS["Ring"], PROTOCOL_IDS["LL"])
    elif abi == 3:
        plugin.getCollInfo(
            ctx,
            ALLREDUCE,
            10,
            1,
            ctypes.cast(table, ctypes.c_void_p),
            TABLE_ALGOS,
            TABLE_PROTOS,
            ctypes.byref(nch),
        )
        assert table[cell("Ring", "LL")] == 0.0
    else:
        plugin.getCollInfo(
            ctx,
            ALLREDUCE,
            10,
            1,
            ctypes.cast(table, ctypes.c_void_p),
            TABLE_ALGOS,
            TABLE_PROTOS,
            0,
            ctypes.byref(nch),
        )
        assert table[cell("Ring", "LL")] == 0.0
    (plugin.destroy if abi <= 4 else plugin.finalize)(ctx)
    # A communicator initialised without the label (torch's lazy ones), or with another, is not matched.
    assert lib.call_tuner(abi, ALLREDUCE, 10, nranks=8).rule_index == -1
    lib.select_group("pp")
    assert lib.call_tuner(abi, ALLREDUCE, 10, nranks=8).rule_index == -1
    # ... and selecting the label after init changes nothing for an existing communicator: covered above.


@pytest.mark.parametrize("abi", [3])
def test_v3_on_nccl_2_22_tables_without_pat_ignores_a_pat_rule(lib, abi):
    # NCCL 2.22 passes numAlgo = 6 (no PAT): the PAT rule matches but must not write outside the table.
    lib.configure_tuner([TunerRule("AllGather", 0, None, "PAT", "Simple")])
    table = [5.0] * (6 * TABLE_PROTOS)
    call = lib.call_tuner(abi, COLLECTIVE_IDS["AllGather"], 10, 4, table=table, num_algo=6)
    assert packed(call.table_after) == packed(table) and call.rule_index == 0 and not call.applied


def test_query_reports_rule_and_restores_the_selected_label(lib):
    lib.configure_tuner([SMALL_LL, TunerRule("AllReduce", 0, None, "Ring", "Simple", group="tp", channels=8)])
    lib.select_group("attn_tp")
    for abi in TUNER_ABIS:
        small = lib.query_tuner(abi, "allreduce", 14336, 8)
        assert (small.rule, small.algorithm, small.protocol, small.channels) == (0, "Ring", "LL", None)
        big = lib.query_tuner(abi, "AllReduce", 1 << 24, 8, group="tp")
        assert (big.rule, big.protocol, big.channels) == (1, "Simple", 8)
        assert lib.query_tuner(abi, "AllReduce", 1 << 24, 8).describe() == "no rule: NCCL decides"
    assert lib.selected_group() == "attn_tp"


# --- the C tuner agrees with the Python model of the rules -----------------------------------------------

_rule = st.builds(
    lambda coll, lo, span, algo, proto, ranks, group, channels: TunerRule(
        coll,
        lo,
        None if span is None else lo + span,
        algo,
        proto,
        nranks=ranks,
        group=group,
        channels=channels,
    ),
    st.sampled_from(["AllReduce", "AllGather"]),
    st.integers(0, 1 << 20),
    st.one_of(st.none(), st.integers(1, 1 << 20)),
    st.sampled_from(list(ALGORITHM_IDS)),
    st.sampled_from(list(PROTOCOL_IDS)),
    st.one_of(st.none(), st.tuples(st.integers(1, 8), st.integers(8, 16))),
    st.sampled_from([None, "tp"]),
    st.one_of(st.none(), st.integers(1, 64)),
)


@settings(max_examples=150, deadline=None)
@given(
    rules=st.lists(_rule, max_size=5),
    abi=st.sampled_from(TABLE_ABIS),
    coll=st.sampled_from(["AllReduce", "AllGather"]),
    nbytes=st.integers(0, 1 << 21),
    nranks=st.integers(1, 16),
    group=st.sampled_from([None, "tp"]),
    disabled=st.sets(st.integers(0, CELLS - 1), max_size=6),
)
def test_c_tuner_matches_the_rule_model(native_lib, rules, abi, coll, nbytes, nranks, group, disabled):
    native_lib.configure_tuner(rules)
    native_lib.select_group(group)
    try:
        table = distinct_table(tuple(disabled))
        call = native_lib.call_tuner(abi, COLLECTIVE_IDS[coll], nbytes, nranks, table=table)
    finally:
        native_lib.select_group(None)
        native_lib.configure_tuner([])
    index = first_match(rules, coll, nbytes, nranks, 1, group)
    expected = list(table)
    channels = 0
    if index is not None:
        rule = rules[index]
        c = cell(rule.algorithm, rule.protocol)
        if expected[c] != -1.0:
            expected[c] = 0.0
            channels = rule.channels or 0
    assert call.rule_index == (-1 if index is None else index)
    assert packed(call.table_after) == packed(expected)
    assert call.channels == channels
