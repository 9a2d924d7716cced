"""SGLang's max_running_requests with speculative decoding and none given: 48 (per dp worker, at most rows // 2).

SGLang 0.5.23 ``arg_groups/speculative_hook.py`` ``_handle_eagle_family``: ``if cfg.max_running_requests is None:
max_running_requests=48`` and logs "Max running requests is reset to 48 for speculative decoding."; the 0.4.5 wheel's
``ServerArgs.__post_init__`` has the same default under EAGLE (NEXTN resolves to EAGLE), the 0.4.4 wheel none.
Before, kvplan kept the memory estimate (2,048 on the default GLM-5.3 deployment), so req_to_token, the CUDA-graph
batch and the running-request check of an MTP deployment were those of 2,048 requests.
"""

from __future__ import annotations

from tests.conftest import make_plan


def _mrr(deploy: str = "glm-5.3-8xh200-sglang", model: str | None = None, **sets: object) -> tuple[int, str]:
    k = make_plan(deploy, model, **sets).knob("max_running_requests")
    return k.as_int(), k.origin


def test_mtp_resets_running_requests_to_48() -> None:
    assert _mrr()[0] == 2048  # no speculative decoding: min(clamp(int(rows / 1M × 512), 2048, 4096), rows // 2)
    n, origin = _mrr(speculative_num_draft_tokens=4)
    assert n == 48 and "reset to 48 for speculative decoding" in origin


def test_per_dp_worker_and_a_given_value_wins() -> None:
    # DP attention 4: the scheduler divides the 48 among the dp workers: 48 // 4 = 12 a worker
    assert _mrr(speculative_num_draft_tokens=4, dp_attention=4)[0] == 12
    # --max-running-requests given: the hook leaves it alone
    assert _mrr(speculative_num_draft_tokens=4, max_running_requests=100) == (100, "set")


def test_req_to_token_follows_the_48() -> None:
    # req_to_token = (mrr + 1) × (context_len + extra) × 4 B; with MTP 4 (a chain of 3 steps, topk 1) at page 64,
    # allocation_sizing.py get_req_to_token_extra_context_len: extra = max(4 + 4, 2 × max(3 × 1, 4) + 64 − 1) = 71
    # (was 63 = max(8, 64 − 1): the decode reserve left out)
    p = make_plan(speculative_num_draft_tokens=4)
    ctx = p.context_len
    assert p.extras["req_to_token_bytes"] == (48 + 1) * (ctx + 71) * 4


def test_only_from_sglang_0_4_5() -> None:
    # Llama-3.1-8B (GQA) on 1 × H100: 0.4.4 keeps the memory estimate, 0.4.5 takes the 48
    common = {"gpu": "h100", "tp": 1, "kv_cache_dtype": "auto", "context_length": 131072}
    old, _ = _mrr(model="llama-3.1-8b", engine_version="0.4.4", speculative_num_draft_tokens=4, **common)
    new, _ = _mrr(model="llama-3.1-8b", engine_version="0.4.5", speculative_num_draft_tokens=4, **common)
    assert new == 48 and old > 48
