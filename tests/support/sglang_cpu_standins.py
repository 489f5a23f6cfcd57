"""CPU stand-ins that let a real SGLang import, start and compute on a machine without a GPU.

Test support only. ``ci/sglang_venv.py`` copies this file into the site-packages of each SGLang test
venv together with a ``.pth`` line, so ``activate()`` runs at the start of EVERY interpreter of that venv
-- SGLang's ``multiprocessing`` spawn children included -- when ``SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS=1``
is set (children inherit the environment). Without that variable the venv behaves as a plain install.

What stands in, and why:

``torchvision._meta_registrations``
    The PyPI torchvision wheel is a CUDA build; against CPU torch its import fails in this one module
    (``operator torchvision::nms does not exist``). SGLang imports torchvision from ``configs/``. An
    empty module stands in for it; nothing SGLang runs on CPU uses those meta kernels.

``sgl_kernel`` (only when the real package is not installed)
    SGLang's compiled kernel package; on CPU it supplies ``*_cpu`` ops. Its wheels are CUDA builds.
    This stand-in holds pure-torch implementations, written for these tests from the semantics of
    SGLang's own Triton kernels for the same operations, of the ops an EAGLE / EAGLE-3 CPU run calls:
    ``assign_req_to_token_pool_cpu``, ``assign_extend_cache_locs_cpu``,
    ``assign_draft_cache_locs_contiguous_cpu``, ``build_tree_kernel_efficient_cpu``,
    ``verify_tree_greedy_cpu``, ``fill_bonus_tokens_cpu``, ``fill_accept_out_cache_loc_cpu``,
    ``copy_all_layer_kv_cache_cpu``, and the attention ops ``extend_attention_cpu`` /
    ``decode_attention_cpu`` registered as ``torch.ops.sgl_kernel.*``. Names SGLang imports at module
    level but never calls in these runs (0.5.23: ``build_draft_decode_metadata_cpu``; 0.5.4.post3: ``silu_and_mul``, unguarded on CPU in
    ``layers/moe/moe_runner/deep_gemm.py``; 0.5.4 and
    0.5.10: ``sgl_kernel.kvcacheio.*``, unguarded in ``mem_cache/memory_pool_host.py`` up to 0.5.10,
    behind ``is_cuda()/is_hip()`` by 0.5.17; 0.5.4: the ``sgl_kernel.allreduce`` op namespace) exist
    and raise ``NotImplementedError`` when called. ``torch.ops.sgl_kernel.convert_weight_packed`` is
    deliberately absent, so SGLang's ``cpu_has_amx_support()`` stays False and its AMX GEMM layer
    paths stay off.

CPU platform fact ``has_amx=True`` (SGLang >= 0.5.23, through ``override_platform``)
    EAGLE on CPU needs the ``intel_amx`` attention backend (``torch_native`` has no EAGLE support),
    which SGLang downgrades to ``torch_native`` when the platform reports no AMX. The fact is set
    through SGLang's own platform override the moment ``sglang.srt.runtime_context`` is imported.

``datasets`` (only when the real package is not installed)
    Hugging Face ``datasets``, which SGLang's benchmark package imports at module level
    (``sglang/benchmark/datasets/mmmu.py``: ``from datasets import load_dataset``, 0.5.23); the test venvs
    lack it. The Ray tier imports ``sglang.benchmark.offline_throughput`` to run its Ray engine backend,
    which loads no dataset: ``load_dataset`` exists and raises ``NotImplementedError`` when called.

CPU platform fact: no CUDA device to select (``torch.cuda.set_device``)
    SGLang's Ray scheduler actor calls ``torch.cuda.set_device(get_device().gpu_id)`` unconditionally
    at the start of its event loop (``srt/ray/scheduler_actor.py``, 0.5.10 -> 0.5.23); CPU torch has no
    ``_cuda_setDevice`` and raises. With no CUDA device there is none to select: the stand-in returns
    and calls the real function whenever CUDA is available. Hooked on ``torch.cuda``'s import, not on
    the actor's module: Ray ships a ``@ray.remote`` class by value, so that module is never imported
    in the actor's process.

CPU platform fact: AMX tile support where older SGLang reads it (``torch._C._cpu._is_amx_tile_supported``)
    SGLang 0.4.10 (``srt/utils.py``, ``cpu_has_amx_support``, called at import by ``srt/custom_op.py``) asks
    ``torch._C._cpu._is_amx_tile_supported()``; torch 2.13 keeps that fact in ``torch.cpu`` only. Once
    ``sglang.srt.utils`` is imported the old name answers with torch's own ``torch.cpu`` function (the real
    fact of this CPU). SGLang's AMX paths stay off anyway: ``convert_weight_packed`` is absent (below).

``fast_topk`` in ``sglang.srt.speculative.spec_utils`` / ``eagle_utils`` (SGLang 0.5.4 and older)
    Defined there only under ``is_cuda()/is_hip()`` but imported unconditionally by the EAGLE CUDA-graph
    runner; bound to SGLang's own pure-torch ``sglang.srt.utils.common.fast_topk``.

Never stood in for: SGLang's process launch, ``parallel_state``, ``os.environ``, ``torch.distributed``
(gloo); those stay real, they are what the plugin is tested against. Nor triton: the venvs install the
real wheel, which imports on CPU (only a kernel launch would fail). A triton stub is not enough, because
at TP > 1 SGLang ``torch.compile``s its vocab-parallel embedding and torch's inductor then probes triton
deeply (``triton.backends``, ``triton_key()``, ...).

Tracing: with ``SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS_TRACE=1`` each process prints one stderr line
(``[cpu-standins] pid=... called sgl_kernel.<op>``) the first time it calls each stand-in op, so a test
or a person can see which ops a run really needed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Callable
from typing import Any

ENV_VAR = "SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS"
TRACE_ENV_VAR = "SGLANG_EAGLE_NCCL_TEST_CPU_STANDINS_TRACE"

_activated = False


def enabled() -> bool:
    """Whether the environment asks for the stand-ins (the gate the ``.pth`` line checks)."""
    return os.environ.get(ENV_VAR) == "1"


def activate() -> None:
    """Install the import hooks (idempotent). Cheap: nothing heavy is imported until SGLang asks."""
    global _activated
    if _activated:
        return
    _activated = True
    sys.meta_path.insert(0, _StandinFinder())


# --------------------------------------------------------------------------------------------------
# Import machinery
# --------------------------------------------------------------------------------------------------

_real_available: dict[str, bool] = {}


def _has_real(top: str) -> bool:
    """Whether a real top-level package is installed (then it is used and not stood in for)."""
    if top not in _real_available:
        _real_available[top] = importlib.machinery.PathFinder.find_spec(top) is not None
    return _real_available[top]


class _FactoryLoader(importlib.abc.Loader):
    """Loader for a module whose content is built by a function instead of read from a file."""

    def __init__(self, fill: Callable[[types.ModuleType], None], is_package: bool = False) -> None:
        self._fill = fill
        self._package = is_package

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if self._package:
            module.__path__ = []
        self._fill(module)


class _PostImportLoader(importlib.abc.Loader):
    """Runs the real loader, then a hook on the fresh module."""

    def __init__(self, real: importlib.abc.Loader, hook: Callable[[types.ModuleType], None]) -> None:
        self._real = real
        self._hook = hook

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._real.exec_module(module)
        self._hook(module)

    def __getattr__(self, name: str) -> Any:
        # get_source / get_filename / ... of the real loader: tracebacks and inspect keep working.
        return getattr(self._real, name)


class _StandinFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "torchvision._meta_registrations":
            return importlib.util.spec_from_loader(fullname, _FactoryLoader(lambda m: None))
        top = fullname.partition(".")[0]
        if fullname == "datasets" and not _has_real("datasets"):
            return importlib.util.spec_from_loader(fullname, _FactoryLoader(_fill_datasets))
        if top == "sgl_kernel" and not _has_real("sgl_kernel"):
            fill = _SGL_KERNEL_MODULES.get(fullname)
            if fill is None:
                return None  # an sgl_kernel submodule nobody needs here: a normal ImportError
            loader = _FactoryLoader(fill, is_package=fullname == "sgl_kernel")
            return importlib.util.spec_from_loader(fullname, loader, is_package=fullname == "sgl_kernel")
        hook = _POST_IMPORT_HOOKS.get(fullname)
        if hook is not None:
            spec = self._find_real(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PostImportLoader(spec.loader, hook)
            return spec
        return None

    def _find_real(
        self, fullname: str, path: Any, target: types.ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None


# --------------------------------------------------------------------------------------------------
# Post-import hooks on SGLang modules
# --------------------------------------------------------------------------------------------------


def _platform_has_amx(module: types.ModuleType) -> None:
    """SGLang >= 0.5.23: report AMX through SGLang's own platform override (attention backend only)."""
    override = getattr(module, "override_platform", None)
    if override is not None:
        override(has_amx=True).install()


