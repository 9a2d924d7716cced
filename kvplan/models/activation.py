"""The model dimensions that size an engine's profiling run (activations, logits, MoE workspace), from config.json.

The KV cache and the weights need the layers and the parameter groups; vLLM's non-KV memory besides the weights
needs a few more numbers: the hidden size, the vocabulary, the MLP widths and the experts a token is routed to.
``activation_dims`` reads them leniently from a config mapping (the loaders have already validated what they
read; a field that is missing or not a plain non-negative integer counts as 0 here, so nothing can fail twice).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan import limits, record
from kvplan.models.quant import method_of


@record(kw_only=True)
class ActivationDims:
    hidden_size: int
    vocab_size: int
    dense_intermediate: int
    """Width of the largest dense MLP a token passes (a dense model's ``intermediate_size``; in a MoE model the
    dense layers' ``intermediate_size`` when it has some, else its shared experts'); 0 for none."""
    expert_intermediate: int
    """One routed expert's width (``moe_intermediate_size``; Mixtral: ``intermediate_size``); 0 for a dense model."""
    experts_per_token: int
    """``num_experts_per_tok`` of a MoE model; 0 for a dense model."""
    dtype_bytes: int = 2
    """Activation element size: 4 for a float32 checkpoint, else 2 (bf16 / fp16)."""
    moe_monolithic: bool = False
    """Experts run by a monolithic kernel that takes no modular fused-MoE workspace: an MXFP4 checkpoint
    (``quantization_config.quant_method`` "mxfp4", gpt-oss) on vLLM's 'TRITON' Mxfp4 backend, whose start-up logs
    print ``MoEPrepareAndFinalizeNoDPEPMonolithic`` (the llm-d-planner gpt-oss-20b logs of vLLM 0.19.0)."""
    residual_streams: int = 1
    """Hidden-state streams a token carries between layers: DeepSeek-V4's ``hc_mult`` (hyper-connections, 4),
    else 1. vLLM's V4 model keeps a [max_num_batched_tokens, hc_mult × hidden] buffer of them
    (kvplan.engines.vllm_dsv4_memory)."""

    @property
    def is_moe(self) -> bool:
        return self.experts_per_token > 0 and self.expert_intermediate > 0


def _int(config: Mapping[str, Any], key: str) -> int:
    v = config.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= limits.MAX_DIM:
        return 0
    return v


def activation_dims(config: Mapping[str, Any]) -> ActivationDims | None:
    """The profiling-run dimensions of a config.json (or a preset's ``config:``); None without hidden / vocab size.

    >>> d = activation_dims({"hidden_size": 4096, "vocab_size": 128256, "intermediate_size": 14336})
    >>> (d.hidden_size, d.vocab_size, d.dense_intermediate, d.is_moe)
    (4096, 128256, 14336, False)
    >>> m = activation_dims({"hidden_size": 4096, "vocab_size": 32000, "intermediate_size": 14336,
    ...                      "num_local_experts": 8, "num_experts_per_tok": 2})
    >>> (m.dense_intermediate, m.expert_intermediate, m.experts_per_token)
    (0, 14336, 2)
    """
    hidden, vocab = _int(config, "hidden_size"), _int(config, "vocab_size")
    if not hidden or not vocab:
        return None
    inter = _int(config, "intermediate_size")
    moe_inter = _int(config, "moe_intermediate_size")
    mixtral = _int(config, "num_local_experts")
    routed = mixtral or _int(config, "n_routed_experts") or _int(config, "num_experts")
    topk = _int(config, "num_experts_per_tok") if routed else 0
    expert = (inter if mixtral else moe_inter) if topk else 0
    if not expert:
        dense = inter
    else:
        shared = max(_int(config, "n_shared_experts") * moe_inter, _int(config, "shared_expert_intermediate_size"))
        dense = inter if _int(config, "first_k_dense_replace") and not mixtral else shared
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    method = method_of(config)  # the one reading of quantization_config (kvplan.models.quant)
    return ActivationDims(
        hidden_size=hidden,
        vocab_size=vocab,
        dense_intermediate=dense,
        expert_intermediate=expert,
        experts_per_token=topk if expert else 0,
        dtype_bytes=4 if dtype == "float32" else 2,
        moe_monolithic=bool(expert) and method == "mxfp4",
        residual_streams=max(_int(config, "hc_mult"), 1),
    )
