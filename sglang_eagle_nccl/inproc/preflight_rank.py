"""Run the installed SGLang's own distributed init without a model (used by ``preflight``).

SGLang changed where its groups are built (the scheduler hooks of patches/*.toml follow it): up to 0.5.20 the
scheduler's ModelRunner calls ``init_distributed_environment`` + ``initialize_model_parallel``
(+ ``initialize_dp_attention``); from 0.5.21 ``Scheduler.__init__`` publishes a runtime
context and calls ``distributed.bootstrap.init_parallel_runtime``. This module follows the
same path the installed release uses, adapting to its signatures, so the groups, PyNccl
communicators and hooks are exactly those a real server would create.

A small model *config* (no weights) is written to a temporary directory for releases whose
argument resolution reads one.
"""

from __future__ import annotations

import inspect
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sglang_eagle_nccl.contract import events

TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "head_dim": 16,
    "vocab_size": 512,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
}


def write_tiny_config(directory: str | None = None) -> str:
    path = Path(directory or tempfile.mkdtemp(prefix="sglang-eagle-nccl-preflight-model-"))
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(TINY_LLAMA), "utf-8")
    return str(path)


def _call_filtered(func: Any, **kwargs: Any) -> Any:
    """Call ``func`` with the keyword arguments its signature accepts (releases differ)."""
    params = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return func(**kwargs)
    return func(**{k: v for k, v in kwargs.items() if k in params})


def _server_args(tp_size: int, dp_size: int, dp_attention: bool, device: str, nnodes: int, node_rank: int, dist_init_addr: str | None) -> Any:
    from sglang.srt.server_args import ServerArgs

    fields: dict[str, Any] = {
        "model_path": write_tiny_config(),
        "tp_size": tp_size,
        "device": device,
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "nnodes": nnodes,
        "node_rank": node_rank,
    }
    if dist_init_addr:
        fields["dist_init_addr"] = dist_init_addr
    if dp_attention:
        fields["dp_size"] = dp_size
        fields["enable_dp_attention"] = True
    if device == "cpu":
        fields["attention_backend"] = "torch_native"
    return _call_filtered(ServerArgs, **fields) if not hasattr(ServerArgs, "__struct_fields__") else ServerArgs(
        **{k: v for k, v in fields.items() if k in ServerArgs.__struct_fields__}
    )


# What a preflight rank does, in order; a rank that stops says at which stage (rank_stopped).
STAGE_ACTIVATION = events.STAGE_ACTIVATION
STAGE_TORCH = events.STAGE_IMPORT_TORCH
STAGE_SGLANG = events.STAGE_IMPORT_SGLANG
STAGE_INIT = events.STAGE_DISTRIBUTED_INIT
STAGE_EXERCISE = events.STAGE_EXERCISE


def import_sglang() -> None:
    """The first import of SGLang in this rank, as its own stage: when it fails, the rank can say
    that SGLang was never imported (rather than leave the audit to wonder why no group was built)."""
    import sglang  # noqa: F401
    from sglang.srt.distributed import parallel_state  # noqa: F401


def first_line(exc: BaseException) -> str:
    """``Type: the first non-empty line of the message`` (what a summary shows of an error)."""
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def record_stop(stage: str, exc: BaseException) -> str:
    """Write this rank's ``rank_stopped`` record (when it audits) and return the error's first line.

    The plugin's own stops (a refusal, ranks that disagree) are recorded where they are decided,
    with their own event; recording them again here would list one cause twice.
    """
    from sglang_eagle_nccl.contract.errors import PluginStop
    from sglang_eagle_nccl.inproc.boot.state import STATE

    line = first_line(exc)
    if STATE.audit is not None and not isinstance(exc, PluginStop):
        try:
            STATE.audit.write("rank_stopped", stage=stage, error=line)
        except Exception:  # noqa: BLE001 - the rank reports the error to preflight either way
            pass
    return line