def _bind_fast_topk(module: types.ModuleType) -> None:
    if not hasattr(module, "fast_topk"):
        try:
            from sglang.srt.utils.common import fast_topk
        except ImportError:  # SGLang <= 0.5.2: srt/utils.py is a module
            from sglang.srt.utils import fast_topk

        module.fast_topk = fast_topk


def _cpu_set_device(module: types.ModuleType) -> None:
    real = module.set_device

    def set_device(device: Any) -> None:
        if module.is_available():
            return real(device)
        return None  # a CPU machine: no CUDA device to select

    module.set_device = set_device


def _torch_amx_tile_fact(module: types.ModuleType) -> None:
    """The machine's AMX-tile fact where SGLang <= 0.5.x reads it (``torch._C._cpu``), from where torch
    2.13 keeps it (``torch.cpu``)."""
    import torch

    if not hasattr(torch._C._cpu, "_is_amx_tile_supported"):
        torch._C._cpu._is_amx_tile_supported = torch.cpu._is_amx_tile_supported


_POST_IMPORT_HOOKS: dict[str, Callable[[types.ModuleType], None]] = {
    "sglang.srt.utils": _torch_amx_tile_fact,
    "torch.cuda": _cpu_set_device,
    "sglang.srt.runtime_context": _platform_has_amx,
    "sglang.srt.speculative.spec_utils": _bind_fast_topk,
    "sglang.srt.speculative.eagle_utils": _bind_fast_topk,
}


