"""SGLang's request limits (kvplan.engines.sglang_requests) at their boundaries (issue 26).

Sources, SGLang 0.5.23 (shared/reference/sglang-0.5.23.md §4 "ReqToTokenPool"):
- ``kv_cache_configurator.py resolve_max_num_reqs``: estimated = clamp(int(rows / context_len × 512), 2048, 4096);
  given: min(max(1, req // attn_dp_size), rows // 2) (warns when reduced); else min(estimated, rows // 2);
- ``speculative_hook.py _handle_eagle_family``: 48 when speculative decoding runs and none is given;
- ``memory_pool.py ReqToTokenPool``: (max_running_requests + 1) × (context_len + extra) int32;
- ``mem_cache/allocation_sizing.py get_req_to_token_extra_context_len``: extra = 4 + draft tokens; with speculative
  decoding and an allocation page (page × dcp) over 1, max(that, 2 × get_alloc_len_per_decode() + page × dcp − 1),
  where get_alloc_len_per_decode() = max(num_steps × topk, draft tokens) for a chain (topk 1).

The worked deployment (§9): GLM-5.3 FP8 on 8 × H200, 724,480 rows at dcp 1 whatever the context (the budget leaves
req_to_token to the slack), 1,048,576 tokens of context by default.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.sglang_requests import req_to_token_extra
from kvplan.models.deployment import load_deployment
from tests.conftest import make_plan

WORKED = {"pre_load_free": "143771MiB", "weights_per_gpu": "88GiB"}
CTX = 1_048_576


def test_the_estimate_reads_rows_over_context_as_a_fraction() -> None:
    # int(724,480 / 131,072 × 512) = int(2,830.0) = 2,830 inside [2048, 4096], under rows // 2 = 362,240
    # (rows // context_len would give 5 × 512 = 2,560); req_to_token = 2,831 × (131,072 + 4) × 4 = 1,484,304,624 B
    p = make_plan(context_length=131_072, **WORKED)
    assert (p.rows, p.max_running_requests) == (724_480, 2_830)
    assert p.extras["req_to_token_bytes"] == 1_484_304_624


def test_a_small_pool_caps_the_estimate_at_half_its_rows() -> None:
    # --max-total-tokens 4,000: 4,000 // 64 × 64 = 3,968 rows; min(2,048, 3,968 // 2 = 1,984) = 1,984
    # req_to_token = 1,985 × (1,048,576 + 4) × 4 = 8,325,725,200 B
    p = make_plan(max_total_tokens=4_000, **WORKED)
    assert (p.rows, p.max_running_requests) == (3_968, 1_984)
    assert p.extras["req_to_token_bytes"] == 8_325_725_200
    assert "KV pool holds 3,968 tokens, fewer than --context-length 1,048,576." in p.notes


def test_speculative_48_also_capped_at_half_the_rows() -> None:
    # --max-total-tokens 64: 64 rows; min(48, 64 // 2) = 32
    assert make_plan(max_total_tokens=64, speculative_num_draft_tokens=4, **WORKED).max_running_requests == 32


def test_speculative_48_per_dp_worker_never_below_one() -> None:
    # 48 // 32 = 1 and 48 // 64 = 0 -> max(1, 0) = 1 running request per dp worker
    fixed = {"mem_fraction_static": 0.886, "speculative_num_draft_tokens": 4, **WORKED}
    assert make_plan(nodes=4, tp=32, dp_attention=32, **fixed).max_running_requests == 1
    assert make_plan(nodes=8, tp=64, dp_attention=64, **fixed).max_running_requests == 1


def test_a_given_limit_per_dp_worker() -> None:
    # --max-running-requests 3 under dp 4: max(1, 3 // 4) = 1; req_to_token = 2 × (1,048,576 + 4) × 4 = 8,388,640 B
    one = make_plan(max_running_requests=3, dp_attention=4, **WORKED)
    assert (one.max_running_requests, one.extras["req_to_token_bytes"]) == (1, 8_388_640)
    # 100 // 4 = 25, not reduced by the pool: no warning
    quarter = make_plan(max_running_requests=100, dp_attention=4, **WORKED)
    assert quarter.max_running_requests == 25
    assert not [n for n in quarter.notes if "was reduced" in n]


def test_a_given_limit_over_half_the_rows_is_reduced_and_said() -> None:
    # min(max(1, 1,000,000), 724,480 // 2 = 362,240): the scheduler's warning, with both figures
    p = make_plan(max_running_requests=1_000_000, **WORKED)
    assert p.max_running_requests == 362_240
    assert (
        "max_running_requests was reduced from the requested 1000000 to 362240 (per dp worker) due to the "
        "available KV cache capacity"
    ) in p.notes


def test_the_short_pool_note_only_when_the_pool_is_shorter() -> None:
    # --max-total-tokens 65,536 (1,024 pages): a 65,536-token context fits exactly, 65,537 does not
    at = make_plan(context_length=65_536, max_total_tokens=65_536, **WORKED)
    over = make_plan(context_length=65_537, max_total_tokens=65_536, **WORKED)
    assert not [n for n in at.notes if "fewer than --context-length" in n]
    assert "KV pool holds 65,536 tokens, fewer than --context-length 65,537." in over.notes


def test_allowing_a_long_context_says_nothing_under_the_model_maximum() -> None:
    # SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN only matters above max_position_embeddings
    p = make_plan(allow_long_context=True, context_length=1_000, **WORKED)
    assert p.startup_error is None and not [n for n in p.notes if "context" in n.lower()]


def test_req_to_token_extra_with_mtp() -> None:
    # GLM-5.3, 4 draft tokens (a chain of 3 steps, topk 1), page 64: max(8, 2 × max(3, 4) + 64 − 1) = 71
    # req_to_token = 49 × (1,048,576 + 71) × 4 = 205,534,812 B (48 running, at most 3,968 // 2)
    p = make_plan(max_total_tokens=4_000, speculative_num_draft_tokens=4, **WORKED)
    assert p.extras["req_to_token_bytes"] == 205_534_812
    # dcp 8, 3 draft tokens: the allocation page is 64 × 8 = 512: max(7, 2 × max(2, 3) + 512 − 1) = 517
    # 49 × (1,048,576 + 517) × 4 = 205,622,228 B
    dcp8 = make_plan(dcp=8, attention_backend="flashmla_kv", speculative_num_draft_tokens=3, **WORKED)
    assert dcp8.extras["req_to_token_bytes"] == 205_622_228


def test_req_to_token_extra_cases() -> None:
    dep = load_deployment("glm-5.3-8xh200-sglang")
    # no speculative decoding: 4 + 0 = 4, whatever the page
    assert req_to_token_extra(dep, 64) == 4
    # page 1 (no page alignment): 4 + 5 = 9 (the reserve rule, 2 × 5 + 1 − 1 = 10, applies only from page 2)
    assert req_to_token_extra(replace(dep, speculative_num_draft_tokens=5), 1) == 9
    # a top-4 tree of 3 steps at page 64: ceil((63 + 3 + 63) / 64) = 2 pages a branch, 2 × 64 × 4 = 512 per decode;
    # max(8, 2 × 512 + 63) = 1,087
    tree = replace(dep, speculative_num_draft_tokens=4, speculative_eagle_topk=4)
    assert req_to_token_extra(tree, 64) == 1_087
    # a top-2 tree of 1 step (2 draft tokens) at page 64: (63 + 1 + 63) // 64 = 1 page a branch, 1 × 64 × 2 = 128;
    # max(4 + 2, 2 × 128 + 63) = 319 (one column more in the page count would make it 2 pages, 575)
    assert req_to_token_extra(replace(dep, speculative_num_draft_tokens=2, speculative_eagle_topk=2), 64) == 319
    # page 2, 4 draft tokens (3 steps), top-2: (1 + 3 + 1) // 2 = 2 pages, 2 × 2 × 2 = 8; max(8, 2 × 8 + 1) = 17
    assert req_to_token_extra(replace(dep, speculative_num_draft_tokens=4, speculative_eagle_topk=2), 2) == 17
    # 5 draft tokens (4 steps) there: (1 + 4 + 1) // 2 = 3 pages, 3 × 2 × 2 = 12; max(9, 2 × 12 + 1) = 25
    assert req_to_token_extra(replace(dep, speculative_num_draft_tokens=5, speculative_eagle_topk=2), 2) == 25
    # 3 draft tokens (2 steps), top-2 at page 64: (63 + 2 + 63) // 64 = 2 pages, 2 × 64 × 2 = 256; 2 × 256 + 63 = 575
    assert req_to_token_extra(replace(dep, speculative_num_draft_tokens=3, speculative_eagle_topk=2), 64) == 575


def test_a_hybrid_whose_state_slots_serve_no_request_is_refused() -> None:
    # resolve_max_num_reqs: --max-mamba-cache-size 4 with 5 state slots a request (_calculate_mamba_ratio: 3 + 2)
    # -> 4 // 5 = 0 running requests: SGLang's start-up error, with its figures
    p = make_plan(model="qwen3-next-80b-a3b", context_length="128K", page_size="default", max_mamba_cache_size=4)
    assert p.startup_error == (
        "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. max_mamba_cache_size=4, "
        "mamba_ratio=5, resulting max_num_reqs=0."
    )


def test_a_context_over_the_model_is_sglangs_refusal_with_both_figures() -> None:
    # configs/model_config.py: refused while the model config is built (GLM-5.3: max_position_embeddings 1,048,576)
    p = make_plan(context_length=2_000_000, **WORKED)
    assert p.startup_error is not None
    assert p.startup_error.startswith(
        "User-specified context_length (2000000) is greater than the derived context_length (1048576). "
    )


# ---- fresh seed 39767 (issue 26): the model's own maximum, the estimate's clamp, a state cap equal to rows // 2


def test_allowing_a_long_context_is_silent_at_the_model_maximum() -> None:
    # configs/model_config.py refuses only context_len > the derived 1,048,576 (GLM-5.3's max_position_embeddings):
    # at exactly 1,048,576 SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN changes nothing; one token more it is needed
    at = make_plan(allow_long_context=True, context_length=1_048_576, **WORKED)
    assert at.startup_error is None and not [n for n in at.notes if "is above the derived" in n]
    assert make_plan(context_length=1_048_576, **WORKED).startup_error is None  # the maximum itself starts
    over = make_plan(allow_long_context=True, context_length=1_048_577, **WORKED)
    assert over.startup_error is None
    assert [n for n in over.notes if n.startswith("context length 1,048,577 is above the derived 1,048,576")]


def test_the_estimate_is_clamped_to_2048_and_4096() -> None:
    # resolve_max_num_reqs: estimated = max(min(int(rows / context_len × 512), 4096), 2048), rows 724,480:
    # at 90,560 tokens int(724,480 / 90,560 × 512) = 4,096 exactly; at 65,536 int(5,660.0) = 5,660 -> 4,096;
    # at 1,048,576 int(353.75) = 353 -> 2,048; all under rows // 2 = 362,240
    assert make_plan(context_length=90_560, **WORKED).max_running_requests == 4_096
    assert make_plan(context_length=65_536, **WORKED).max_running_requests == 4_096
    assert make_plan(**WORKED).max_running_requests == 2_048


def test_a_state_cap_equal_to_half_the_rows_is_the_reduction_not_a_cap() -> None:
    # resolve_max_num_reqs (kv_cache_configurator.py): --max-running-requests 1,000 over --max-total-tokens 1,000
    # (page 1): min(1,000, 1,000 // 2) = 500; the state slots then min(500, 2,500 // 5 = 500) = 500, no smaller:
    # SGLang's warning is the reduction "from the requested 1000 to 500", and the knob stays "set"
    p = make_plan(model="qwen3-next-80b-a3b", context_length="128K", page_size="default", max_total_tokens=1_000,
                  max_mamba_cache_size=2_500, max_running_requests=1_000)  # fmt: skip
    assert (p.rows, p.max_running_requests, p.knob("max_running_requests").origin) == (1_000, 500, "set")
    assert (
        "max_running_requests was reduced from the requested 1000 to 500 (per dp worker) due to the available KV "
        "cache capacity"
    ) in p.notes


def test_the_estimate_is_capped_by_the_state_slots() -> None:
    # resolve_max_num_reqs without --max-running-requests: min(estimated (>= 2,048), rows // 2), then
    # min(that, max_mamba_cache_size // mamba_ratio) = min(.., 500 // 5 = 100) = 100 (Qwen3-Next: 3 + 2 slots)
    p = make_plan(model="qwen3-next-80b-a3b", context_length="128K", page_size="default", max_mamba_cache_size=500)
    assert p.rows // 2 >= 2_048
    assert p.max_running_requests == 100
