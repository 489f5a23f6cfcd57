"""Step (b)'s child: runs under the checked interpreter (``python ci/gpu_check --child-engine SPEC``),
starts one SGLang Engine, sends the requests, shuts down and prints one RESULT line."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from gpu_check.common import RESULT_MARK, SUPPORT_DIR

# Engine arguments renamed between SGLang releases: both spellings are passed and the one a release
# lacks is dropped without a note.
RENAMED_ARGS = frozenset({"cuda_graph_max_bs", "cuda_graph_max_bs_decode"})



def _server_arg_names() -> set[str] | None:
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

    if hasattr(ServerArgs, "__struct_fields__"):  # msgspec Struct (0.5.23)
        return set(ServerArgs.__struct_fields__)
    if dataclasses.is_dataclass(ServerArgs):
        return {f.name for f in dataclasses.fields(ServerArgs)}
    return None


def gpu_engine_kwargs(target: Path, draft: Path) -> dict[str, Any]:
    """Engine arguments on one GPU. Triton attention and PyTorch sampling: they need no FlashInfer
    JIT build (minutes, and nvcc) and no FA3 kernel choice, only what every CUDA SGLang has."""
    return {
        "model_path": str(target),
        "speculative_algorithm": "EAGLE3",
        "speculative_draft_model_path": str(draft),
        "speculative_num_steps": 2,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 3,
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "tp_size": 1,
        "device": "cuda",
        "dtype": "bfloat16",
        "attention_backend": "triton",
        "sampling_backend": "pytorch",
        "context_length": 256,
        "max_total_tokens": 4096,
        "max_running_requests": 4,
        # The name changed (0.5.11: cuda_graph_max_bs; 0.5.17+: cuda_graph_max_bs_decode); the one this
        # SGLang lacks is dropped. Decode graphs on; the prefill graphs of newer releases go through
        # torch.compile, minutes of the budget for nothing NCCL-related.
        "cuda_graph_max_bs": 4,
        "cuda_graph_max_bs_decode": 4,
        "disable_cuda_graph": False,
        "disable_decode_cuda_graph": False,
        "disable_prefill_cuda_graph": True,
        "random_seed": 0,
        "log_level": "info",
        "decode_log_interval": 1,
    }


def child_engine(spec: dict[str, Any]) -> int:
    """Start one Engine in this process, send the requests, shut down, print one RESULT line."""
    sys.path.insert(0, str(SUPPORT_DIR))
    import tiny_models  # type: ignore[import-not-found]

    work = Path(spec["work"])
    target = tiny_models.write_target(work / "models" / "target")
    draft = tiny_models.write_eagle_draft(work / "models" / "eagle3", kind="EAGLE3")
    result: dict[str, Any] = {"ok": False}
    try:
        t = time.monotonic()
        import sglang  # type: ignore[import-not-found]

        result.update(sglang=sglang.__version__, import_s=round(time.monotonic() - t, 1))
        if spec["mode"] == "cpu-rehearsal":
            import sglang_cpu_run  # type: ignore[import-not-found]

            kwargs = sglang_cpu_run.engine_kwargs(target, tp_size=1, draft_path=draft,
                                                  speculative_algorithm="EAGLE3")
        else:
            kwargs = gpu_engine_kwargs(target, draft)
        names = _server_arg_names()
        if names is not None:
            dropped = sorted(k for k in kwargs if k not in names)
            if RENAMED_ARGS - set(dropped):  # one spelling was accepted: the other is no news
                dropped = [k for k in dropped if k not in RENAMED_ARGS]
            result["dropped_kwargs"] = dropped
            kwargs = {k: v for k, v in kwargs.items() if k in names}
        t = time.monotonic()
        engine = sglang.Engine(**kwargs)
        result["engine_start_s"] = round(time.monotonic() - t, 1)
        server_args = getattr(engine, "server_args", None)
        disabled = getattr(server_args, "disable_cuda_graph", None)
        decode_disabled = getattr(server_args, "disable_decode_cuda_graph", False)
        result.update(disable_cuda_graph=disabled, disable_decode_cuda_graph=decode_disabled,
                      cuda_graph=(disabled is False and not decode_disabled) if disabled is not None else None,
                      speculative_algorithm=str(getattr(server_args, "speculative_algorithm", None)),
                      attention_backend=getattr(server_args, "attention_backend", None))
        outputs, times, accept = [], [], []
        sampling = {"max_new_tokens": spec["max_new_tokens"], "temperature": 0}
        try:
            # Two single requests, then both as one batch (batch size 2: another CUDA graph).
            for prompt in [*spec["prompts"], None]:
                t = time.monotonic()
                answer = engine.generate(input_ids=prompt if prompt is not None else list(spec["prompts"]),
                                         sampling_params=sampling)
                times.append(round(time.monotonic() - t, 2))
                for one in answer if isinstance(answer, list) else [answer]:
                    outputs.append(one.get("output_ids"))
                    meta = one.get("meta_info") or {}
                    if meta.get("spec_accept_length") is not None:
                        accept.append(round(float(meta["spec_accept_length"]), 2))
        finally:
            t = time.monotonic()
            engine.shutdown()
            result["shutdown_s"] = round(time.monotonic() - t, 1)
        result.update(ok=True, outputs=outputs, request_s=times, accept_length=accept)
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, then re-raised as exit 1
        result["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        print(RESULT_MARK + json.dumps(result), flush=True)
        raise
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0