# --------------------------------------------------------------------------------------------------
# sgl_kernel: pure-torch implementations of the CPU ops EAGLE reaches
# --------------------------------------------------------------------------------------------------
# All functions take the arguments SGLang's call sites pass, in the same order. Sizes in these tests
# are tiny (a few requests, a few tokens), so clarity beats speed: plain loops over requests.


def assign_req_to_token_pool_cpu(
    req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len
):
    """Write each request's newly allocated KV slots into its row of the req->token table.

    Request i gets ``end_offset[i] - start_offset[i]`` slots, taken in order from ``out_cache_loc``
    (requests packed one after another), stored at columns ``[start_offset[i], end_offset[i])``.
    """
    taken = 0
    rows = zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True)
    for row, start, end in rows:
        n = end - start
        req_to_token[row, start:end] = out_cache_loc[taken : taken + n].to(req_to_token.dtype)
        taken += n


def assign_extend_cache_locs_cpu(
    req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len
):
    """The reverse of ``assign_req_to_token_pool_cpu``: gather columns ``[start, end)`` of each
    request's row, packed one request after another, into ``out_cache_loc``."""
    written = 0
    rows = zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True)
    for row, start, end in rows:
        n = end - start
        out_cache_loc[written : written + n] = req_to_token[row, start:end].to(out_cache_loc.dtype)
        written += n


def assign_draft_cache_locs_contiguous_cpu(
    req_pool_indices, req_to_token, seq_lens, out_cache_loc, pool_len, topk, speculative_num_steps
):
    """Each request's ``topk * steps`` draft slots, which follow its current length in its row of the
    req->token table, copied into ``out_cache_loc`` at ``i * topk * steps``."""
    width = topk * speculative_num_steps
    for i, (row, start) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist(), strict=True)):
        out_cache_loc[i * width : (i + 1) * width] = req_to_token[row, start : start + width].to(
            out_cache_loc.dtype
        )


def fill_bonus_tokens_cpu(accept_tokens, accept_lens, bonus_tokens, accept_stride):
    """The bonus token of request i is its last accepted token (``accept_lens`` counts the bonus)."""
    flat = accept_tokens.reshape(-1)
    for i, n in enumerate(accept_lens.tolist()):
        bonus_tokens[i] = flat[i * accept_stride + n - 1]


def fill_accept_out_cache_loc_cpu(accept_index, out_cache_loc, accept_out_cache_loc):
    """Compact the KV slots of accepted draft tokens (``accept_index`` entries != -1), in order."""
    idx = accept_index.reshape(-1)
    kept = idx[idx != -1].long()
    accept_out_cache_loc[: kept.numel()] = out_cache_loc[kept].to(accept_out_cache_loc.dtype)


