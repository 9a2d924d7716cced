"""Issue 29 item 5: vLLM --quantization fp8 on a bf16 checkpoint (kvplan.engines.online_quant).

vLLM ``model_executor/layers/quantization/fp8.py``: a checkpoint that is not fp8-serialized gets
``Fp8OnlineLinearMethod`` on every LinearBase (``process_weights_after_loading``: ``ops.scaled_fp8_quant
(layer.weight)``, one fp32 scale per tensor) and ``Fp8MoEMethod`` on FusedMoE; ``VocabParallelEmbedding`` /
``ParallelLMHead`` and the norms keep bf16. The KV cache follows the model dtype (``kv_cache_dtype auto``).

Llama-3.1-70B (config.json: hidden 8192, 80 layers, 64 heads, 8 kv heads, head_dim 128, intermediate 28672,
vocab 128256, untied), one GPU:
- linear weights a layer: q 8192×8192 + k 8192×1024 + v 8192×1024 + o 8192×8192 = 150,994,944;
  gate/up/down 3 × 8192 × 28672 = 704,643,072; 855,638,016 × 80 = 68,451,041,280 parameters: 2 B in bf16, 1 B
  after Fp8OnlineLinearMethod, so fp8 holds 68,451,041,280 B fewer;
- kept in bf16: embed_tokens + lm_head 2 × 128256 × 8192 = 2,101,346,304 params (4,202,692,608 B), the norms
  (2 × 80 + 1) × 8192 = 1,318,912 params (2,637,824 B);
- fp8 total: 68,451,041,280 + 4,202,692,608 + 2,637,824 = 72,656,371,712 B, plus what vLLM holds beyond the
  checkpoint (kvplan.models.additions, the same with and without --quantization).
"""

from __future__ import annotations

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.launch import launch_command

ONE_H100 = ("model=llama-3.1-70b", "gpu=h100", "tp=1", "gpus_per_node=1", "context_length=4K", "kv_cache_dtype=auto")


def _plan(*sets: str, deploy: str = "glm-5.3-8xh200-vllm") -> PoolPlan:
    dep = load_deployment(deploy, sets)
    return plan_pool(load_model(dep.model), dep)


def _weights(p: PoolPlan) -> int:
    term = next(t for t in p.chain if t.label == "weights per GPU")
    assert term.bytes is not None
    return term.bytes


def test_fp8_on_bf16_llama_70b_halves_the_linear_weights_only() -> None:
    bf16, fp8 = _plan(*ONE_H100), _plan(*ONE_H100, "quantization=fp8")
    assert _weights(bf16) - _weights(fp8) == 68_451_041_280
    additions = _weights(bf16) - (2 * 68_451_041_280 + 4_202_692_608 + 2_637_824)
    assert _weights(fp8) == 72_656_371_712 + additions
    # bf16 does not load on one H100 (80 GiB); fp8 does, and its pool is positive
    assert bf16.startup_error is not None and "loading them runs out of memory" in bf16.startup_error
    assert fp8.startup_error is None and fp8.rows > 0


def test_kv_stays_at_the_model_dtype_unless_kv_cache_dtype_is_set() -> None:
    bf16, fp8 = _plan(*ONE_H100), _plan(*ONE_H100, "quantization=fp8")
    assert fp8.cell == bf16.cell and fp8.kv_dtype == bf16.kv_dtype
    # auto follows config.json's torch_dtype bfloat16, not the weights: 80 layers × 8 kv heads × 128 × (K + V) × 2 B
    assert fp8.cell.main_bytes == 80 * 8 * 128 * 2 * 2
    fp8_kv = _plan(*ONE_H100[:-1], "quantization=fp8", "kv_cache_dtype=fp8")
    assert fp8_kv.cell.main_bytes * 2 == fp8.cell.main_bytes  # 1-byte elements where bf16 had 2


def test_an_fp8_checkpoint_is_read_as_is() -> None:
    # GLM-5.3-FP8 already carries fp8 128x128 blocks: --quantization fp8 agrees with its config; nothing changes
    a, b = _plan(), _plan("quantization=fp8")
    assert (_weights(a), a.rows) == (_weights(b), b.rows)


def test_a_4_bit_checkpoint_is_refused_and_sglang_is_not_planned() -> None:
    # gpt-oss-120b ships MXFP4 experts: vLLM refuses a --quantization that differs from the checkpoint's method
    with pytest.raises(InputError, match="quantized below 8 bits"):
        _plan("model=gpt-oss-120b", "quantization=fp8")
    with pytest.raises(InputError, match="quantization is a vLLM knob"):
        load_deployment("glm-5.3-8xh200-sglang", ("quantization=fp8",))


def test_the_launch_command_carries_it() -> None:
    launch = launch_command(_plan(*ONE_H100, "quantization=fp8"), "llama-3.1-70b")
    assert launch.argv[launch.argv.index("--quantization") + 1] == "fp8"
