"""kvplan/engines/online_quant.py pinned (mutation check, seed of the run in README: 13 survivors of 25).

vLLM ``model_executor/layers/quantization/fp8.py``: ``Fp8OnlineLinearMethod`` stores each weight of a bf16 /
fp16 linear layer as one fp8 byte (``ops.scaled_fp8_quant(layer.weight)``; the per-tensor fp32 scale, 4 B a
module, is left out as the module says). A checkpoint already serialized in fp8 (``is_checkpoint_fp8_serialized``)
is read as it is; a 4-bit one carries its own quantization_config, which vLLM refuses to mix with
``--quantization fp8`` (``ModelConfig._verify_quantization``: "Quantization method specified in the model config
(...) does not match the quantization method specified in the `quantization` argument").
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines.online_quant import OnlineFp8Group, with_online_quant
from kvplan.errors import InputError
from kvplan.models.arch import ParamGroup, Split
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

WHOLE = Split.of(tp=1)
TP8 = Split.of(tp=8)


def _fp8_dep(model: str) -> object:
    return load_deployment("glm-5.3-8xh200-vllm", (f"model={model}", "quantization=fp8"))


def test_each_bf16_linear_weight_becomes_one_byte() -> None:
    bf16 = load_model("llama-3.1-70b")
    fp8 = with_online_quant(bf16, _fp8_dep("llama-3.1-70b"))  # type: ignore[arg-type]
    groups = [g for g in fp8.param_groups if isinstance(g, OnlineFp8Group)]
    # q, k, v, o and gate/up/down: 68,451,041,280 parameters (test_online_quant.py), one byte each
    assert sum(g.params for g in groups) == 68_451_041_280
    for g in groups:
        assert g.bytes_per_gpu(WHOLE) == g.params  # 2 B -> 1 B a weight
        assert g.bytes_per_param_num == g.bytes_per_param_den  # the ratio the weights line reads: 1 B a weight
        assert g.bytes_per_gpu(TP8) == -(-g.inner.bytes_per_gpu(TP8) // 2)  # each rank's slice halved, rounded up
    kept = {g.name for g in fp8.param_groups if not isinstance(g, OnlineFp8Group)}
    assert {"embeddings", "norms"} <= kept  # VocabParallelEmbedding / ParallelLMHead and the norms keep bf16
    assert fp8.weights_summary is not None and "quantized to fp8 at load" in fp8.weights_summary


def test_an_fp8_checkpoint_comes_back_unchanged() -> None:
    # GLM-5.3-FP8 (128x128 block scales: a little over 1 B a weight): --quantization fp8 agrees with it
    arch = load_model("glm-5.3")
    assert with_online_quant(arch, _fp8_dep("glm-5.3")) is arch  # type: ignore[arg-type]


def test_a_per_tensor_fp8_checkpoint_of_exactly_one_byte_a_weight_is_not_refused() -> None:
    # fp8 with one scale per tensor stores exactly 1 B a weight: 8 bits, not "below 8 bits"
    arch = load_model("llama-3.1-8b")

    def one_byte(g: ParamGroup) -> ParamGroup:
        linear = g.name in ("attention", "dense_mlp")
        return ParamGroup(name=g.name, params=g.params, bytes_per_param_num=1, split=g.split) if linear else g

    fp8_ckpt = replace(arch, param_groups=tuple(one_byte(g) for g in arch.param_groups))
    assert with_online_quant(fp8_ckpt, _fp8_dep("llama-3.1-8b")) is fp8_ckpt  # type: ignore[arg-type]


def test_the_refusal_names_the_checkpoint_it_read() -> None:
    arch = load_model("gpt-oss-120b")
    assert arch.weights_summary  # the MXFP4 experts, as the weights line says them
    with pytest.raises(InputError) as e:
        with_online_quant(arch, _fp8_dep("gpt-oss-120b"))  # type: ignore[arg-type]
    assert f"({arch.weights_summary})" in str(e.value) and "quantized below 8 bits" in str(e.value)


def test_the_bf16_layers_an_fp8_checkpoint_left_stay_bf16() -> None:
    # GLM-5.3-Flash's FP8 checkpoint keeps its linear attention, indexer and vision tower in bf16 (2 B a weight)
    # beside fp8 layers (1 B). vLLM's Fp8Config.get_quant_method on an fp8-serialized checkpoint gives the
    # skipped layers UnquantizedLinearMethod, and --quantization fp8 quantizes nothing online: the weights are
    # the checkpoint's. Before: the bf16 groups were halved as if vLLM quantized them at load.
    arch = load_model("glm-5.3-flash")
    per_weight = {g.name: g.bytes_per_gpu(WHOLE) / g.params for g in arch.param_groups}
    assert per_weight["linear_attention"] >= 2 > per_weight["dense_mlp"] >= 1  # the premise: fp8 beside bf16
    assert with_online_quant(arch, _fp8_dep("glm-5.3-flash")) is arch  # type: ignore[arg-type]