def copy_all_layer_kv_cache_cpu(data_ptrs, strides, tgt_loc, src_loc):
    """For every KV buffer (given by base address and row stride in bytes), copy row ``src_loc[j]``
    to row ``tgt_loc[j]``. All sources are read before any target is written (overlap-safe)."""
    import ctypes

    import torch

    if tgt_loc.numel() == 0:
        return
    src = src_loc.long().cpu()
    tgt = tgt_loc.long().cpu()
    rows = int(max(src.max().item(), tgt.max().item())) + 1
    for base, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        raw = (ctypes.c_uint8 * (rows * int(stride))).from_address(int(base))
        buf = torch.frombuffer(raw, dtype=torch.uint8).view(rows, int(stride))
        buf[tgt] = buf[src].clone()


def build_tree_kernel_efficient_cpu(
    parent_list,
    selected_index,
    verified_seq_len,
    tree_mask,
    positions,
    retrieve_index,
    retrieve_next_token,
    retrieve_next_sibling,
    topk,
    depth,
    draft_token_num,
    tree_mask_mode,
):
    """Turn EAGLE's draft selection into a token tree for verification.

    Per request b with n = ``draft_token_num`` tree nodes (node 0 is the bonus token, node k >= 1 is
    draft ``selected_index[b, k - 1]``):
      * ``retrieve_index[b, k] = b * n + k``;
      * node k's parent is node 0 when ``selected_index[b, k-1] // topk == 0``, otherwise the node whose
        selected id equals ``parent_list[b, selected_index[b, k-1] // topk]``; children hang off
        ``retrieve_next_token`` (first child) and ``retrieve_next_sibling`` (next sibling), in
        increasing node order;
      * ``positions[b * n + k] = seq_len + depth of node k``;
      * the tree mask row of node k allows node 0, node k and node k's ancestors. Mode 0 (FULL_MASK):
        rows of ``seq_len + n`` columns per request, the prefix columns left as they are (the caller
        fills them); mode 1 (QLEN_ONLY): ``n x n`` per request.
    """
    mode = int(tree_mask_mode)
    if mode not in (0, 1):
        raise NotImplementedError(f"tree mask mode {mode} is not supported by the CPU stand-in")
    n = int(draft_token_num)
    parents_all = parent_list.reshape(parent_list.shape[0], -1).tolist()
    selected_all = selected_index.reshape(selected_index.shape[0], -1).tolist()
    seq_lens = verified_seq_len.tolist()
    mask_offset = 0  # FULL_MASK: start of request b's rows
    for b, seq_len in enumerate(seq_lens):
        parents, selected = parents_all[b], selected_all[b]

        def parent_node(k: int, parents=parents, selected=selected) -> int | None:
            """Tree node (0..n-1) that is the parent of node k >= 1; None if it is not in the tree."""
            parent_slot = selected[k - 1] // topk
            if parent_slot == 0:
                return 0
            wanted = parents[parent_slot]
            for node in range(1, n):
                if selected[node - 1] == wanted:
                    return node
            return None

        for k in range(n):
            retrieve_index[b, k] = b * n + k
        # Insert children from the last node down so each parent's list ends up in increasing order.
        for k in range(n - 1, 0, -1):
            p = parent_node(k)
            if p is None:
                continue
            first = int(retrieve_next_token[b, p])
            retrieve_next_token[b, p] = k
            if first != -1:
                retrieve_next_sibling[b, k] = first

        row_len = seq_len + n if mode == 0 else n
        col0 = seq_len if mode == 0 else 0
        base = mask_offset if mode == 0 else b * n * n
        for k in range(n):
            row = base + k * row_len + col0
            tree_mask[row : row + n] = False
            tree_mask[row] = True
            node, level = k, 0
            for _ in range(int(depth)):
                if node in (0, None):
                    break
                tree_mask[row + node] = True
                level += 1
                node = parent_node(node)
            positions[b * n + k] = seq_len + level
        mask_offset += n * (seq_len + n)


