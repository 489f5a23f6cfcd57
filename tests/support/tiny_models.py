"""Tiny model directories for running a real SGLang engine on CPU.

Each function writes a Hugging Face style ``config.json`` (and ``generation_config.json``) into a
directory and returns that directory. No weights and no tokenizer are written: the engine is started
with ``load_format="dummy"`` (random weights) and ``skip_tokenizer_init=True`` (token ids in, token ids
out), so a config is all SGLang reads. Sizes are chosen to be as small as SGLang accepts while keeping
the real code paths: grouped-query attention (4 query heads, 2 KV heads, so TP=2 splits both), a
16-wide head, a 512-token vocabulary.

    target = write_target(tmp_path / "target")
    draft = write_eagle_draft(tmp_path / "eagle3", kind="EAGLE3")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

HIDDEN_SIZE = 64
NUM_LAYERS = 2
NUM_HEADS = 4
NUM_KV_HEADS = 2
HEAD_DIM = 16
VOCAB_SIZE = 512
INTERMEDIATE_SIZE = 128
MAX_POSITIONS = 256
BOS_TOKEN_ID = 1
EOS_TOKEN_ID = 2

# EAGLE-3 drafts read hidden states captured from several target layers. The default capture set
# for Llama, (2, L // 2, L - 3), does not fit a 2-layer target, so the draft names its own: the input
# of layer 0 (embeddings, id -1) and the output of layer 0 (id 0).
EAGLE3_AUX_LAYER_IDS = [-1, 0]

DraftKind = Literal["EAGLE", "EAGLE3"]


def _llama_config(architecture: str, num_layers: int) -> dict[str, Any]:
    return {
        "architectures": [architecture],
        "model_type": "llama",
        "hidden_size": HIDDEN_SIZE,
        "intermediate_size": INTERMEDIATE_SIZE,
        "num_hidden_layers": num_layers,
        "num_attention_heads": NUM_HEADS,
        "num_key_value_heads": NUM_KV_HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": VOCAB_SIZE,
        "max_position_embeddings": MAX_POSITIONS,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": BOS_TOKEN_ID,
        "eos_token_id": EOS_TOKEN_ID,
        "initializer_range": 0.02,
    }


def _write(directory: Path, config: dict[str, Any]) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = {"bos_token_id": BOS_TOKEN_ID, "eos_token_id": EOS_TOKEN_ID}
    (directory / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    return directory


def write_target(directory: str | Path) -> Path:
    """A 2-layer Llama (``LlamaForCausalLM``) target model directory."""
    return _write(Path(directory), _llama_config("LlamaForCausalLM", NUM_LAYERS))


def write_eagle_draft(directory: str | Path, kind: DraftKind = "EAGLE") -> Path:
    """A 1-layer EAGLE (``LlamaForCausalLMEagle``) or EAGLE-3 (``LlamaForCausalLMEagle3``) draft
    directory matching ``write_target``'s sizes and vocabulary."""
    if kind == "EAGLE":
        config = _llama_config("LlamaForCausalLMEagle", 1)
    elif kind == "EAGLE3":
        config = _llama_config("LlamaForCausalLMEagle3", 1)
        config["draft_vocab_size"] = VOCAB_SIZE
        config["target_hidden_size"] = HIDDEN_SIZE
        config["eagle_config"] = {
            "eagle_aux_hidden_state_layer_ids": EAGLE3_AUX_LAYER_IDS,
            "use_aux_hidden_state": True,
        }
    else:
        raise ValueError(f"unknown EAGLE draft kind {kind!r}; expected 'EAGLE' or 'EAGLE3'")
    return _write(Path(directory), config)
