"""GLM-5.3-Flash on vLLM 0.33.0 (kvplan.engines.vllm_hybrid._glm5_next): one block id pool, six packed groups.

vLLM's rules (the 0.33.0 source, ``vllm/`` paths):
- MLA: ``platforms/cuda.py`` on SM90 with head_size 512 (kv_lora 512 + rope 0) puts FLASHINFER_MLA_SPARSE_SM90 first;
  raw fp8 rows of 512 B (``--kv-cache-dtype fp8``), block stride aligned to one row (``align_blocks_to_rows``);
- KDA: ``MambaSpec``, conv bf16 + recurrent fp32 (``kda_state_dtype``); at tp 8 (8 heads of 128):
  3 × 3,072 × 3 × 2 + 8 × 128 × 128 × 4 = 18,432 + 524,288 = 542,720 B a layer;
- block: preliminary 128 (``_preferred_block_size_for_backends``: the smallest lcm of MultipleOf(64), [128, 256] and
  1), then ``_align_hybrid_block_size``: lcm(max(128, 128), FlashKDA checkpoint 16) × cdiv(542,720, 128 × 512) =
  128 × 9 = 1,152 tokens (a multiple of lcm(64, 4 × 32, 1) = 128); the KDA page is padded to 1,152 × 512 = 589,824 B;
- indexer: ``Glm5NextIndexerCache``, MLAAttentionSpec with tokens_per_state 4: 1,152 / 4 × 132 = 38,016 B, block
  stride MultipleOf(256) → a page of gcd(256, 1,152) = 128 tokens = 32 × 132 = 4,224 B;
- tail ring: ``Glm5NextTailCache``, CircularBufferSpec of 4 slots × [K, gate] × 128 × bf16 = 2,048 B, 1 block a request;
- ``_get_packed_kv_cache_groups``: buckets KDA (34), MLA + indexer (11 + 11, mixed: at least 11 repeats a group),
  ring (11); repeats = _approximate_gcd([34, 11, 11], 11) = 12 (padding 2 + 1 + 1 = 4; 11 would pad 10); the MLA +
  indexer bucket stays one group of 11 × (589,824 + 38,016) = 6,906,240 B (the anchor); the KDA bucket splits into
  max(cdiv(34, 12), cdiv(34, 6,906,240 // 589,824 = 11)) = 4 groups; the ring stays 1 group;
- ``_get_kv_cache_bytes_per_block``: round_up(6,906,240, lcm(512, 4,224) = 16,896) = 6,910,464 B a block id;
- a request: cdiv(tokens, 1,152) + 4 × 3 KDA blocks ('align': 2 + one FlashKDA checkpoint) + 1 ring block.

Published cross-checks: local-inference-lab/vllm#646 (GLM-5.3-Flash on a vLLM of this generation) names the split
cache groups "[9, 9, 8, 8, 11]" before a later rebalancing: the 34 KDA layers in 4 groups of 9, 9, 8, 8 (layers[i::4])
and a group of 11; MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#94 counts "MLA + kpool tail + 4 mamba" groups in one
shared BlockPool; LMCache/LMCache#5042's kv describe of GLM-5.3-Flash shows 1,152 tokens a block for the 11-layer MLA
group (67 layers: 34 + 11 + 11 + 11).
"""

from __future__ import annotations

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.vllm_hybrid import approximate_gcd
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.admit import Request, admit
from kvplan.plan.budget import pool_needs


@pytest.fixture(scope="module")
def plan():  # type: ignore[no-untyped-def]
    return plan_pool(load_model("glm-5.3-flash"), load_deployment("glm-5.3-8xh200-vllm"))


def test_backend_block_and_groups(plan) -> None:  # type: ignore[no-untyped-def]
    assert plan.knob("attention_backend").value == "FLASHINFER_MLA_SPARSE_SM90"
    assert plan.knob("mla_layout").value == "fp8"  # raw fp8 rows: kv_lora 512 + rope 0 = 512 B
    assert plan.page_tokens == 1_152 == 128 * -(-542_720 // (128 * 512))
    assert approximate_gcd([34, 11, 11], 11) == 12
    assert plan.extras["kv_cache_groups"] == 1 + 4 + 1
    assert plan.extras["bytes_per_block"] == 6_910_464 == -(-(11 * (589_824 + 38_016)) // 16_896) * 16_896
    assert plan.extras["state_bytes"] == 542_720
    # the KDA bucket split: layers[i::4] of 34 → 9, 9, 8, 8 (local-inference-lab/vllm#646: "[9, 9, 8, 8, 11]")
    assert [len(range(34)[i::4]) for i in range(4)] == [9, 9, 8, 8]
    assert any("4 KDA state groups of at most 9 layers" in n for n in plan.notes)


def test_blocks_and_log_figures(plan) -> None:  # type: ignore[no-untyped-def]
    # num_blocks = available // 6,910,464 (the available KV memory of vLLM's chain for this deployment)
    assert plan.extras["num_blocks"] == plan.available_bytes // 6_910_464 == 13_207
    # max_model_len 524,288: cdiv(524,288, 1,152) = 456 MLA + indexer blocks + 12 KDA + 1 ring = 469 a request;
    # "GPU KV cache size" = int(13,207 / 469 × 524,288) tokens
    assert plan.extras["blocks_per_request"] == 456 + 12 + 1 == 469
    assert plan.logged_tokens == int(13_207 / 469 * 524_288) == 14_763_905


def _pool_check(r):  # type: ignore[no-untyped-def]
    return next(c for c in r.checks if c.name == "pool: vLLM block pool")


def test_128k_golden(plan) -> None:  # type: ignore[no-untyped-def]
    r = admit(plan, Request(ctx_tokens=131_072))
    # cdiv(131,072, 1,152) = 114 + 12 + 1 = 127 blocks; 13,206 usable (block 0 is the null block) // 127 = 103
    assert r.admitted and (_pool_check(r).need, _pool_check(r).have) == (127, 13_206) and r.max_concurrent == 103
    (need,) = pool_needs(plan, 131_072)
    assert {d.kind: (d.units, d.bytes) for d in need.demands} == {
        "MLA + indexer K": (114, 114 * 6_910_464),
        "KDA state": (12, 12 * 6_910_464),
        "indexer tail ring": (1, 6_910_464),
    }


def test_state_blocks_dominate_short_requests(plan) -> None:  # type: ignore[no-untyped-def]
    r = admit(plan, Request(ctx_tokens=4_096))
    # cdiv(4,096, 1,152) = 4 attention blocks but 12 + 1 state and ring blocks: 17 a request, 13,206 // 17 = 776
    assert _pool_check(r).need == 17 and r.max_concurrent == 776


def test_speculative_decoding_is_planned_and_dcp_refused_in_one_line() -> None:
    # speculative decoding was refused here; it is planned now (tests/engines/test_hybrid_spec_glm5_next.py derives
    # the groups: the MTP layer makes 12 MLA layers, 1 + 3 + 1 groups)
    dep = load_deployment("glm-5.3-8xh200-vllm", ["speculative_num_draft_tokens=3"])
    assert plan_pool(load_model("glm-5.3-flash"), dep).extras["kv_cache_groups"] == 1 + 3 + 1
    with pytest.raises(InputError, match=r"GLM-5\.3-Flash with decode context parallel"):
        plan_pool(load_model("glm-5.3-flash"), load_deployment("glm-5.3-8xh200-vllm", ["dcp=2"]))
