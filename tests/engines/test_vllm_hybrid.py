"""vLLM 0.33.0 hybrid KV cache manager goldens (kvplan/engines/vllm_hybrid.py), one per kind, each derived from the
vLLM source (wheel vllm-0.33.0, paths under ``vllm/``):

- groups: ``v1/core/kv_cache_planning.py _get_kv_cache_groups_uniform_page_size`` (group size = the smallest bucket,
  or the largest when under 1.5 × the smallest; cdiv(layers, size) groups a bucket);
- bytes per block: ``_get_kv_cache_bytes_per_block`` = the widest group's pages; num_blocks = available // it;
- per request: ``v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config`` = Σ groups
  cdiv(max_memory_usage_bytes, page); full attention cdiv(L, block); ``SlidingWindowSpec`` cdiv(min(window - 1 +
  2 × mnbt, L), block) + 1; ``MambaSpec`` 2 + checkpoint blocks ('align', prefix caching on by default);
- "GPU KV cache size" = int(num_blocks / per request × L) (``get_kv_cache_capacity``);
- Mamba alignment: ``platforms/interface.py _align_hybrid_block_size``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.engines.common import Demand, PoolPlan
from kvplan.engines.vllm_hybrid import group_size_of
from kvplan.errors import InputError, PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

runner = CliRunner(env={"KVPLAN_FORMAT": None})
VLLM = "glm-5.3-8xh200-vllm"
KV40 = "40GiB"  # --kv-cache-memory-bytes: the budget is fixed, so the goldens test the pool arithmetic alone


def plan(model: str, **sets: object) -> PoolPlan:
    base: dict[str, object] = {"kv_cache_dtype": "auto", "max_num_batched_tokens": 8192, "kv_cache_memory": KV40}
    dep = load_deployment(VLLM, [f"{k}={v}" for k, v in {**base, **sets}.items()])
    return plan_pool(load_model(model), dep)


# --------------------------------------------------------------------------- sliding window (gpt-oss-120b)


def test_gpt_oss_sliding_window_and_full_groups() -> None:
    p = plan("gpt-oss-120b", tp=1, context_length=131_072)
    # FLASH_ATTN on H200: block 16 (DEFAULT_BLOCK_SIZE); page = 16 × 8 kv heads × (64 + 64) × 2 B = 32,768 B for
    # both kinds; 18 full + 18 sliding layers: group size 18, 2 groups; bytes per block = 18 × 32,768 = 589,824
    assert (p.extras["block_size"], p.extras["page_bytes"], p.extras["group_size"]) == (16, 32_768, 18)
    assert p.extras["kv_cache_groups"] == 2 and p.extras["bytes_per_block"] == 589_824
    # num_blocks = 40 GiB // 589,824 = 42,949,672,960 // 589,824 = 72,817
    assert p.extras["num_blocks"] == 72_817
    # per request at 131,072: full 131,072 / 16 = 8,192; window min(128 - 1 + 2 × 8,192, 131,072) = 16,511
    # → cdiv(16,511, 16) + 1 = 1,032 + 1 = 1,033; 8,192 + 1,033 = 9,225 blocks
    assert p.extras["blocks_per_request"] == 9_225
    # GPU KV cache size = int(72,817 / 9,225 × 131,072) = int(7.8934… × 131,072) = 1,034,609 tokens
    assert p.logged_tokens == 1_034_609
    (pool,) = p.pools
    assert (pool.capacity, pool.unit_bytes, pool.page_tokens) == (72_816, 589_824, 16)  # the null block excluded
    assert pool.need(131_072) == 9_225
    assert pool.demands[1] == Demand("sliding window 128", "window", window=16_511, units=1, extra=1)


def test_gpt_oss_is_bound_by_token_pages() -> None:
    (pool,) = plan("gpt-oss-120b", tp=1, context_length=131_072).pools
    full, window = (d.need(131_072, pool.page_tokens) for d in pool.demands)
    # the full-attention group takes 8,192 of the 9,225 blocks: token pages bind, the window adds its fixed 1,033
    assert (full, window) == (8_192, 1_033)
    # 72,816 usable blocks // 9,225 = 7 requests of 131,072 tokens at once
    assert pool.fits(131_072) == 7


def test_gpt_oss_tensor_parallel_splits_the_heads() -> None:
    # TP2: 8 // 2 = 4 kv heads a rank: page 16 × 4 × 128 × 2 = 16,384 B; block 18 × 16,384 = 294,912 B
    p = plan("gpt-oss-120b", tp=2, context_length=131_072)
    assert p.extras["bytes_per_block"] == 294_912
    # 42,949,672,960 // 294,912 = 145,635 blocks (twice as many, to one block)
    assert p.extras["num_blocks"] == 145_635


def test_gpt_oss_startup_error_and_estimated_length() -> None:
    p = plan("gpt-oss-120b", tp=1, context_length=131_072, kv_cache_memory="2GiB")
    assert p.startup_error is not None
    # needed 589,824 × 9,225 = 5,441,126,400 B = 5.07 GiB; check = 2 GiB − one block = 2,146,893,824 B = 2.0 GiB
    assert "(131072), (5.07 GiB KV cache is needed" in p.startup_error
    assert "available KV cache memory (2.0 GiB)" in p.startup_error
    # blocks that fit: 2,146,893,824 // 589,824 = 3,639; beyond the window cdiv(L, 16) + 1,033 <= 3,639
    # → cdiv(L, 16) <= 2,606 → L <= 41,696
    assert "the estimated maximum model length is 41696." in p.startup_error


def test_sliding_window_refuses_decode_context_parallel() -> None:
    with pytest.raises(PlanError, match="DCP not support sliding window"):
        plan("gpt-oss-120b", tp=2, dcp=2, context_length=131_072)


def test_gpt_oss_admit_is_planned_on_vllm() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", "gpt-oss-120b", "--set", "engine=vllm"])
    assert r.exit_code in (0, 1), r.output  # a verdict, no longer the exit-2 refusal
    assert "does not yet plan" not in r.output


# --------------------------------------------------------------------------- Gated DeltaNet state (Qwen3-Next)


def _qwen3_next(tmp_path: Path) -> str:
    """A Qwen3NextForCausalLM config.json written by this test (NOT the real one, tests/data/hf/README.md): 48
    layers, full attention every 4th, the released 80B-A3B attention and linear-attention dims."""
    cfg = {"architectures": ["Qwen3NextForCausalLM"], "num_hidden_layers": 48, "num_attention_heads": 16,
           "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048, "max_position_embeddings": 262144,
           "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
           "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
           "vocab_size": 151936}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


def test_qwen3_next_mamba_alignment_and_groups(tmp_path: Path) -> None:
    p = plan(_qwen3_next(tmp_path), tp=4, context_length=262_144, weights_per_gpu="40GiB")
    # GDN state at tp 4 (vLLM: bf16 conv and recurrent): conv (4 - 1) × (2 × 16 × 128 + 32 × 128) / 4 = 6,144
    # elements × 2 = 12,288 B; recurrent 32 / 4 × 128 × 128 = 131,072 × 2 = 262,144 B → 274,432 B
    assert p.extras["state_bytes"] == 274_432
    # attention: max(1, 2 // 4) = 1 kv head × (256 + 256) × 2 B = 1,024 B a token. align = max(16, 16) = 16
    # (FLASH_ATTN MultipleOf(16)); 'align' mode with the FlashInfer GDN checkpoints on SM90: lcm(16, 64) = 64;
    # block = 64 × cdiv(274,432, 64 × 1,024) = 64 × 5 = 320; page = 320 × 1,024 = 327,680 (state padded 19.40 %)
    assert (p.extras["block_size"], p.extras["page_bytes"]) == (320, 327_680)
    assert p.knob("page_size").value == 320 and "_align_hybrid_block_size" in p.knob("page_size").origin
    assert any("Padding mamba page size by 19.40%" in n for n in p.notes)
    # 12 full + 36 GDN layers: group size 12 (36 >= 1.5 × 12); 1 + 3 groups; bytes per block 12 × 327,680
    assert (p.extras["group_size"], p.extras["kv_cache_groups"], p.extras["bytes_per_block"]) == (12, 4, 3_932_160)
    # num_blocks = 42,949,672,960 // 3,932,160 = 10,922
    assert p.extras["num_blocks"] == 10_922
    # per request at 262,144: 262,144 / 320 = 819.2 → 820 + 3 groups × (2 + 1 checkpoint) = 9 → 829
    assert p.extras["blocks_per_request"] == 829
    # int(10,922 / 829 × 262,144) = int(13.1749… × 262,144) = 3,453,723
    assert p.logged_tokens == 3_453_723


def test_qwen3_next_short_requests_are_bound_by_state_blocks(tmp_path: Path) -> None:
    (pool,) = plan(_qwen3_next(tmp_path), tp=4, context_length=262_144, weights_per_gpu="40GiB").pools
    attn, state = (d.need(1_000, pool.page_tokens) for d in pool.demands)
    # 1,000 tokens: cdiv(1,000, 320) = 4 attention blocks, 9 state blocks whatever the length: the state binds
    assert (attn, state) == (4, 9)
    # 10,921 usable blocks // 13 = 840 such requests; at 262,144 tokens the 820 token blocks bind instead
    assert pool.fits(1_000) == 840
    assert [d.need(262_144, 320) for d in pool.demands] == [820, 9]


def test_qwen3_next_prefix_reuse_is_in_whole_blocks(tmp_path: Path) -> None:
    p = plan(_qwen3_next(tmp_path), tp=4, context_length=262_144, weights_per_gpu="40GiB")
    # MambaManager.find_longest_cache_hit: a hit ends on a block (320 tokens) whose state 'align' mode kept
    assert any("at most floor(prefix / 320) × 320 tokens are reused" in n for n in p.notes)


def test_qwen3_next_triton_gdn_has_no_checkpoint_block(tmp_path: Path) -> None:
    # A100 (SM80): the GDN prefill backend is Triton (FlashInfer only on SM90 / SM10x / SM12x), no checkpoint:
    # align = lcm(16, 1) = 16; block = 16 × cdiv(274,432, 16 × 1,024) = 16 × 17 = 272; 2 blocks a group
    p = plan(_qwen3_next(tmp_path), gpu="a100-80gb", tp=4, context_length=262_144, weights_per_gpu="40GiB")
    assert p.extras["block_size"] == 272
    # 262,144 / 272 = 963.8 → 964 + 3 × 2 = 970
    assert p.extras["blocks_per_request"] == 970


# --------------------------------------------------------------------------- KDA state + MLA (Kimi-Linear)


def _kimi_linear(tmp_path: Path) -> str:
    """A KimiLinearForCausalLM config.json written by this test (NOT the real one): 4 layers (KDA at 1-3, MLA at 4,
    1-based), the released 48B-A3B dims."""
    cfg = {"architectures": ["KimiLinearForCausalLM"], "num_hidden_layers": 4, "num_attention_heads": 32,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
           "max_position_embeddings": 1048576,
           "linear_attn_config": {"kda_layers": [1, 2, 3], "full_attn_layers": [4], "num_heads": 32, "head_dim": 128,
                                  "short_conv_kernel_size": 4}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


def test_kimi_linear_kda_beside_mla(tmp_path: Path) -> None:
    p = plan(_kimi_linear(tmp_path), tp=1, context_length=131_072, weights_per_gpu="40GiB")
    # KDA at tp 1 (vLLM kda_state_dtype: bf16 conv, fp32 recurrent): conv 3 × (32 × 128 + 2 × 32 × 128) = 36,864
    # × 2 = 73,728 B; recurrent 32 × 128 × 128 = 524,288 × 4 = 2,097,152 B → 2,170,880 B
    assert p.extras["state_bytes"] == 2_170_880
    # MLA bf16 row (512 + 64) × 2 = 1,152 B; align = max(16 (FLASH_ATTN_MLA), 16, 128 for MLA) = 128, no KDA
    # checkpoint: block = 128 × cdiv(2,170,880, 128 × 1,152) = 128 × 15 = 1,920; page = 1,920 × 1,152 = 2,211,840
    assert (p.extras["block_size"], p.extras["page_bytes"]) == (1_920, 2_211_840)
    # 1 MLA + 3 KDA layers: group size 1 (3 >= 1.5 × 1): 1 + 3 groups of one layer, bytes per block = one page
    assert (p.extras["group_size"], p.extras["kv_cache_groups"], p.extras["bytes_per_block"]) == (1, 4, 2_211_840)
    # per request at 131,072: cdiv(131,072, 1,920) = 69 (68.27) + 3 groups × 2 = 6 → 75
    assert p.extras["blocks_per_request"] == 75
    # 42,949,672,960 // 2,211,840 = 19,418 blocks
    assert p.extras["num_blocks"] == 19_418


# --------------------------------------------------------------------------- refusals and the shape


def test_deepseek_v4_stays_refused_on_vllm_before_0_33() -> None:
    # planned on 0.33.0 (tests/engines/test_vllm_v4.py); older wheels' V4 code was not read: one line, exit 2
    with pytest.raises(InputError, match=r"DeepSeek-V4 compressed-attention layers before vLLM 0\.33\.0"):
        plan("deepseek-v4-flash", engine_version="0.32.0")


def test_speculative_decoding_on_a_hybrid_is_refused() -> None:
    with pytest.raises(InputError, match="speculative decoding on a hybrid model"):
        plan("gpt-oss-120b", tp=1, speculative_num_draft_tokens=1)


def test_uniform_vllm_plan_keeps_no_pools() -> None:
    p = plan_pool(load_model("glm-5.3"), load_deployment(VLLM))
    assert p.pools == () and len(p.hybrid_pools) == 1 and "blocks_per_request" not in p.extras


def test_group_size_rule() -> None:
    # gpt-oss-20b + eagle: 12 sliding + 13 full → 13 < 1.5 × 12 = 18: group size 13 (the source's own example)
    assert group_size_of([12, 13]) == 13
    # Qwen3-Next 12 full + 36 GDN → 12; gpt-oss 18 + 18 → 18
    assert (group_size_of([12, 36]), group_size_of([18, 18])) == (12, 18)


@given(tokens=st.integers(0, 10**7), more=st.integers(0, 10**6), window=st.integers(1, 10**6))
def test_window_holds_at_most_its_window_and_need_grows(tokens: int, more: int, window: int) -> None:
    d = Demand("sliding window", "window", window=window, extra=1)
    # never more than the window's pages + the extra one, and a longer request never needs fewer
    assert d.need(tokens, 16) <= -(-window // 16) + 1
    assert d.need(tokens + more, 16) >= d.need(tokens, 16)
    full = Demand("full attention", "token")
    assert full.need(tokens + more, 16) >= full.need(tokens, 16)


# --------------------------------------------------------------------------- a real start-up log (vLLM 0.19.0)

FIELD_LOG = Path(__file__).resolve().parents[1] / "data" / "logs" / "field"
GPT_OSS_20B = Path(__file__).resolve().parents[1] / "data" / "vllm_hybrid" / "gpt-oss-20b"


@pytest.mark.parametrize(
    ("log", "tp", "bytes_per_block", "blocks", "tokens", "window"),
    [
        # TP2: page 16 × 4 kv heads (8 / 2) × 128 × 2 B = 16,384; block 12 × 16,384 = 196,608;
        # 59.32 GiB = 63,694,364,999 B // 196,608 = 323,966 blocks (window 323,938 .. 323,993);
        # 0.19.0 logs num_blocks // 2 groups × 16 = 161,983 × 16 = 2,591,728
        ("tp2", 2, 196_608, 323_966, 2_591_728, (323_938, 323_993)),
        # TP1: page 16 × 8 × 128 × 2 = 32,768; block 393,216; 58.47 GiB = 62,781,684,449 B // 393,216 = 159,662
        # (window 159,648 .. 159,675); 79,831 × 16 = 1,277,296
        ("tp1", 1, 393_216, 159_662, 1_277_296, (159_648, 159_675)),
    ],
)
def test_field_logs_gpt_oss_20b_vllm_0_19(
    log: str, tp: int, bytes_per_block: int, blocks: int, tokens: int, window: tuple[int, int]
) -> None:
    path = FIELD_LOG / f"vllm-hybrid-gpt-oss-20b-h100-llmd-planner-{log}.log"
    text = path.read_text(encoding="utf-8").partition("\n\n")[2]
    avail = re.search(r"Available KV cache memory: ([\d.]+) GiB", text)
    logged = re.search(r"GPU KV cache size: ([\d,]+) tokens", text)
    conc = re.search(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x", text)
    assert avail and logged and conc
    logged_tokens = int(logged[1].replace(",", ""))
    sets = ["engine_version=0.19.0", "gpu=h100-sxm", f"tp={tp}", "kv_cache_dtype=auto", "context_length=8192",
            "max_num_batched_tokens=8192", f"kv_cache_memory={avail[1]}GiB"]  # fmt: skip
    p = plan_pool(load_model(str(GPT_OSS_20B)), load_deployment(VLLM, sets))
    # 12 full + 12 sliding layers → 2 groups of 12
    assert (p.extras["kv_cache_groups"], p.extras["group_size"], p.extras["bytes_per_block"]) == (
        2,
        12,
        bytes_per_block,
    )
    assert p.extras["num_blocks"] == blocks and p.logged_tokens == tokens
    # the log's tokens // 16 × 2 = its blocks (to one): inside the printed memory's window, within 0.01 %
    assert window[0] <= logged_tokens // 16 * 2 <= window[1]
    assert abs(p.logged_tokens - logged_tokens) / logged_tokens < 0.0001
    # per request at 8,192: full 512 + sliding cdiv(min(127 + 8,192, 8,192), 16) + 1 = 513 → 1,025 blocks; the
    # log's blocks / 1,025 reproduce its print (TP2 323,972 → 316.07x; TP1 159,648 → 155.75x)
    (pool,) = p.pools
    assert pool.need(8_192) == 1_025
    assert conc[1] == "8,192" and f"{logged_tokens // 16 * 2 / pool.need(8_192):.2f}" == conc[2]


def test_window_and_logged_tokens_by_version() -> None:
    def at(version: str) -> PoolPlan:
        return plan("gpt-oss-120b", tp=1, context_length=131_072, engine_version=version)

    # 0.25.0: window - 1 + max_num_batched_tokens = 127 + 8,192 = 8,319 → cdiv(8,319, 16) + 1 = 520 + 1 = 521;
    # 0.26.0 (max_in_flight_tokens = 2 × 8,192): 16,511 → 1,033 (wheels 0.25.0 / 0.26.0 kv_cache_interface.py)
    assert at("0.25.0").extras["blocks_per_request"] == 8_192 + 521
    assert at("0.26.0").extras["blocks_per_request"] == 8_192 + 1_033
    # 'GPU KV cache size': 0.20.0 num_blocks // 2 groups × 16 = 72,817 // 2 × 16 = 582,528; 0.20.1
    # int(72,817 / 8,713 × 131,072) = 1,095,405 (the 0.25 window: 8,192 + 521 = 8,713 blocks a request)
    p20 = plan("gpt-oss-120b", tp=1, context_length=131_072, engine_version="0.20.0")
    assert p20.extras["num_blocks"] == 72_817 and p20.logged_tokens == 582_528
    assert at("0.20.1").logged_tokens == int(72_817 / 8_713 * 131_072) == 1_095_405


def test_qwen3_next_none_mode_reproduces_a_vllm_0_10_2_log(tmp_path: Path) -> None:
    # A public vLLM 0.10.2 start-up log of Qwen3-Next-80B-A3B-Instruct, TP2 on 2 × H200, defaults otherwise
    # (max_model_len 262,144, max_num_batched_tokens 8,192; retrieved through the search index's find_string,
    # id 7292846353, whose repository the index does not name: quoted here, not stored as a field log):
    #   "Hybrid or mamba-based model detected: disabling prefix caching since it is not yet supported."
    #   "Setting attention block size to 544 tokens ..." / "Padding mamba page size by 1.49% ..."
    #   "Available KV cache memory: 44.59 GiB" / "GPU KV cache size: 973,760 tokens"
    #   "Maximum concurrency for 262,144 tokens per request: 14.77x"
    sets = {"engine_version": "0.10.2", "tp": 2, "context_length": 262_144, "kv_cache_memory": "44.59GiB"}
    p = plan(_qwen3_next(tmp_path), weights_per_gpu="75GiB", **sets)
    # GDN state at tp 2: conv 3 × 8,192 / 2 = 12,288 el × 2 = 24,576 B + recurrent 16 × 128 × 128 × 2 = 524,288 B
    # = 548,864 B; attention 1 kv head (2 / 2) × 512 × 2 = 1,024 B a token; 'none' mode: align 16:
    # block = 16 × cdiv(548,864, 16,384) = 16 × 34 = 544 (the log's 544); padding 557,056 / 548,864 − 1 = 1.49 %
    assert (p.extras["state_bytes"], p.extras["block_size"]) == (548_864, 544)
    assert any("Padding mamba page size by 1.49%" in n for n in p.notes)
    assert "Maximum concurrency for 262,144 tokens per request: 14.77x" in p.chain[-1].detail
    # 12 + 36 layers → 4 groups of 12; bytes per block 12 × 557,056 = 6,684,672;
    # 44.59 GiB = 47,878,147,932 B // 6,684,672 = 7,162 blocks
    assert (p.extras["bytes_per_block"], p.extras["num_blocks"]) == (6_684_672, 7_162)
    # vLLM 0.10.2 logs num_blocks // 4 groups × 544 = 1,790 × 544 = 973,760: the log's figure exactly
    assert p.logged_tokens == 973_760
    # 'none' mode: 1 block per state group: cdiv(262,144, 544) = 482 + 3 = 485; 7,162 / 485 = 14.767 → '14.77x'
    (pool,) = p.pools
    assert pool.need(262_144) == 485 and f"{7_162 / pool.need(262_144):.2f}" == "14.77"
    assert any("without prefix caching" in n for n in p.notes)


def test_state_hybrids_on_vllm_0_26_and_0_27_are_refused(tmp_path: Path) -> None:
    # 0.26-0.27 pick mamba_cache_mode 'all' for models that support it: not modelled
    with pytest.raises(InputError, match=r"mamba_cache_mode 'all' \(vLLM 0\.26-0\.27\)"):
        plan(_qwen3_next(tmp_path), engine_version="0.27.0", tp=4, weights_per_gpu="40GiB")


def test_gdn_checkpoint_block_only_from_vllm_0_33(tmp_path: Path) -> None:
    # 0.32.0: 'align' mode without the GDN checkpoint: align 16, block 16 × cdiv(274,432, 16,384) = 16 × 17 = 272;
    # per request 262,144 / 272 → 964 + 3 groups × 2 = 970 (0.33.0: 320 and 829, test above)
    p = plan(_qwen3_next(tmp_path), engine_version="0.32.0", tp=4, context_length=262_144, weights_per_gpu="40GiB")
    assert (p.extras["block_size"], p.extras["blocks_per_request"]) == (272, 970)