def verify_tree_greedy_cpu(
    predicts,
    accept_index,
    accept_token_num,
    candidates,
    retrive_index,
    retrive_next_token,
    retrive_next_sibling,
    target_predict,
):
    """Greedy verification: walk the tree from the root, at each level accept the child whose draft
    token equals the target model's argmax at the last accepted node; stop when none does.

    Writes ``predicts[node] = target token`` along the accepted path (and for the last accepted
    node), ``accept_index[b, :m + 1]`` (global node ids, root first) and ``accept_token_num[b] = m``.
    """
    bs, n = candidates.shape
    max_accept = accept_index.shape[1]
    target = target_predict.reshape(-1)
    for b in range(bs):
        last = int(retrive_index[b, 0])
        accept_index[b, 0] = last
        accepted = 0
        node = 0
        for _ in range(1, max_accept):
            node = int(retrive_next_token[b, node])
            wanted = int(target[last])
            while node != -1 and int(candidates[b, node]) != wanted:
                node = int(retrive_next_sibling[b, node])
            if node == -1:
                break
            predicts[last] = wanted
            accepted += 1
            last = int(retrive_index[b, node])
            accept_index[b, accepted] = last
        accept_token_num[b] = accepted
        predicts[last] = target[last]


def _attention_one(q, keys, values, allowed, sm_scale, logit_cap, sink):
    """softmax(q k^T * scale [capped], masked) v for one request. q: [t, h, d]; keys/values:
    [s, h_kv, d]; allowed: [t, s] bool or None. Returns [t, h, d_v] in float32."""
    import torch

    heads, kv_heads = q.shape[1], keys.shape[1]
    if heads != kv_heads:  # grouped-query attention: each KV head serves heads // kv_heads heads
        keys = keys.repeat_interleave(heads // kv_heads, dim=1)
        values = values.repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("thd,shd->hts", q.float(), keys.float()) * sm_scale
    if logit_cap > 0:
        scores = logit_cap * torch.tanh(scores / logit_cap)
    if allowed is not None:
        scores = scores.masked_fill(~allowed.unsqueeze(0), float("-inf"))
    if sink is not None:  # a per-head logit that takes part in the softmax but has no value
        sink_col = sink.float().view(-1, 1, 1).expand(heads, scores.shape[1], 1)
        probs = torch.softmax(torch.cat([scores, sink_col], dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)
    return torch.einsum("hts,shd->thd", probs, values.float())


def _window_mask(q_pos, k_pos, sliding_window_size):
    if sliding_window_size > 0:
        return (q_pos.unsqueeze(1) - k_pos.unsqueeze(0)) < sliding_window_size
    return None


def extend_attention_cpu(
    q_extend,
    k_extend,
    v_extend,
    o_extend,
    k_buffer,
    v_buffer,
    k_scale,
    v_scale,
    req_to_token,
    req_pool_indices,
    seq_lens,
    extend_seq_lens,
    extend_start_loc,
    max_len_extend,
    sm_scale,
    logit_cap,
    is_cross_attention,
    sliding_window_size,
    encoder_lens,
    sinks,
    tree_mask,
    is_causal,
):
    """Prefill / target-verify attention: request i's ``extend_seq_lens[i]`` new query tokens (rows
    ``extend_start_loc[i]...`` of ``q_extend``) attend to its ``seq_lens[i] - extend_seq_lens[i]`` cached
    prefix tokens (from the KV buffers via ``req_to_token``) and to the new tokens (``k_extend`` /
    ``v_extend``, or the buffers when those are None), causally unless ``is_causal`` is False. With a
    ``tree_mask`` (QLEN_ONLY layout, ``n x n`` per request) the new tokens see each other only where the
    mask allows; the prefix stays visible. ``sliding_window_size`` > 0 limits how far back a token sees.
    """
    import torch

    if is_cross_attention:
        raise NotImplementedError("cross-attention is not supported by the CPU stand-in")
    mask_offset = 0
    for i in range(seq_lens.shape[0]):
        seq_len = int(seq_lens[i])
        ext = int(extend_seq_lens[i])
        start = int(extend_start_loc[i])
        prefix = seq_len - ext
        slots = req_to_token[int(req_pool_indices[i]), :seq_len].long()
        if k_extend is not None and v_extend is not None:
            new_k = k_extend[start : start + ext].reshape(ext, *k_buffer.shape[1:])
            new_v = v_extend[start : start + ext].reshape(ext, *v_buffer.shape[1:])
            keys = torch.cat([k_buffer[slots[:prefix]].to(new_k.dtype), new_k])
            values = torch.cat([v_buffer[slots[:prefix]].to(new_v.dtype), new_v])
        else:
            keys, values = k_buffer[slots], v_buffer[slots]
        keys = keys.float() * float(k_scale)
        values = values.float() * float(v_scale)
        q_pos = torch.arange(prefix, seq_len)
        k_pos = torch.arange(seq_len)
        allowed = torch.ones(ext, seq_len, dtype=torch.bool)
        if tree_mask is not None:
            tree = tree_mask[mask_offset : mask_offset + ext * ext].view(ext, ext).bool()
            allowed[:, prefix:] = tree
            mask_offset += ext * ext
        elif is_causal:
            allowed &= k_pos.unsqueeze(0) <= q_pos.unsqueeze(1)
        window = _window_mask(q_pos, k_pos, int(sliding_window_size))
        if window is not None:
            allowed &= window
        out = _attention_one(
            q_extend[start : start + ext], keys, values, allowed, float(sm_scale), float(logit_cap), sinks
        )
        o_extend[start : start + ext] = out.to(o_extend.dtype)


def decode_attention_cpu(
    query,
    k_buffer,
    v_buffer,
    k_scale,
    v_scale,
    output,
    key,
    value,
    loc,
    attn_logits,
    req_to_token,
    req_pool_indices,
    seq_lens,
    sm_scale,
    logit_cap,
    is_cross_attention,
    sliding_window_size,
    encoder_lens,
    sinks,
):
    """Decode attention: first store the new token's K/V (``key`` / ``value``, when given) at ``loc``,
    then let request i's single query token attend to its ``seq_lens[i]`` cached tokens.
    ``attn_logits`` is the real kernel's scratch space and is not needed here."""
    import torch

    if is_cross_attention:
        raise NotImplementedError("cross-attention is not supported by the CPU stand-in")
    if key is not None and value is not None:
        rows = loc.long()
        k_buffer[rows] = key.reshape(rows.numel(), *k_buffer.shape[1:]).to(k_buffer.dtype)
        v_buffer[rows] = value.reshape(rows.numel(), *v_buffer.shape[1:]).to(v_buffer.dtype)
    for i in range(seq_lens.shape[0]):
        seq_len = int(seq_lens[i])
        slots = req_to_token[int(req_pool_indices[i]), :seq_len].long()
        keys = k_buffer[slots].float() * float(k_scale)
        values = v_buffer[slots].float() * float(v_scale)
        allowed = _window_mask(torch.tensor([seq_len - 1]), torch.arange(seq_len), int(sliding_window_size))
        out = _attention_one(
            query[i : i + 1], keys, values, allowed, float(sm_scale), float(logit_cap), sinks
        )
        output[i : i + 1] = out.to(output.dtype)


_TORCH_OPS = {
    "extend_attention_cpu": (
        "extend_attention_cpu(Tensor q_extend, Tensor? k_extend, Tensor? v_extend, Tensor(a!) o_extend, "
        "Tensor k_buffer, Tensor v_buffer, float k_scale, float v_scale, Tensor req_to_token, "
        "Tensor req_pool_indices, Tensor seq_lens, Tensor extend_seq_lens, Tensor extend_start_loc, "
        "int? max_len_extend, float sm_scale, float logit_cap, bool is_cross_attention, "
        "int sliding_window_size, Tensor? encoder_lens, Tensor? sinks, Tensor? tree_mask, "
        "bool is_causal) -> ()",
        extend_attention_cpu,
    ),
    "decode_attention_cpu": (
        "decode_attention_cpu(Tensor query, Tensor(a!) k_buffer, Tensor(b!) v_buffer, float k_scale, "
        "float v_scale, Tensor(c!) output, Tensor? key, Tensor? value, Tensor loc, Tensor attn_logits, "
        "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, float sm_scale, float logit_cap, "
        "bool is_cross_attention, int sliding_window_size, Tensor? encoder_lens, Tensor? sinks) -> ()",
        decode_attention_cpu,
    ),
}

_torch_library: Any = None  # kept alive: dropping a torch.library.Library removes its ops


def _traced(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` itself, or (when tracing is on) ``fn`` reporting its first call in this process."""
    if os.environ.get(TRACE_ENV_VAR) != "1":
        return fn
    import functools

    reported = False

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal reported
        if not reported:
            reported = True
            print(
                f"[cpu-standins] pid={os.getpid()} called sgl_kernel.{fn.__name__}",
                file=sys.stderr,
                flush=True,
            )
        return fn(*args, **kwargs)

    return wrapper


def _register_torch_ops() -> None:
    global _torch_library
    if _torch_library is not None:
        return
    import torch

    _torch_library = torch.library.Library("sgl_kernel", "FRAGMENT")
    for name, (schema, fn) in _TORCH_OPS.items():
        _torch_library.define(schema)
        _torch_library.impl(name, _traced(fn), "CPU")


def _not_available(qualname: str) -> Callable[..., Any]:
    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{qualname} is not implemented by the CPU test stand-in for sgl_kernel "
            "(tests/support/sglang_cpu_standins.py)"
        )

    unavailable.__name__ = qualname.rpartition(".")[2]
    return unavailable


_IMPLEMENTED = (
    assign_req_to_token_pool_cpu,
    assign_extend_cache_locs_cpu,
    assign_draft_cache_locs_contiguous_cpu,
    build_tree_kernel_efficient_cpu,
    verify_tree_greedy_cpu,
    fill_bonus_tokens_cpu,
    fill_accept_out_cache_loc_cpu,
    copy_all_layer_kv_cache_cpu,
)

# Imported by SGLang at module level on a CPU machine but never called in these runs.
_IMPORT_ONLY: dict[str, tuple[str, ...]] = {
    "sgl_kernel": (
        "build_draft_decode_metadata_cpu",  # speculative_num_steps > 1 only
        # SGLang 0.5.4.post1+ layers/moe/moe_runner/deep_gemm.py: imported unless NPU/HIP (DeepGEMM MoE, CUDA)
        "silu_and_mul",
        # SGLang 0.5.2 layers/moe/cutlass_w4a8_moe.py: imported unguarded (Cutlass W4A8 MoE, CUDA)
        "cutlass_w4a8_moe_mm",
        "get_cutlass_w4a8_moe_mm_data",
        "sgl_per_tensor_quant_fp8",
    ),
    "sgl_kernel.kvcacheio": (  # SGLang <= 0.5.10 mem_cache/memory_pool_host.py (HiCache)
        "transfer_kv_all_layer",
        "transfer_kv_all_layer_direct_lf_pf",
        "transfer_kv_all_layer_lf_pf",
        "transfer_kv_all_layer_mla",
        "transfer_kv_all_layer_mla_lf_pf",
        "transfer_kv_direct",
        "transfer_kv_per_layer",
        "transfer_kv_per_layer_direct_pf_lf",
        "transfer_kv_per_layer_mla",
        "transfer_kv_per_layer_mla_pf_lf",
        "transfer_kv_per_layer_pf_lf",
        "transfer_kv_all_layer_lf_ph",
        "transfer_kv_per_layer_ph_lf",  # added by 0.5.10
    ),
}


class _UnavailableNamespace:
    """An op namespace read at import time whose ops are only called on GPUs (any attribute is an op
    that raises when called)."""

    def __init__(self, qualname: str) -> None:
        self._qualname = qualname

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)
        return _not_available(f"{self._qualname}.{name}")


def _fill_sgl_kernel(module: types.ModuleType) -> None:
    module.__version__ = "0.0.0+cpu-test-standin"
    for fn in _IMPLEMENTED:
        setattr(module, fn.__name__, _traced(fn))
    for name in _IMPORT_ONLY["sgl_kernel"]:
        setattr(module, name, _not_available(f"sgl_kernel.{name}"))
    # SGLang <= 0.5.4 srt/_custom_ops.py binds ``custom_op = sgl_kernel.allreduce`` at import (custom
    # all-reduce, CUDA only; reached at TP > 1 through monkey_patch_p2p_access_check).
    module.allreduce = _UnavailableNamespace("sgl_kernel.allreduce")
    _register_torch_ops()


def _fill_import_only(module: types.ModuleType) -> None:
    for name in _IMPORT_ONLY[module.__name__]:
        setattr(module, name, _not_available(f"{module.__name__}.{name}"))


def _fill_datasets(module: types.ModuleType) -> None:
    def load_dataset(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "datasets.load_dataset is not available: an import-only CPU test stand-in "
            "(tests/support/sglang_cpu_standins.py)"
        )

    module.load_dataset = load_dataset


_SGL_KERNEL_MODULES: dict[str, Callable[[types.ModuleType], None]] = {
    "sgl_kernel": _fill_sgl_kernel,
    "sgl_kernel.kvcacheio": _fill_import_only,
}
