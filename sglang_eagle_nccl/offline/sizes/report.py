"""The all-reduce message bytes of each phase of a speculative server (:func:`size_report`), and the
tuner rule each matches (:func:`add_tuner_rules`).

Tensor parallelism splits weights, not activations: after the attention block and after the MLP
of every decoder layer each TP rank all-reduces the full hidden vector of every token in the
forward pass. One all-reduce therefore carries::

    bytes = tokens x hidden_size x bytes per element

whatever the TP size. The token count is what differs between the phases of a speculative
server: a decode step has one token per request, an EAGLE draft step ``topk`` per request, an
EAGLE verify step ``num_draft_tokens`` per request, a prefill chunk up to ``chunked_prefill_size``.
For a 7168-wide bf16 model that is 14 KiB per token: decode and verify are KiB to a few MiB,
prefill chunks tens of MiB, which is why one global NCCL protocol choice fits neither well.

Each phase's path is :func:`~sglang_eagle_nccl.offline.sizes.paths.predict_path`'s. Pure functions
(the config file is read once); errors are :class:`~sglang_eagle_nccl.offline.sizes.shape.SizesError`
with one finding per problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.findings import Finding, error
from sglang_eagle_nccl.knowledge.sglang.allreduce_paths import fmt_bytes
from sglang_eagle_nccl.offline.sizes.paths import FLAGS, normalize_flags, parse_version, predict_path
from sglang_eagle_nccl.offline.sizes.shape import MAX_COUNT, SizesError, model_shape, shown_value

__all__ = [
    "FORMULA",
    "add_tuner_rules",
    "size_report",
]

FORMULA = (
    "bytes per all-reduce = tokens x hidden_size x bytes per element. Tensor parallelism splits the "
    "weights, not the activations, so every TP rank all-reduces the full hidden vector of each token "
    "and the size does not depend on the TP size. A dense decoder layer all-reduces twice per forward "
    "(after attention, after the MLP); the vocab-parallel embedding adds one."
)


def _positive(name: str, value: Any, fix: str, problems: list[Finding], *, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        problems.append(error(name, shown_value(value), f"must be a positive integer up to {MAX_COUNT}", fix))
        return None
    return value


def size_report(
    config: Mapping[str, Any] | str | Path,
    *,
    batch_size: int,
    tp_size: int,
    num_draft_tokens: int | None = None,
    eagle_topk: int | None = None,
    num_steps: int | None = None,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    dtype: str = "auto",
    sglang_version: str | None = None,
    flags: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """All-reduce message bytes of one decode step, one EAGLE draft step, one EAGLE verify step and
    one prefill chunk, each with the formula and (when ``sglang_version`` is given) the predicted
    path (:func:`predict_path`). Arguments mirror SGLang's: ``--speculative-num-draft-tokens``,
    ``--speculative-eagle-topk``, ``--speculative-num-steps``, ``--chunked-prefill-size``,
    ``--cuda-graph-max-bs``, ``--dtype``, TP size; ``flags`` as in :func:`predict_path` (its
    ``cuda_graph``, ``piecewise_cuda_graph`` and ``dtype`` are set per phase here)."""
    problems: list[Finding] = []
    bs = _positive("--batch-size", batch_size, "pass the number of running requests, e.g. --batch-size 8", problems, allow_none=False)
    tp = _positive("--tp-size", tp_size, "pass the tensor-parallel size, e.g. --tp-size 8", problems, allow_none=False)
    ndt = _positive("--speculative-num-draft-tokens", num_draft_tokens, "pass SGLang's --speculative-num-draft-tokens, e.g. 4", problems)
    topk = _positive("--speculative-eagle-topk", eagle_topk, "pass SGLang's --speculative-eagle-topk, e.g. 1", problems)
    steps = _positive("--speculative-num-steps", num_steps, "pass SGLang's --speculative-num-steps, e.g. 3", problems)
    max_bs = _positive("--cuda-graph-max-bs", cuda_graph_max_bs, "pass SGLang's --cuda-graph-max-bs", problems)
    chunk = chunked_prefill_size
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk == 0 or not -1 <= chunk <= MAX_COUNT):
        problems.append(error("--chunked-prefill-size", shown_value(chunk), "must be a positive integer, or -1 (chunking off)", "pass SGLang's --chunked-prefill-size, e.g. 8192"))
    # The tensor's dtype is the model's (set per phase below); cuda_graph / piecewise_cuda_graph say
    # how decode-like steps and prefill run and are turned into a per-phase mode.
    user_flags = {k: v for k, v in (flags or {}).items() if str(k).lstrip("-").replace("-", "_").lower() != "dtype"}
    f = None
    try:
        f = normalize_flags(user_flags)
    except SizesError as exc:
        problems.extend(exc.findings)
    if sglang_version is not None:
        try:
            parse_version(sglang_version)
        except SizesError as exc:
            problems.extend(exc.findings)
    shape = None
    try:
        shape = model_shape(config, dtype)
    except SizesError as exc:
        problems.extend(exc.findings)
    if problems or shape is None or f is None or bs is None or tp is None:
        raise SizesError(problems)

    elem, hidden = shape.element_size, shape.hidden_size
    per_token = hidden * elem
    notes = list(shape.notes)
    graph_ok = f["cuda_graph"] and not (max_bs is not None and bs > max_bs)
    if f["cuda_graph"] and not graph_ok:
        notes.append(f"batch {bs} > --cuda-graph-max-bs {max_bs}: decode / draft / verify run eagerly")
    spec = ndt is not None or topk is not None

    phases: list[dict[str, Any]] = []

    def add(phase: str, label: str, tokens: int, tokens_formula: str, mode: str) -> None:
        nbytes = tokens * per_token
        phases.append({
            "phase": phase, "label": label, "tokens": tokens, "tokens_formula": tokens_formula,
            "bytes": nbytes, "formula": f"{tokens} tokens ({tokens_formula}) x {hidden} hidden x {elem} bytes ({shape.dtype}) = {nbytes}",
            "mode": mode, "path": None,
        })

    step_mode = "cuda_graph" if graph_ok else "eager"
    add("decode", "decode step" + (" (without speculation)" if spec else ""), bs, f"batch {bs} x 1", step_mode)
    if topk is not None:
        per = f" per draft step, {steps} steps" if steps else " per draft step"
        add("eagle_draft", "EAGLE draft step" + (f" (x{steps})" if steps else ""), bs * topk, f"batch {bs} x topk {topk}{per}", step_mode)
    if ndt is not None:
        add("eagle_verify", "EAGLE verify step", bs * ndt, f"batch {bs} x num_draft_tokens {ndt}", step_mode)
        notes.append("the EAGLE draft-extend step after verify is captured at the verify width (batch x num_draft_tokens)")
    if chunk is not None and chunk > 0:
        piecewise = f["piecewise_cuda_graph"] or f["enable_piecewise_cuda_graph"]
        add("prefill_chunk", "prefill chunk", chunk, f"--chunked-prefill-size {chunk}", "piecewise_cuda_graph" if piecewise else "eager")
    elif chunk == -1:
        notes.append("--chunked-prefill-size -1: chunking is off, a prefill all-reduce carries the whole prompt (prompt tokens x hidden x element size)")
    else:
        notes.append("no --chunked-prefill-size given: SGLang picks one from GPU memory (e.g. 2048-8192; arg_groups/memory_hook.py 0.5.23:97-153), pass it to see the prefill size")

    pcie_bound = f["pcie_ipc_max_bytes"]
    if pcie_bound is None and max_bs is not None and f["enable_pcie_ipc_allreduce"]:
        # pcie_ipc_ar.py 0.5.23:136-165, 246-275; base_runner.py 0.5.23:350-380: the workspace holds the widest
        # decode reduction, largest captured batch x draft tokens per request rows of hidden bf16.
        rows = max_bs * (ndt if ndt else 1)
        pcie_bound = rows * hidden * 2
        notes.append(
            f"PCIe IPC bound taken as --cuda-graph-max-bs {max_bs} x {ndt or 1} tokens x {hidden} hidden x 2 bytes = "
            f"{fmt_bytes(pcie_bound)} (SGLang clamps the captured batch to its request pool)"
        )
    if sglang_version is not None:
        for ph in phases:
            phase_flags = {k: v for k, v in f.items() if v != FLAGS[k][1]}
            phase_flags["cuda_graph"] = ph["mode"] == "cuda_graph"
            phase_flags["piecewise_cuda_graph"] = ph["mode"] == "piecewise_cuda_graph"
            phase_flags["dtype"] = shape.dtype
            if pcie_bound is not None:
                phase_flags["pcie_ipc_max_bytes"] = pcie_bound
            ph["path"] = predict_path(sglang_version, ph["bytes"], tp, phase_flags)
    else:
        notes.append("no SGLang version given: paths not predicted")

    per_forward = 2 * shape.num_hidden_layers + 1 if shape.num_hidden_layers else None
    return {
        "model": shape.to_dict(),
        "tp_size": tp,
        "batch_size": bs,
        "speculative": {"num_draft_tokens": ndt, "eagle_topk": topk, "num_steps": steps},
        "chunked_prefill_size": chunk,
        "bytes_per_token": per_token,
        "formula": FORMULA,
        "all_reduces_per_forward": per_forward,
        "phases": phases,
        "sglang_version": sglang_version,
        "notes": notes,
    }


def add_tuner_rules(report: dict[str, Any], profile: Any, *, tp_size: int, nnodes: int = 1) -> None:
    """Each phase's ``tuner``: the first of ``profile``'s rules its all-reduce matches on the tp group, or None.

    The answer of :func:`~sglang_eagle_nccl.knowledge.nccl.tuner_rules.first_match`, the plugin's model of
    its C tuner (tests/native checks the library against it on generated rules and calls).
    """
    from sglang_eagle_nccl.knowledge.nccl.tuner_rules import first_match, rule_from_dict, rule_label

    rules = [rule_from_dict(r, f"profile {profile.name}") for r in profile.tuner_rules]
    report["tuner_profile"] = profile.name
    for phase in report["phases"]:
        index = first_match(rules, "AllReduce", phase["bytes"], tp_size, nnodes, "tp") if rules else None
        phase["tuner"] = None if index is None else {
            "rule": rule_label(index), "algorithm": rules[index].algorithm, "protocol": rules[index].protocol,
            "channels": rules[index].channels,
        }
