"""kvplan.perf.step's DSA indexer latency: each indexer layer runs its own chain of small kernels every step
(SGLang python/sglang/srt/layers/attention/nsa/nsa_indexer.py ``Indexer``: q / k projections and rotary, fp8
quantization, paged MQA logits, top-k), priced as ``indexer_us`` a layer a step."""

from __future__ import annotations

from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.perf.coeffs import Coefficients
from kvplan.perf.peaks import Peaks
from kvplan.perf.shape import step_shape
from kvplan.perf.step import Batch, Part, parts, step_seconds

DECODE = Batch(decode_requests=4, decode_context=4000, sampled=4)


def test_glm5_runs_its_indexer_on_all_78_layers() -> None:
    # GLM-5 config.json: 78 layers, index_topk 2048, the indexer on every layer (test_step: 78 indexer layers)
    got = {p.name: p for p in parts(step_shape(load_model("glm-5")), DECODE, Split.of(tp=8), "fp8", "fp8")}
    assert got["indexer"].calls == 78 and got["indexer"].flops == got["indexer"].bytes == 0


def test_mla_without_an_indexer_has_none() -> None:
    got = {p.name for p in parts(step_shape(load_model("deepseek-v3")), DECODE, Split.of(tp=8), "fp8", "fp8")}
    assert "indexer" not in got


def test_the_indexer_is_priced_at_its_latency_a_layer() -> None:
    # 78 layers × 90 µs = 7.02 ms, whatever the peaks
    c = Coefficients(gpu_class="hopper", engine="sglang", versions=("0.5.0", "0.5.9"), family="mla", gemm_eff=0.5,
                     prefill_eff=0.5, attention_eff=0.5, mem_eff=0.5, link_eff=0.5, comm_us=8.0, layer_us=0.0,
                     indexer_us=90.0, fitted_on="test", heldout_mape=(0.1, 0.1, 0.1))  # fmt: skip
    peaks = Peaks(gpu_key="h200", gpu_class="hopper", bf16_flops_per_s=10**15, fp8_flops_per_s=10**15,
                  fp4_flops_per_s=0, hbm_bytes_per_s=4 * 10**12, link_bytes_per_s=10**12, source="test")  # fmt: skip
    assert abs(step_seconds((Part(name="indexer", flops=0, bytes=0, calls=78),), peaks, c) - 7.02e-3) < 1e-12
