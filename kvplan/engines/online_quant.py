"""vLLM ``--quantization fp8`` on a bf16 / fp16 checkpoint: the weights as vLLM holds them after loading.

vLLM ``model_executor/layers/quantization/fp8.py``: with a checkpoint that is not fp8-serialized, ``Fp8Config``
gives every ``LinearBase`` layer ``Fp8OnlineLinearMethod`` ("loads a full precision checkpoint and quantizes
weights during loading"; ``process_weights_after_loading``: ``ops.scaled_fp8_quant(layer.weight)``, one fp32
scale per tensor) and every ``FusedMoE`` ``Fp8MoEMethod`` (the experts quantized the same way). What is not a
linear layer keeps the checkpoint's dtype: ``VocabParallelEmbedding`` and ``ParallelLMHead`` (kvplan's
'embeddings' group), the MoE router (``ReplicatedLinear(..., quant_config=None)`` in DeepSeek-V3 and Qwen3-MoE),
the norms. The KV cache is not touched: ``kv_cache_dtype auto`` still follows the model dtype (fp8 KV needs
``kv_cache_dtype``). A checkpoint already in fp8 is read as is (the config's method is fp8); one in 4 bits is
refused by vLLM, as its quantization_config and the argument disagree.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan import record
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch, ParamGroup, Split
from kvplan.models.deploy import Deployment

KEPT = frozenset({"embeddings", "router", "norms", "rotary_cache", "engine_additions", "hyper_connections", "mhc"})
"""Groups that are not linear layers vLLM's Fp8Config quantizes (or are no weights at all)."""


@record(kw_only=True)
class OnlineFp8Group(ParamGroup):
    """A bf16 / fp16 (or float32) linear group after Fp8OnlineLinearMethod: one byte a weight (the per-tensor
    fp32 scale, 4 B a module, is left out: under 1 KiB a layer)."""

    inner: ParamGroup

    def bytes_per_gpu(self, split: Split) -> int:
        return self._one_byte(self.inner.bytes_per_gpu(split))

    def bytes_on(self, split: Split, *, engine: str | None, with_mtp: bool, moe_backend: str | None = None) -> int:
        return self._one_byte(self.inner.bytes_on(split, engine=engine, with_mtp=with_mtp, moe_backend=moe_backend))

    def _one_byte(self, inner_bytes: int) -> int:
        """The inner group's bytes over its bytes a parameter (2 in bf16 / fp16, 4 under --dtype float32)."""
        return -(-inner_bytes * self.inner.bytes_per_param_den // self.inner.bytes_per_param_num)


_WHOLE = Split.of(tp=1)


def _bytes_per_param(g: ParamGroup) -> float:
    """What the group really holds a parameter on one GPU (an MXFP4 group's own layout, block scales included)."""
    return g.bytes_per_gpu(_WHOLE) / g.params


def _linear(g: ParamGroup) -> bool:
    return g.name not in KEPT and g.params > 0 and type(g).__name__ not in ("BufferGroup", "AdditionsGroup")


def with_online_quant(arch: ModelArch, dep: Deployment) -> ModelArch:
    """The model as the engine holds it after ``--quantization``: bf16 linear groups in fp8 (module docstring)."""
    if dep.quantization is None:
        return arch
    linear = [g for g in arch.param_groups if _linear(g)]
    if any(_bytes_per_param(g) < 1 for g in linear):
        raise InputError(
            f"quantization={dep.quantization}: {arch.name}'s checkpoint is quantized below 8 bits "
            f"({arch.weights_summary or 'its quantization_config'}); vLLM refuses a --quantization that differs "
            "from the checkpoint's method"
        )
    if not all(_bytes_per_param(g) >= 2 for g in linear):
        # an fp8 checkpoint (is_checkpoint_fp8_serialized): vLLM reads its own fp8 weights, and the layers it left
        # in bf16 (ignored_layers) get UnquantizedLinearMethod (Fp8Config.get_quant_method): nothing changes
        return arch
    groups: Any = tuple(_fp8(g) if _linear(g) else g for g in arch.param_groups)
    summary = "bf16 linear weights quantized to fp8 at load (vLLM Fp8OnlineLinearMethod, per-tensor scales)"
    return replace(arch, param_groups=groups, measured_weights=(), weights_summary=summary)


def _fp8(g: ParamGroup) -> OnlineFp8Group:
    return OnlineFp8Group(
        name=g.name,
        params=g.params,
        bytes_per_param_num=1,
        split=g.split,
        layer_span=g.layer_span,
        inner=g,
    )
