"""kvplan.perf's step model: FLOPs and bytes each part of a forward step costs, derived here from the models'
config.json shapes (the presets' ``config:``), and the roofline that turns them into time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.perf.coeffs import Coefficients
from kvplan.perf.peaks import Peaks
from kvplan.perf.shape import AttentionGroup, StepShape, step_shape
from kvplan.perf.step import Batch, Part, attention_part, chunk_pairs, parts, step_seconds

ONE = Split.of(tp=1)


def _part(name: str, model: str, b: Batch, split: Split = ONE, quant: str = "bf16") -> Part:
    return {p.name: p for p in parts(step_shape(load_model(model)), b, split, quant, quant)}[name]


def test_causal_pairs_of_a_chunk() -> None:
    # 4 new tokens after 0 cached: 1 + 2 + 3 + 4 = 10 pairs; after 6 cached: 4 × 6 more = 34
    assert chunk_pairs(4, 0) == 10 and chunk_pairs(4, 6) == 34


def test_deepseek_v3_experts_and_active_parameters() -> None:
    s = step_shape(load_model("deepseek-v3"))
    # config.json: n_routed_experts 256, num_experts_per_tok 8, first_k_dense_replace 3 of 61 layers
    assert (s.num_experts, s.experts_per_token) == (256, 8)
    # active: attention 11,413,422,080 + dense MLP 1,189,085,184 + shared 2,554,331,136 + router 106,445,312
    # + routed 653,908,770,816 × 8 / 256 = 20,434,649,088 + LM head 129,280 × 7,168 = 926,679,040:
    # 36,624,611,840, DeepSeek's "37B activated" less the input embedding, which multiplies nothing
    assert s.active_params() == 36_624_611_840


def test_gqa_decode_attention_llama_8b() -> None:
    # Llama-3.1-8B: 32 layers, 32 q heads, 8 kv heads, head_dim 128. One request decoding at 1,000 tokens:
    # QK + PV 2 × 32 × (128 + 128) × 1,000 × 32 layers = 524,288,000 FLOPs; K + V read
    # 1,000 × 8 × 256 × 2 B × 32 = 131,072,000 B
    p = _part("attention", "llama-3.1-8b", Batch(decode_requests=1, decode_context=1000, sampled=1))
    assert (p.flops, p.bytes) == (524_288_000, 131_072_000)


def test_mla_absorbed_decode_deepseek_v3() -> None:
    # absorbed MLA (SGLang forward_absorb / FlashMLA): 2 × 128 heads × (2 × 512 + 64) × 1,000 keys × 61 layers =
    # 16,990,208,000 FLOPs over the latent, read once: 1,000 × 576 × 2 B × 61 = 70,272,000 B
    p = _part("attention", "deepseek-v3", Batch(decode_requests=1, decode_context=1000, sampled=1))
    assert (p.flops, p.bytes) == (16_990_208_000, 70_272_000)


def test_dsa_decode_reads_top_k_and_scores_everything_glm5() -> None:
    # GLM-5: 78 layers, 64 heads, kv_lora 512 + rope 64, index_topk 2048, indexer (32 heads × 128) on all 78 layers.
    # At 10,000 tokens the MLA attends 2,048 keys: 2 × 64 × 1,088 × 2,048 × 78 = 22,246,588,416; the indexer
    # scores all 10,000: 2 × 32 × 128 × 10,000 × 78 = 6,389,760,000. Reads: 2,048 × 576 × 2 × 78 = 184,025,088
    # latent + 10,000 × (128 + 4) × 78 = 102,960,000 indexer K (fp8 + an fp32 scale)
    p = _part("attention", "glm-5", Batch(decode_requests=1, decode_context=10_000, sampled=1))
    assert (p.flops, p.bytes) == (22_246_588_416 + 6_389_760_000, 184_025_088 + 102_960_000)


def test_mla_latent_is_read_whole_by_each_attention_tp_rank() -> None:
    # TP8 without DP attention: heads split 8 ways (FLOPs / 8) but every rank reads the whole latent
    b = Batch(decode_requests=1, decode_context=1000, sampled=1)
    p = _part("attention", "deepseek-v3", b, Split.of(tp=8))
    assert (p.flops, p.bytes) == (16_990_208_000 // 8, 70_272_000)
    # DP attention 8: each rank runs its own requests with all heads, 1/8 of the reads on average
    q = _part("attention", "deepseek-v3", b, Split.of(tp=8, dp_attention=8))
    assert (q.flops, q.bytes) == (16_990_208_000 // 8, 70_272_000 // 8)


def test_dense_gemm_and_expert_reads() -> None:
    # Llama-3.1-8B decode token: 2 × (attention 1,342,177,280 + MLP 5,637,144,576 + LM head 525,336,576)
    p = _part("dense GEMMs", "llama-3.1-8b", Batch(decode_requests=1, decode_context=10, sampled=1))
    assert p.flops == 15_009_316_864
    # DeepSeek-V3, one token: 8 of 256 experts touched, 1/32 of the routed bytes read (fp8: 1 B a parameter)
    e = _part("expert GEMMs", "deepseek-v3", Batch(decode_requests=1, decode_context=10, sampled=1), quant="fp8")
    assert e.bytes == 653_908_770_816 * 31_250 // 10**6
    assert e.flops == 2 * 653_908_770_816 * 8 // 256


def _coeffs(**kw: float) -> Coefficients:
    base = dict(gemm_eff=0.5, prefill_eff=0.5, attention_eff=0.5, mem_eff=0.5, link_eff=0.5, comm_us=0.0, layer_us=0.0)
    return Coefficients(gpu_class="hopper", engine="sglang", versions=("0.5.0", "0.5.9"), family="mla",
                        fitted_on="test", heldout_mape=(0.1, 0.1, 0.1), **{**base, **kw})  # fmt: skip


PEAKS = Peaks(gpu_key="h200", gpu_class="hopper", bf16_flops_per_s=10**15, fp8_flops_per_s=2 * 10**15,
              fp4_flops_per_s=0, hbm_bytes_per_s=4 * 10**12, link_bytes_per_s=10**12, source="test")  # fmt: skip


def test_roofline_per_part() -> None:
    # 10^15 FLOPs at bf16 peak 10^15 × 0.5 = 2 s, 10^12 B at 4·10^12 × 0.5 = 0.5 s: compute bound, 2 s;
    # the same at fp8 (2·10^15): 1 s; 10^13 B memory bound: 5 s; 61 layers × 100 µs; all-reduce 10^12 B at
    # 10^12 × 0.5 = 2 s + 10 calls × 5 µs
    ps = (Part(name="dense GEMMs", flops=10**15, bytes=10**12), Part(name="expert GEMMs", flops=10**15, bytes=10**12,
          dtype="fp8"), Part(name="attention", flops=0, bytes=10**13), Part(name="layers", flops=0, bytes=0, calls=61),
          Part(name="all-reduce", flops=0, bytes=10**12, calls=10))  # fmt: skip
    t = step_seconds(ps, PEAKS, _coeffs(layer_us=100.0, comm_us=5.0))
    assert abs(t - (2 + 1 + 5 + 61e-4 + 2 + 5e-5)) < 1e-9


def test_fractions_of_a_second_and_of_a_flop_are_kept() -> None:
    # an all-reduce of 3·10^11 B at 10^12 × 0.5 B/s is 0.6 s (not floored to 0); 3 FLOPs half from prefill tokens:
    # 1.5 at the prefill efficiency (0.25) and 1.5 at the decode one (0.5) of 10^15 FLOP/s = 9·10^-15 s
    ar = Part(name="all-reduce", flops=0, bytes=3 * 10**11, calls=0)
    assert step_seconds((ar,), PEAKS, _coeffs()) == pytest.approx(0.6, rel=1e-12)
    g = Part(name="dense GEMMs", flops=3, bytes=0, prefill_ppm=500_000)
    assert step_seconds((g,), PEAKS, _coeffs(prefill_eff=0.25)) == pytest.approx(9e-15, rel=1e-12, abs=0)


def test_every_layer_and_each_draft_pass_pay_the_layers_latency() -> None:
    # a step's fixed latency is a layer's (Coefficients.layer_us) × the layers it runs: DeepSeek-V3's 61 (config
    # num_hidden_layers), GLM-5's 78, whatever the batch; the MTP draft module runs one layer a pass (draft_tokens),
    # only where a request decodes
    one = Batch(decode_requests=1, decode_context=10, sampled=1)
    assert _part("layers", "deepseek-v3", one).calls == 61
    assert _part("layers", "glm-5", Batch(prefill_tokens=4096, prefill_pairs=4096 * 4097 // 2)).calls == 78
    assert _part("layers", "deepseek-v3", replace(one, verify_tokens=3, draft_tokens=3)).calls == 64
    assert _part("layers", "deepseek-v3", Batch(prefill_tokens=8, prefill_pairs=36, draft_tokens=3)).calls == 61


def test_prefill_flops_price_at_the_prefill_efficiency() -> None:
    # half of 10^15 FLOPs from prefill tokens: 0.5·10^15 / (10^15 × 0.25) = 2 s + 0.5·10^15 / (10^15 × 0.5) = 1 s
    p = Part(name="dense GEMMs", flops=10**15, bytes=0, prefill_ppm=500_000)
    assert abs(step_seconds((p,), PEAKS, _coeffs(prefill_eff=0.25)) - 3.0) < 1e-9
    # a mixed vLLM step: 6 prefill tokens of 8 bring 750,000 ppm of the GEMM FLOPs
    s = {x.name: x for x in parts(step_shape(load_model("llama-3.1-8b")), Batch(prefill_tokens=6, prefill_pairs=21,
         decode_requests=2, decode_context=20, sampled=2), ONE, "bf16", "bf16")}  # fmt: skip
    assert s["dense GEMMs"].prefill_ppm == 750_000


def _shape(**kw: object) -> StepShape:
    base = dict(name="t", hidden=8, vocab=16, layers=2, dense_params=1000, routed_params=0, num_experts=0,
                experts_per_token=0, attention=())  # fmt: skip
    return StepShape(**{**base, **kw})  # type: ignore[arg-type]


def test_linear_attention_reads_and_writes_each_requests_state() -> None:
    # a linear-attention group of 2 layers, 1,000 bytes of state a request a layer: 3 decoding requests read and
    # write theirs (2 × 1,000 × (3 + 1) × 2 layers = 16,000 B: the state of the batch plus one, as step._attention
    # prices it) and update it at 4 × state FLOPs a token over the layers, halved: 4 × 1,000 × 3 × 2 // 2 = 12,000
    g = AttentionGroup(kind="linear", layers=2, q_heads=4, state_bytes=1000)
    p = attention_part(_shape(attention=(g,)), Batch(decode_requests=3, sampled=3), ONE)
    assert (p.flops, p.bytes) == (12_000, 16_000)


def test_tp_all_reduce_moves_two_ring_passes_of_the_activations() -> None:
    # tp 8: two all-reduces a layer of tokens × hidden bf16 (2 × 2 layers × 5 tokens × 8 × 2 B = 320 B), a ring
    # moving 2 (tp − 1) / tp of it across each link: 320 × 2 × 7 // 8 = 560 B, in 2 × 2 layers = 4 calls
    ar = {p.name: p for p in parts(_shape(), Batch(prefill_tokens=5, sampled=1), Split.of(tp=8), "bf16", "bf16")}
    assert (ar["all-reduce"].bytes, ar["all-reduce"].calls) == (560, 4)


def test_the_mtp_draft_reads_one_layers_share_and_the_experts_one_token_touches() -> None:
    # 4 routed experts, 2 a token; one decoding request: it touches 1 − (1 − 2/4)^1 = 50 % of them. A draft pass
    # reads a layer's share of the dense weights (weight_bytes_per_gpu's, the LM head's 256 B among them: 2,256 B)
    # and of the touched experts (8,000 B × 50 %), and the bf16 LM head: (2,256 + 4,000) // 2 + 16 × 8 × 2 = 3,384 B;
    # two passes: 6,768 B
    s = _shape(routed_params=4000, num_experts=4, experts_per_token=2)
    p = {q.name: q for q in parts(s, Batch(decode_requests=1, sampled=1, draft_tokens=2), ONE, "bf16", "bf16")}
    assert p["draft"].bytes == 2 * ((2256 + 4000) // 2 + 256) == 6768
    # its FLOPs: each pass runs each of 3 requests' tokens through a layer's share of the dense and active expert
    # parameters ((1,000 + 4,000 × 2 / 4) / 2 layers = 1,500) and the LM head (16 × 8 = 128): 2 × 3 × 2 × 1,628
    three = {q.name: q for q in parts(s, Batch(decode_requests=3, sampled=3, draft_tokens=2), ONE, "bf16", "bf16")}
    assert three["draft"].flops == 2 * 3 * 2 * (1500 + 128) == 19_536


def test_mla_prefill_is_unabsorbed_and_decode_goes_as_the_requests() -> None:
    # DeepSeek-V3 (config.json: 128 heads, qk_nope 128 + rope 64 = 192, v_head_dim 128, 61 layers). A prefill of 100
    # new tokens (100 × 101 / 2 = 5,050 causal pairs) runs unabsorbed (SGLang forward_normal): 2 × 128 × (192 + 128)
    # × 5,050 × 61 = 25,235,456,000 FLOPs, nothing cached read. Three requests decoding at a mean of 1,000 keys:
    # three times one's 16,990,208,000 FLOPs and 3 × 1,000 × 576 × 2 B × 61 = 210,816,000 B of latent
    pre = _part("attention", "deepseek-v3", Batch(prefill_tokens=100, prefill_pairs=chunk_pairs(100, 0), sampled=1))
    assert (pre.flops, pre.bytes) == (25_235_456_000, 0)
    dec = _part("attention", "deepseek-v3", Batch(decode_requests=3, decode_context=3000, sampled=3))
    assert (dec.flops, dec.bytes) == (3 * 16_990_208_000, 210_816_000)


def test_a_sliding_window_caps_the_prefill_pairs_at_its_width() -> None:
    # gpt-oss-120b (config.json: 36 layers alternating sliding_attention (window 128) and full_attention, 64 heads of
    # 64, 8 KV heads). A prefill of 1,000 tokens (500,500 causal pairs): the 18 windowed layers attend at most 128
    # keys a token, 1,000 × 128 = 128,000 pairs: 2 × 64 × (64 + 64) × 128,000 × 18 = 37,748,736,000 FLOPs; the 18
    # full layers all 500,500: 147,603,456,000
    b = Batch(prefill_tokens=1000, prefill_pairs=chunk_pairs(1000, 0), sampled=1)
    assert _part("attention", "gpt-oss-120b", b).flops == 37_748_736_000 + 147_603_456_000


def test_two_tp_ranks_all_reduce() -> None:
    # tp 2: each of the 32 layers all-reduces its attention and MLP outputs (2 calls a layer, 64 in all), one token of
    # 4,096 bf16 values each, 2 (tp − 1) / tp = 1 pass of it over each link: 2 × 32 × 1 × 4,096 × 2 B = 524,288 B
    p = _part("all-reduce", "llama-3.1-8b", Batch(decode_requests=1, decode_context=10, sampled=1), Split.of(tp=2))
    assert (p.calls, p.bytes) == (64, 524_288)