def init_groups(
    *,
    rank: int,
    world_size: int,
    local_rank: int,
    tp_size: int,
    dp_attention: bool,
    backend: str,
    init_method: str,
    device: str,
    dist_port: int,
    nnodes: int = 1,
    node_rank: int = 0,
    dist_init_addr: str | None = None,
) -> str:
    """Build SGLang's groups in this process the way its scheduler does. Returns the path taken."""
    try:
        from sglang.srt.distributed import bootstrap as sgl_bootstrap  # >= 0.5.16
    except ImportError:
        sgl_bootstrap = None
    if sgl_bootstrap is not None and hasattr(sgl_bootstrap, "init_parallel_runtime"):
        return _init_runtime_context(
            rank=rank, tp_size=tp_size, dp_attention=dp_attention, device=device, dist_port=dist_port,
            local_rank=local_rank, nnodes=nnodes, node_rank=node_rank, dist_init_addr=dist_init_addr,
        )
    from sglang.srt.distributed import parallel_state as ps

    _call_filtered(
        ps.init_distributed_environment,
        backend=backend, world_size=world_size, rank=rank, local_rank=local_rank, distributed_init_method=init_method,
    )
    _call_filtered(ps.initialize_model_parallel, tensor_model_parallel_size=tp_size, pipeline_model_parallel_size=1)
    if dp_attention:
        _init_dp_attention(rank=rank, tp_size=tp_size, device=device)
    return "parallel_state.init_distributed_environment + initialize_model_parallel"


def _init_dp_attention(*, rank: int, tp_size: int, device: str) -> None:
    from sglang.srt.layers import dp_attention as dpa

    params = list(inspect.signature(dpa.initialize_dp_attention).parameters)
    if params[:1] == ["enable_dp_attention"]:  # 0.4.x
        _call_filtered(dpa.initialize_dp_attention, enable_dp_attention=True, tp_rank=rank, tp_size=tp_size, dp_size=tp_size, moe_dense_tp_size=None, pp_size=1)
        return
    import torch

    # 0.5.1 - 0.5.20 read a handful of ServerArgs / ModelConfig attributes; give exactly those.
    server_args = SimpleNamespace(
        enable_dp_attention=True, tp_size=tp_size, dp_size=tp_size, moe_dense_tp_size=None, pp_size=1,
        device=device, attn_cp_size=1, moe_a2a_backend="none", enable_dp_lm_head=False,
    )
    model_config = SimpleNamespace(hidden_size=TINY_LLAMA["hidden_size"], dtype=torch.bfloat16)
    dpa.initialize_dp_attention(server_args, model_config)


def _init_runtime_context(
    *, rank: int, tp_size: int, dp_attention: bool, device: str, dist_port: int, local_rank: int,
    nnodes: int, node_rank: int, dist_init_addr: str | None,
) -> str:
    from sglang.srt import runtime_context as rc
    from sglang.srt.distributed import bootstrap as sgl_bootstrap

    server_args = _server_args(tp_size, tp_size, dp_attention, device, nnodes, node_rank, dist_init_addr)
    ranks = None
    if hasattr(rc, "SpawnRanks"):
        # DP attention partitions the TP group inside one WORLD: no DP replica rank.
        ranks = _call_filtered(rc.SpawnRanks, world_rank=rank, gpu_id=local_rank, dp_rank=None)
    _call_filtered(rc.publish, server_args=server_args, role="scheduler", ranks=ranks) if ranks is not None else rc.publish(server_args, role="scheduler")
    sgl_bootstrap.init_parallel_runtime(server_args=server_args, device=device, dist_port=dist_port)
    return "runtime_context.publish + distributed.bootstrap.init_parallel_runtime"


def known_groups() -> list[Any]:
    """Every GroupCoordinator SGLang registered in this process."""
    from sglang.srt.distributed import parallel_state as ps

    found = []
    registry = getattr(ps, "_groups", {})
    for ref in list(registry.values()):
        group = ref() if callable(ref) else ref
        if group is not None and group not in found:
            found.append(group)
    return found


def exercise(groups: list[Any], device: str) -> list[str]:
    """One small all-reduce per group on its device group: forces torch's lazy NCCL communicator."""
    import torch
    import torch.distributed as dist

    done = []
    for group in groups:
        if getattr(group, "world_size", 1) < 1 or getattr(group, "device_group", None) is None:
            continue
        t = torch.ones(1, device=device if device != "cpu" else "cpu")
        dist.all_reduce(t, group=group.device_group)
        done.append(getattr(group, "unique_name", "?"))
    return done


def tear_down() -> None:
    """Take SGLang's groups down the way its own shutdown does, then torch.distributed.

    SGLang's shared-memory broadcast queue of a TP group is unlinked only when its group is
    destroyed; a rank that just exits leaves it to multiprocessing's resource tracker, which warns
    about a "leaked shared_memory object" after preflight has printed its verdict.
    """
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()  # no rank takes a group down while another still uses it
    from sglang.srt.distributed import parallel_state as ps

    for name in ("destroy_model_parallel", "destroy_distributed_environment"):
        destroy = getattr(ps, name, None)
        if destroy is not None:
            destroy()
    if dist.is_initialized():
        dist.destroy_process_group()
