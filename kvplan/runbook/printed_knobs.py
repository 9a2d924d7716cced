"""More knobs the engines print in their configuration lines (read every knob the log prints before
fitting one). The doctor's own readers take the pool's main knobs (parallelism, dtype, memory fraction, page,
lengths); these are the rest that change a plan: each (printed key, kvplan knob, kind), read wherever the line
prints a value (``None`` is the engine's default and is not read).

SGLang ``server_args=ServerArgs(...)`` (sglang/srt/server_args.py ``ServerArgs`` fields), vLLM ``non-default
args: {...}`` (vllm/entrypoints/utils.py ``log_non_default_args``) and the V1 engine-config line
(vllm/v1/engine/core.py: ``Initializing a V1 LLM engine (v…) with config: …``).
"""

from __future__ import annotations

from kvplan.models.deploy import MODEL_DTYPES
from kvplan.runbook.parse import Args

SGLANG: tuple[tuple[str, str, str], ...] = (
    ("attention_backend", "attention_backend", "text"),
    ("dtype", "dtype", "dtype"),
    ("swa_full_tokens_ratio", "swa_full_tokens_ratio", "number"),
    ("max_mamba_cache_size", "max_mamba_cache_size", "int"),
    ("disable_radix_cache", "disable_radix_cache", "flag"),
    ("speculative_eagle_topk", "speculative_eagle_topk", "int"),
)
VLLM: tuple[tuple[str, str, str], ...] = (
    ("enforce_eager", "disable_cuda_graph", "flag"),
    ("num_gpu_blocks_override", "num_gpu_blocks_override", "int"),
    ("disable_hybrid_kv_cache_manager", "disable_hybrid_kv_cache_manager", "flag"),
    ("dtype", "dtype", "dtype"),
)
ENGINE_DEFAULT: dict[str, float] = {"swa_full_tokens_ratio": 0.8}
"""A value SGLang's ServerArgs prints as its own default (``swa_full_tokens_ratio: float = 0.8``): the config's
unset knob is the same value, so it is not read as a knob the server ran."""
SKIP_TEXT = frozenset({"auto", "dsa", "nsa"})
"""Values that are the engine's own choice (SGLang's 'dsa' / 'nsa' attention backend names the family whose
prefill / decode backends the doctor reads from their own fields)."""


def printed(a: Args, engine: str) -> list[tuple[str, object, str, str]]:
    """(knob, value, shown, printed key) for each table key the line prints with a value."""
    out: list[tuple[str, object, str, str]] = []
    for key, knob, kind in SGLANG if engine == "sglang" else VLLM:
        if key.startswith("speculative_") and a.text("speculative_algorithm") is None:
            continue  # SGLang prints its speculative fields with speculative decoding off: no draft, no top-k
        value: object
        if kind == "flag":
            value = a.flag(key)
        elif kind == "int":
            value = a.integer(key)
            value = value if value is not None and value > 0 else None
        elif kind == "number":
            text = a.number(key)
            value = float(text) if text is not None and float(text) != ENGINE_DEFAULT.get(key) else None
        elif kind == "dtype":  # the engine-config line prints torch.bfloat16, the CLI bfloat16
            text = (a.text(key) or "").removeprefix("torch.")
            value = text if text in MODEL_DTYPES and text != "auto" else None
        else:
            value = a.text(key)
            value = value if value not in SKIP_TEXT else None
        if value is not None:
            out.append((knob, value, a.text(key) or str(value), key))
    return out
