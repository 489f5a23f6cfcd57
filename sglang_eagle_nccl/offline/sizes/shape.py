"""A model's hidden size and the activation dtype SGLang would run, read from its ``config.json``
(a path, its directory, or the parsed mapping) as SGLang reads it, and :class:`SizesError`, the one
error of the `sizes` command's inputs.

Pure functions (the config file is read once); errors are :class:`SizesError` with one finding
per problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_eagle_nccl.contract.errors import PluginStop
from sglang_eagle_nccl.contract.findings import Finding, error

__all__ = [
    "ELEMENT_SIZE",
    "MAX_COUNT",
    "ModelShape",
    "SizesError",
    "model_shape",
    "shown_value",
]

# SGLang's dtype names (configs/model_config.py 0.5.23:2273-2280, same table since 0.4.3).
_DTYPE_NAMES = {"half": "float16", "float16": "float16", "float": "float32", "float32": "float32", "bfloat16": "bfloat16"}
ELEMENT_SIZE = {"bfloat16": 2, "float16": 2, "float32": 4}
# Sub-configs SGLang reads the language model's shape from (utils/hf_transformers/common.py
# 0.5.23:547-580 get_hf_text_config): the first one present wins.
_TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")


class SizesError(PluginStop, ValueError):
    """Input that cannot become a size report. Carries every problem found, not just the first."""

    def __init__(self, findings: Iterable[Finding]):
        self.findings: tuple[Finding, ...] = tuple(findings)
        lines = [f"{len(self.findings)} problem(s) in the size inputs; nothing was computed:"]
        lines += [f"  - {f.message()}" for f in self.findings]
        super().__init__("\n".join(lines))


# --------------------------------------------------------------------------------------------------
# The model's hidden size and activation dtype
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    hidden_size: int
    dtype: str  # the activation dtype SGLang runs: bfloat16 / float16 / float32
    element_size: int
    hidden_from: str  # "config.json" or "config.json text_config" ...
    dtype_from: str
    num_hidden_layers: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hidden_size": self.hidden_size, "dtype": self.dtype, "element_size": self.element_size,
            "hidden_from": self.hidden_from, "dtype_from": self.dtype_from,
            "num_hidden_layers": self.num_hidden_layers, "notes": list(self.notes),
        }


# Counts SGLang keeps in C ints (batch sizes, token counts, hidden sizes): larger ones are no model's
# and would make byte counts whose decimal text Python refuses to print (over 4300 digits).
MAX_COUNT = 2**31 - 1
# A Hugging Face config.json is a few KiB (the largest multimodal ones tens of KiB); the cap only
# bounds what a wrong path (a weights file, a log) can make this command read.
MAX_CONFIG_BYTES = 16 * 1024 * 1024
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?')


def _long_integer_line(text: str, max_digits: int) -> int | None:
    """Line of the first JSON integer with more than ``max_digits`` digits (strings skipped)."""
    for m in _JSON_TOKEN.finditer(text):
        token = m.group()
        if token[0] != '"' and token.lstrip("-").isdigit() and len(token.lstrip("-")) > max_digits:
            return text.count("\n", 0, m.start()) + 1
    return None


def _load_config(config: Mapping[str, Any] | str | Path) -> tuple[dict[str, Any], str]:
    from sglang_eagle_nccl.contract.files import UnreadableFile, read_regular_file

    if isinstance(config, Mapping):
        return dict(config), "config"
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    shown = str(config)
    if not path.exists() and not path.is_symlink():
        raise SizesError([error("--model-config", shown, "no such file (expected a model's config.json or its directory)", "pass the path of the target model's config.json")])
    try:
        # A regular file only, bounded: a FIFO is refused at once instead of waited on, /dev/zero
        # instead of read without end.
        raw = read_regular_file(str(path), MAX_CONFIG_BYTES, follow_symlinks=True)
        text = raw.decode("utf-8")
    except UnreadableFile as exc:
        raise SizesError([error("--model-config", shown, f"cannot be read ({exc.reason})", "pass the model's config.json (a regular file)")]) from None
    except UnicodeDecodeError as exc:
        raise SizesError([error("--model-config", shown, f"is not UTF-8 text (byte {exc.start})", "pass the model's Hugging Face config.json unchanged")]) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SizesError([error("--model-config", shown, f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", "pass the model's Hugging Face config.json unchanged")]) from None
    except (ValueError, RecursionError) as exc:
        # json converts integers with int(), which refuses more digits than Python's limit with a
        # bare ValueError (no line); nesting thousands deep ends in a RecursionError.
        from sglang_eagle_nccl.knowledge._toml import int_digit_limit

        limit = int_digit_limit()
        line = _long_integer_line(text, limit) if limit and not isinstance(exc, RecursionError) else None
        why = (f"has an integer of more than {limit} digits on line {line}" if line
               else "nests too deeply or holds a number Python cannot read")
        raise SizesError([error("--model-config", shown, f"is not a usable JSON file: it {why}", "pass the model's Hugging Face config.json unchanged")]) from None
    if not isinstance(data, dict):
        raise SizesError([error("--model-config", shown, f"holds a JSON {type(data).__name__}, not an object", "pass the model's Hugging Face config.json")])
    return data, shown


def _dtype_field(cfg: Mapping[str, Any]) -> Any:
    # Newer transformers write "dtype", older "torch_dtype"; SGLang reads either (model_config.py
    # 0.5.23:2289-2291).
    value = cfg.get("dtype")
    return value if value is not None else cfg.get("torch_dtype")


def model_shape(config: Mapping[str, Any] | str | Path, dtype: str = "auto") -> ModelShape:
    """Hidden size and activation dtype SGLang would run for this ``config.json`` (a path, its
    directory, or the parsed mapping). ``dtype`` is SGLang's ``--dtype`` (default ``auto``).

    Multimodal configs: the language model's ``text_config`` / ``llm_config`` / ``language_config``
    gives the hidden size and, when it has one, the dtype (else the top-level dtype), as SGLang's
    ``get_hf_text_config`` does. ``auto`` follows SGLang's ``_get_and_verify_dtype``: the config's
    dtype, except float32 (or none at all) which SGLang runs as float16 (bfloat16 for Gemma)."""
    data, shown = _load_config(config)
    problems: list[Finding] = []
    notes: list[str] = []
    text_cfg: Mapping[str, Any] = data
    where = "config.json"
    for key in _TEXT_CONFIG_KEYS:
        sub = data.get(key)
        if sub is None:
            continue
        if not isinstance(sub, dict):
            problems.append(error(f"{key}", str(sub)[:60], f"{shown}: {key} must be a JSON object", "pass an unmodified Hugging Face config.json"))
            break
        text_cfg, where = sub, f"config.json {key}"
        break

    hidden: Any = None
    hidden_key = None
    for key in ("hidden_size", "n_embd", "d_model"):
        if text_cfg.get(key) is not None:
            hidden, hidden_key = text_cfg[key], key
            break
    if hidden is None and text_cfg is not data and data.get("hidden_size") is not None:
        hidden, hidden_key, where = data["hidden_size"], "hidden_size", "config.json"
        notes.append("the text sub-config has no hidden_size; the top-level one is used")
    if hidden is None:
        problems.append(error(
            "hidden_size", None,
            f"{shown}: neither the config nor its text sub-config ({', '.join(_TEXT_CONFIG_KEYS)}) has hidden_size",
            "pass the config.json of the language model that SGLang serves (for an EAGLE server, the target model's)",
        ))
    elif isinstance(hidden, bool) or not isinstance(hidden, int) or not 0 < hidden <= MAX_COUNT:
        problems.append(error(hidden_key or "hidden_size", shown_value(hidden), f"{shown}: must be a positive integer up to {MAX_COUNT}",
                              "pass an unmodified Hugging Face config.json"))

    if dtype is None:
        dtype = "auto"
    wanted = str(dtype).lower()
    if wanted != "auto" and wanted not in _DTYPE_NAMES:
        problems.append(error("--dtype", str(dtype), "SGLang accepts auto, half, float16, bfloat16, float, float32", "pass one of those (as given to SGLang's --dtype)"))
    if problems:
        raise SizesError(problems)

    raw_dtype = _dtype_field(text_cfg)
    dtype_from = f"{where} dtype"
    if raw_dtype is None and text_cfg is not data:
        raw_dtype = _dtype_field(data)
        dtype_from = "config.json dtype (the sub-config has none)"
    config_dtype = _DTYPE_NAMES.get(raw_dtype) if isinstance(raw_dtype, str) else None
    if raw_dtype is None:
        notes.append("the config names no dtype: SGLang takes it as float32")
        config_dtype = "float32"
        dtype_from = "none in config.json (SGLang assumes float32)"
    elif config_dtype is None:
        notes.append(f"config dtype {raw_dtype!r} is not one SGLang maps; SGLang takes it as float32")
        config_dtype = "float32"

    if wanted == "auto":
        if config_dtype == "float32":
            model_type = str(text_cfg.get("model_type") or data.get("model_type") or "")
            chosen = "bfloat16" if model_type.startswith("gemma") else "float16"
            notes.append(
                f"--dtype auto runs float32 checkpoints as {chosen} in SGLang"
                + (" (0.4.x: only gemma2 is bfloat16)" if chosen == "bfloat16" else "")
            )
        else:
            chosen = config_dtype
        dtype_from = f"--dtype auto from {dtype_from}"
    else:
        chosen = _DTYPE_NAMES[wanted]
        dtype_from = f"--dtype {dtype}"

    layers = text_cfg.get("num_hidden_layers")
    layers = layers if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0 else None
    return ModelShape(int(hidden), chosen, ELEMENT_SIZE[chosen], f"{where} {hidden_key}", dtype_from, layers, tuple(notes))


def shown_value(value: Any) -> str:
    # str() of an int over 4300 digits raises; such a number is shown by its size instead.
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"(an integer of {value.bit_length()} bits)"
    return str(value)
