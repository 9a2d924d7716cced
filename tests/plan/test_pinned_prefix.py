"""plan/prefix.py pinned where a fresh mutation seed (17225) found its survivors: vLLM's reuse of a uniform model
before 0.26, the saved-compute ppm's floor, and EAGLE's dropped block at the edges (a 0-token match, 1-token
blocks)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.plan.prefix import no_hybrid_reuse, prefix_hit, replay_approximation, reusable
from tests.conftest import make_plan
from tests.engines.test_sglang_hybrid import _plan as sglang_hybrid
from tests.engines.test_sglang_hybrid import _qwen3_next as sglang_qwen3_next
from tests.engines.test_vllm_hybrid import _qwen3_next as vllm_qwen3_next
from tests.engines.test_vllm_hybrid import plan as vllm_hybrid


def _llama_vllm(**sets: object) -> PoolPlan:
    return make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", kv_cache_dtype="auto", **sets)


def test_a_uniform_model_on_vllm_before_0_26_reuses_its_prefix() -> None:
    # only a Mamba hybrid ran without prefix caching before vLLM 0.26 (ModelConfig.is_prefix_caching_supported:
    # "Hybrid models do not support prefix caching" for hybrids alone); a full-attention model on 0.19.0 keeps
    # enable_prefix_caching: min(1,000, 999) // 16 × 16 = 992 tokens of 16-token blocks
    p = _llama_vllm(engine_version="0.19.0", page_size="default")
    assert not no_hybrid_reuse(p)
    assert reusable(p, 1000, 1000)[0] == 992


def test_saved_ppm_is_floored_at_its_own_scale() -> None:
    # 2,048-token request, 1,536-token hit on SGLang's 64-token pages (24 pages): saved pairs 1,536 × 1,537 / 2 =
    # 1,180,416 of 2,048 × 2,049 / 2 = 2,098,176 -> 1,180,416 × 10^6 // 2,098,176 = 562,591 (562,591.51 floored)
    h = prefix_hit(make_plan(context_length="128K"), 2048, 1536)
    assert (h.pairs_saved, h.pairs_total, h.saved_ppm) == (1_180_416, 2_098_176, 562_591)


def test_eagle_drops_no_block_of_an_empty_match() -> None:
    # vLLM KVCacheManager.get_computed_blocks with use_eagle pops the last matched block only when one matched:
    # a 63-token hit on 64-token blocks matches none, so 0 tokens, never −64
    p = make_plan("glm-5.3-8xh200-vllm", context_length="128K")
    assert reusable(p, 2048, 63, eagle=True, lookahead=False)[0] == 0


def test_eagle_drops_the_one_block_of_a_one_token_match() -> None:
    # 1-token blocks: a 1-token hit matches one block, which EAGLE's pop removes: 0; a 5-token hit keeps 4. On vLLM
    # 0.17.1, which kept a given block size (0.18.0 refuses 1 for FLASH_ATTN's multiples of 16:
    # engines/vllm_defaults.BLOCK_SIZE_CHECKED_SINCE)
    p = _llama_vllm(page_size=1, engine_version="0.17.1")
    assert reusable(p, 10, 1, eagle=True, lookahead=False)[0] == 0
    assert reusable(p, 10, 5, eagle=True, lookahead=False)[0] == 4


def test_a_sliding_window_hybrid_on_vllm_before_0_26_reuses_its_prefix() -> None:
    # gpt-oss-120b's groups (full attention and a 128-token sliding window: per-token and per-window demands, no
    # per-request state) are not a Mamba hybrid: vLLM 0.19.0 keeps prefix caching for them
    # (ModelConfig.is_prefix_caching_supported refuses only hybrids with a Mamba state). 16-token blocks:
    # min(1,000, 999) // 16 × 16 = 992
    p = make_plan("glm-5.3-8xh200-vllm", model="gpt-oss-120b", engine_version="0.19.0", kv_cache_dtype="auto",
                  page_size="default")  # fmt: skip
    assert {d.per for pool in p.pools for d in pool.demands} == {"token", "window"}
    assert not no_hybrid_reuse(p)
    assert reusable(p, 1000, 1000)[0] == 992


def test_sglang_caps_the_match_at_l_minus_1_on_a_page_edge() -> None:
    # SGLang srt/managers/schedule_batch.py Req._compute_max_prefix_len: max_prefix_len = input_len − 1 (one token
    # is computed for the logits), then the radix match is whole pages. A fully cached 129-token request on GLM-5.3's
    # 64-token pages: min(129, 128) = 128, two whole pages, reused; L − 2 = 127 would keep only one (64)
    p = make_plan(context_length="128K")
    assert p.logical_page_tokens == 64
    assert reusable(p, 129, 129)[0] == 128
    # and a fully cached 128-token request: min(128, 127) = 127 rounds down to one page, 64; the whole 128 never
    assert reusable(p, 128, 128)[0] == 64
    # a 0-token hit, and EAGLE's bigram key on it (−1 unit), reuse nothing: 0, not a negative page
    assert prefix_hit(p, 2048, 0).reusable_tokens == 0
    assert reusable(p, 2048, 0, eagle=True)[0] == 0


def test_the_naive_claim_is_floored_to_the_ppm() -> None:
    # 2 of 3 tokens hit: the naive "hit ratio = compute saved" is 666,666.67 ppm, floored to 666,666
    assert prefix_hit(make_plan(context_length="128K"), 3, 2).naive_ppm == 666_666
    assert prefix_hit(make_plan(context_length="128K"), 4, 1).naive_ppm == 250_000  # exactly, not 249,999


def test_a_chunk_of_0_tokens_is_refused() -> None:
    with pytest.raises(InputError, match=r"^--chunk must be positive, got 0$"):
        prefix_hit(make_plan(context_length="128K"), 2048, 1024, chunk=0)
    assert prefix_hit(make_plan(context_length="128K"), 2048, 1024, chunk=1).suffix_chunks == 1024  # 1 is a chunk


def test_vllm_0_26_is_the_first_to_reuse_a_mamba_hybrids_prefix(tmp_path: Path) -> None:
    # kvplan.engines.vllm_mamba.HYBRID_PREFIX_CACHING_SINCE: vLLM 0.26.0 turns prefix caching on for Mamba hybrids
    # (ModelConfig.is_prefix_caching_supported); 0.25.0 runs Qwen3-Next without it. kvplan plans 0.26-0.27's
    # mamba_cache_mode 'all' not yet, so the rule is read at 0.26.0 on the 0.25.0 plan's pools
    p = vllm_hybrid(vllm_qwen3_next(tmp_path), engine_version="0.25.0", tp=4, weights_per_gpu="40GiB")
    assert no_hybrid_reuse(p)
    assert not no_hybrid_reuse(replace(p, engine_version="0.26.0"))


def test_the_replay_sentence_names_the_full_attention_pool(tmp_path: Path) -> None:
    # Qwen3-Next on SGLang: pools "full attention (12 layers)" (pages) and "mamba state (36 layers)" (slots); the
    # replay pages the first, the full-attention layers' pool, never the state slots
    p = sglang_hybrid(sglang_qwen3_next(tmp_path), tp=4)
    assert [x.name for x in p.hybrid_pools] == ["full attention (12 layers)", "mamba state (36 layers)"]
    assert replay_approximation(p).startswith(
        f"HYBRID, APPROXIMATED: the replay pages full attention (12 layers)'s {p.usable_pages:,} pages as if each "
        "request took one page per 1 tokens of its full-attention layers;"
    )
