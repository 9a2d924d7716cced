"""kvplan.perf.step's ``Batch.across``: under DP attention each rank schedules its own share of the requests
(SGLang ``DataParallelController`` → one ``Scheduler`` a rank; vLLM ``DPEngineCoreProc``, one ``EngineCore`` a
rank) and the MoE layers run every rank's tokens in lockstep."""

from __future__ import annotations

from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.perf.shape import step_shape
from kvplan.perf.step import Batch, parts


def test_a_rank_batch_across_four_ranks() -> None:
    # one rank: an 8,192-token chunk (33,558,528 causal pairs: 8,192 × 8,193 / 2), 3 decodes over 300 tokens, 4
    # sampled; four ranks at once: every count × 4, the verify width unchanged
    b = Batch(prefill_tokens=8192, prefill_pairs=33_558_528, decode_requests=3, decode_context=300, sampled=4)
    got = b.across(4)
    assert (got.prefill_tokens, got.prefill_pairs, got.decode_requests, got.decode_context, got.sampled) == (
        32_768, 134_234_112, 12, 1_200, 16)  # fmt: skip
    assert got.verify_tokens == 1 and got.tokens == 32_768 + 12
    assert b.across(1) is b


def test_each_dp_rank_reads_its_own_latent_and_the_experts_see_every_rank() -> None:
    # DeepSeek-V3 on 8 GPUs, DP attention 8: one request of 1,000 tokens on each rank. Its absorbed-MLA latent read is
    # 1,000 × 576 × 2 B × 61 layers = 70,272,000 B (test_step: test_mla_absorbed_decode_deepseek_v3); over all 8 ranks
    # 8 × that, and a GPU (its own rank) reads 1/8 of it: 70,272,000 B, the same as one request alone on one GPU
    shape = step_shape(load_model("deepseek-v3"))
    rank = Batch(decode_requests=1, decode_context=1000, sampled=1)
    got = {p.name: p for p in parts(shape, rank.across(8), Split.of(tp=8, dp_attention=8), "fp8", "fp8")}
    assert got["attention"].bytes == 70_272_000
    # the routed experts see 8 tokens, not 1: 1 − (1 − 8/256)^8 = 22.47... % of the experts touched, not 3.125 %
    routed_per_gpu = -(-653_908_770_816 // 8)  # fp8: 1 B a parameter, experts split 8 ways
    share = 10**6 - int(10**6 * (1 - 8 / 256) ** 8)
    assert got["expert GEMMs"].bytes == routed_per_gpu * share // 10**6
