"""`sizes`: the all-reduce bytes of decode, EAGLE draft / verify and a prefill chunk, and the path
SGLang would give each (predicted from its source thresholds)."""

from __future__ import annotations

import click

from sglang_eagle_nccl.cli.common import emit_json, fail_input, resolve_or_exit


def _installed_sglang() -> str | None:
    from sglang_eagle_nccl.contract.versions import installed_sglang_version

    return installed_sglang_version()


@click.command("sizes")
@click.option("--model-config", required=True, metavar="PATH", help="The target model's config.json (or its directory).")
@click.option("--batch-size", type=int, default=1, show_default=True, help="Running requests per step.")
@click.option("--tp-size", "--tp", "tp_size", type=int, default=1, show_default=True, help="Tensor-parallel size (ranks of the tp group).")
@click.option("--speculative-num-draft-tokens", type=int, default=None, help="SGLang's --speculative-num-draft-tokens (verify width).")
@click.option("--speculative-eagle-topk", type=int, default=None, help="SGLang's --speculative-eagle-topk (draft width).")
@click.option("--speculative-num-steps", type=int, default=None, help="SGLang's --speculative-num-steps (draft steps per cycle).")
@click.option("--chunked-prefill-size", type=int, default=None, help="SGLang's --chunked-prefill-size (-1: chunking off).")
@click.option("--cuda-graph-max-bs", type=int, default=None, help="SGLang's --cuda-graph-max-bs (larger batches run eagerly).")
@click.option("--dtype", default="auto", show_default=True, help="SGLang's --dtype.")
@click.option("--sglang-version", default=None, metavar="VERSION", help="Predict paths for this SGLang release. Default: the installed one.")
@click.option("--interconnect", type=click.Choice(["nvlink", "pcie"]), default=None, help="GPU interconnect of the group (default: show both when they differ).")
@click.option("--gpu-capability", type=int, default=None, help="CUDA compute capability major (9: H100/H200, 10: B200).")
@click.option("--nnodes", type=int, default=1, show_default=True, help="Nodes the tp group spans.")
@click.option("--disable-custom-all-reduce", is_flag=True, help="As SGLang's flag.")
@click.option("--enable-symm-mem", is_flag=True, help="As SGLang's flag (NCCL symmetric memory through PyNccl).")
@click.option("--enable-torch-symm-mem", is_flag=True, help="As SGLang's flag.")
@click.option("--enable-mscclpp", is_flag=True, help="As SGLang's flag.")
@click.option("--enable-deterministic-inference", is_flag=True, help="As SGLang's flag (turns custom all-reduce off).")
@click.option("--enable-pcie-ipc-allreduce", is_flag=True, help="SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1 (SGLang 0.5.21+).")
@click.option("--disable-cuda-graph", is_flag=True, help="As SGLang's flag: decode / verify run eagerly.")
@click.option("--enable-piecewise-cuda-graph", is_flag=True, help="Prefill runs inside piecewise CUDA graphs (SGLang 0.5.10+).")
@click.option("--profile", "-p", "profiles", multiple=True, metavar="NAME_OR_FILE",
              help="Also say which of this profile's [[tuner.rules]] each all-reduce matches (its tp group label).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def sizes(
    model_config: str, batch_size: int, tp_size: int, speculative_num_draft_tokens: int | None,
    speculative_eagle_topk: int | None, speculative_num_steps: int | None, chunked_prefill_size: int | None,
    cuda_graph_max_bs: int | None, dtype: str, sglang_version: str | None, interconnect: str | None,
    gpu_capability: int | None, nnodes: int, disable_custom_all_reduce: bool, enable_symm_mem: bool,
    enable_torch_symm_mem: bool, enable_mscclpp: bool, enable_deterministic_inference: bool,
    enable_pcie_ipc_allreduce: bool, disable_cuda_graph: bool, enable_piecewise_cuda_graph: bool,
    profiles: tuple[str, ...], as_json: bool,
) -> None:
    """All-reduce message sizes that matter for EAGLE, and whether they reach NCCL.

    \b
    bytes = tokens x hidden_size x bytes per element, per all-reduce, on every TP rank:
      decode step     batch x 1 tokens
      EAGLE draft     batch x --speculative-eagle-topk tokens, per draft step
      EAGLE verify    batch x --speculative-num-draft-tokens tokens
      prefill chunk   --chunked-prefill-size tokens
    Each with the implementation SGLang would pick (custom all-reduce, PCIe IPC, symmetric
    memory, PyNccl, torch ProcessGroupNCCL), predicted from SGLang's source thresholds; with
    --profile, the tuner rule each all-reduce matches (the plugin's model of its C tuner: the native
    tests prove both answer alike; `sglang-eagle-nccl tuner --model-config` asks the library itself).
    """
    from sglang_eagle_nccl.offline.sizes.render import format_size_report
    from sglang_eagle_nccl.offline.sizes.report import size_report
    from sglang_eagle_nccl.offline.sizes.shape import SizesError

    flags = {
        "interconnect": interconnect,
        "gpu_capability": gpu_capability,
        "nnodes": nnodes,
        "disable_custom_all_reduce": disable_custom_all_reduce,
        "enable_symm_mem": enable_symm_mem,
        "enable_torch_symm_mem": enable_torch_symm_mem,
        "enable_mscclpp": enable_mscclpp,
        "enable_deterministic_inference": enable_deterministic_inference,
        "enable_pcie_ipc_allreduce": enable_pcie_ipc_allreduce,
    }
    try:
        report = size_report(
            model_config, batch_size=batch_size, tp_size=tp_size, num_draft_tokens=speculative_num_draft_tokens,
            eagle_topk=speculative_eagle_topk, num_steps=speculative_num_steps, chunked_prefill_size=chunked_prefill_size,
            cuda_graph_max_bs=cuda_graph_max_bs, dtype=dtype, sglang_version=sglang_version or _installed_sglang(),
            flags={**flags, "disable_cuda_graph": disable_cuda_graph, "enable_piecewise_cuda_graph": enable_piecewise_cuda_graph},
        )
    except SizesError as exc:
        fail_input(str(exc), as_json=as_json, findings=exc.findings)
    if profiles:
        from sglang_eagle_nccl.offline.sizes.report import add_tuner_rules

        profile = resolve_or_exit(profiles, (), as_json=as_json).profile
        add_tuner_rules(report, profile, tp_size=tp_size, nnodes=nnodes)
    if as_json:
        emit_json({"ok": True, **report})
    else:
        click.echo(format_size_report(report))
