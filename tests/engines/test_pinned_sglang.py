"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/sglang.py, each pinned by
a figure derived from SGLang 0.5.23's source (shared/reference/sglang-0.5.23.md; fresh seed 41217).

GLM-5.3 on 8×H200 as the reference's §9 works it: pre-load free 143,771 MiB, weights 88 GiB a GPU, fp8_e4m3 in the
656-byte layout (flashmla_kv), one MTP layer (num_nextn_predict_layers 1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.cli._common import load_plan
from kvplan.models.from_hf import load_model
from tests.conftest import make_plan
from tests.engines.test_sglang_hybrid import _plan, _qwen3_next

REFERENCE = {
    "kv_cache_dtype": "fp8_e4m3",
    "attention_backend": "flashmla_kv",
    "pre_load_free": "143771MiB",
    "weights_per_gpu": "88GiB",
    "speculative_num_draft_tokens": 2,
}


@pytest.mark.parametrize(
    ("dcp", "mfs", "rows", "draft"),
    [
        # §9.3 "dcp1, fp8-656 + MTP": S = 714,048. The draft worker's NSATokenToKVPool: size S, page 64, MLA rows
        # S + 64 = 714,112 × 656 B × 1 layer = 468,457,472; index pages (S + 64 + 1) // 64 = 11,158 × 64 × 132 B
        # (128 fp8 + 4 B scale) = 94,262,784 -> 562,720,256 B
        (1, 0.886, 714_048, 562_720_256),
        # "dcp8, fp8-656 + MTP": S = 511,424. §2.4: the draft pool is replicated, size S × 8 = 4,091,392, page
        # 64 × 8 = 512, index_buf_size = size: MLA (4,091,392 + 512) × 656 = 2,684,289,024; index pages
        # (4,091,392 + 512 + 1) // 512 = 7,992 × 512 × 132 = 540,131,328 -> 3,224,420,352 B
        (8, 0.897, 511_424, 3_224_420_352),
    ],
)
def test_the_mtp_draft_pool_allocation(dcp: int, mfs: float, rows: int, draft: int) -> None:
    p = make_plan("glm-5.3-8xh200-sglang", dcp=dcp, mem_fraction_static=mfs, **REFERENCE)
    assert (p.rows, p.extras["draft_alloc_bytes"]) == (rows, draft)
    assert next(s.bytes for s in p.memory_map if s.label == "draft") == draft


def test_free_after_weights_in_the_chain() -> None:
    # §9.3: free_after_load = pre − W = 143,771 MiB (150,754,820,096 B) − 88 GiB (94,489,280,512 B)
    p = make_plan("glm-5.3-8xh200-sglang", mem_fraction_static=0.886, **REFERENCE)
    term = next(t for t in p.chain if t.label == "free after weights")
    assert term.bytes == 56_265_539_584


def test_half_a_byte_of_budget_is_no_memory() -> None:
    # mem_fraction_static 0.5, pre-load free P = 80 GiB + 1 B (odd), weights (P − 1) / 2: rest_memory =
    # (P − W) / 2^30 − P / 2^30 × 0.5 = 0.5 B / 2^30 GiB, exact in floats; int(rest × 2^30) = 0 B, so
    # profile_max_num_token's max_total_num_tokens is 0 ("Not enough memory"): no GPU memory for the KV cache,
    # no pool, no index buffer
    pre = 80 * 2**30 + 1
    p = make_plan(
        "glm-5.3-8xh200-sglang",
        model="llama-3.1-8b",
        pre_load_free=f"{pre}B",
        weights_per_gpu=f"{(pre - 1) // 2}B",
        mem_fraction_static=0.5,
    )
    assert p.available_bytes == 0
    assert p.startup_error == "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5"
    assert (p.rows, p.extras["index_buf_size"], p.extras["index_pages_per_layer"]) == (0, 0, 0)


def test_a_mamba_hybrid_allocates_its_state_pool_too(tmp_path: Path) -> None:
    # Qwen3-Next at tp 4 (tests/engines/test_sglang_hybrid.py test_qwen3_next_golden_tp4): MHATokenToKVPool's
    # (rows + page) rows × 12,288 B a token, and MambaPool's max_mamba_cache_size 2,788 + 1 slots × 19,316,736 B
    p = _plan(_qwen3_next(tmp_path), tp=4)
    assert p.extras["max_mamba_cache_size"] == 2_788
    assert p.allocated_bytes == (p.rows + p.page_tokens) * 12_288 + 2_789 * 19_316_736
    # both come out of rest_memory (_profile_available_bytes), so the memory map's main segment holds both
    main = next(s.bytes for s in p.memory_map if s.label == "main KV")
    assert main == (p.rows + p.page_tokens) * 12_288 + 2_789 * 19_316_736


def test_a_mamba_state_that_does_not_fit_allocates_nothing(tmp_path: Path) -> None:
    # Qwen3-Next at tp 4 with 126 GiB of weights: the rest after the slack is below zero, so SGLang's
    # _profile_available_bytes computes a negative max_mamba_cache_size and raises ('Not enough GPU memory for
    # hybrid (mamba/linear-attention) state cache') before MambaPool or the KV pool exists: 0 B allocated
    p = _plan(_qwen3_next(tmp_path), tp=4, weights_per_gpu="126GiB")
    assert p.startup_error is not None
    assert p.startup_error.startswith("Not enough GPU memory for hybrid (mamba/linear-attention) state cache")
    assert (p.allocated_bytes, p.extras["mamba_alloc_bytes"], p.extras["max_mamba_cache_size"]) == (0, 0, 0)


def test_the_memory_map_of_an_swa_hybrid() -> None:
    # gpt-oss-120b at tp 8: 18 full + 18 sliding layers, 8 kv heads // 8 = 1 a rank × (K + V) × 64 × 2 B = 256 B a
    # layer, 4,608 B a token in each pool. Rows 13,641,639 full and 10,913,311 SWA (test_sglang_hybrid's
    # golden); SWAKVPool allocates each pool's rows + one page (1): (13,641,640 + 10,913,312) × 4,608 =
    # 113,149,218,816 B of main KV. Pre-load free is the whole NVML 143,771 MiB (150,754,820,096 B), so nothing
    # lies outside the engine and the reserve is the rest: 150,754,820,096 − 20 GiB − 113,149,218,816
    p = _plan("gpt-oss-120b")
    assert (p.rows, p.extras["swa_tokens"]) == (13_641_639, 10_913_311)
    seg = {s.label: s.bytes for s in p.memory_map}
    assert seg["main KV"] == (13_641_640 + 10_913_312) * 4_608 == 113_149_218_816
    assert (seg["driver+context"], seg["reserve"], seg["free"]) == (0, 16_130_764_800, 0)


def test_the_free_segment_of_a_capped_mamba_hybrid(tmp_path: Path) -> None:
    # Qwen3-Next at tp 4 with --max-total-tokens 100,000: MambaPool is sized from rest_memory first (its bytes are
    # not in the KV budget kvplan reports as available), then the KV pool is capped at 100,000 + 1 rows × 12,288 B
    # = 1,228,812,288 B; what the KV budget leaves unused is available − that, the state pool being counted in
    # main KV and in the budget alike
    p = _plan(_qwen3_next(tmp_path), tp=4, max_total_tokens=100_000)
    seg = {s.label: s.bytes for s in p.memory_map}
    assert seg["main KV"] == 100_001 * 12_288 + p.extras["mamba_alloc_bytes"]
    assert seg["free"] == p.available_bytes - 100_001 * 12_288


def test_a_two_layer_mtp_draft_pool(tmp_path: Path) -> None:
    # GLM-5.3 with num_nextn_predict_layers 2 (the preset, one line changed): the draft adds
    # int(51,168 × 2 / 78) = 1,312 B of MLA and 2 × 132 B of index keys a token (reference §2.3: draft_kv = int(
    # target_kv × draft_layers / num_layers), the draft's indexer on every draft layer) -> cell 51,168 + 2,772 +
    # 1,576 = 55,516 B; S = 39,079,490,093 // 55,516 // 64 × 64 = 703,872. The draft worker's pool: MLA
    # (703,872 + 64) × 656 × 2 layers = 923,564,032; index pages (703,872 + 64 + 1) // 64 = 10,999 × 64 × 132 × 2 =
    # 185,839,104 -> 1,109,403,136 B
    src = Path("kvplan/configs/models/glm-5.3.yaml").read_text()
    assert src.count("num_nextn_predict_layers: 1") == 1
    config = tmp_path / "glm-5.3-mtp2.yaml"
    config.write_text(src.replace("num_nextn_predict_layers: 1", "num_nextn_predict_layers: 2"))
    p = make_plan("glm-5.3-8xh200-sglang", model=load_model(str(config)), mem_fraction_static=0.886, **REFERENCE)
    assert (p.cell.total_bytes, p.rows, p.extras["draft_alloc_bytes"]) == (55_516, 703_872, 1_109_403_136)


def test_no_pool_no_draft_pool() -> None:
    # 135 GiB of weights leave the KV budget nothing: SGLang raises before either worker builds a pool, so the
    # MTP draft allocates 0 B too (not one padding page)
    sets = {**REFERENCE, "weights_per_gpu": "135GiB"}
    p = make_plan("glm-5.3-8xh200-sglang", mem_fraction_static=0.886, **sets)
    assert p.startup_error is not None and p.rows == 0
    assert p.extras["draft_alloc_bytes"] == 0


@pytest.mark.parametrize(
    ("model", "holds"),
    [(None, "req_to_token, CUDA graphs, indexer logits"), ("llama-3.1-8b", "req_to_token, CUDA graphs")],
)
def test_the_slack_line_names_the_indexer_logits_only_with_an_indexer(model: str | None, holds: str) -> None:
    # fresh seed 53616. The DSA indexer's prefill logits are budgeted out of the slack (mqa_logits_utils
    # mqa_logits_static_budget_bytes reads total × (1 − mem_fraction_static)); Llama-3.1-8B has no indexer, so its
    # slack holds only req_to_token and the CUDA graphs
    p = make_plan(model=model) if model else make_plan()
    (slack,) = (t for t in p.chain if t.label == "slack (non-KV reserve)")
    assert slack.detail.endswith(f"; holds {holds}")


def test_eagle_topk_above_one_is_refused_only_under_dsa_dcp() -> None:
    # fresh seed 53616. The reference's "DSA DCP constraints" (_dsa_dcp_overrides): speculative_eagle_topk must be 1
    # with dcp > 1; at dcp 1 GLM-5.3 plans with topk 2 (no DCP rule applies), and at dcp 2 topk 1 is the one allowed
    assert make_plan(dcp=1, speculative_num_draft_tokens=3, speculative_eagle_topk=2).startup_error is None
    assert make_plan(dcp=2, speculative_num_draft_tokens=3, speculative_eagle_topk=1).startup_error is None


def test_the_allocation_is_every_pool_target_and_draft(tmp_path: Path) -> None:
    # fresh seed 53616. test_a_two_layer_mtp_draft_pool's plan (S = 703,872 rows, page 64): the target's MLA
    # (703,872 + 64) × 656 B × 78 layers = 36,018,997,248; its index K (703,872 + 64 + 1) // 64 = 10,999 pages × 64
    # × 132 B × 21 indexer layers (2,772 B / 132 of the cell) = 1,951,310,592; the draft's 1,109,403,136: the pools
    # allocate 39,079,710,976 B, each added (the draft is memory too, not taken off)
    src = Path("kvplan/configs/models/glm-5.3.yaml").read_text()
    config = tmp_path / "glm-5.3-mtp2.yaml"
    config.write_text(src.replace("num_nextn_predict_layers: 1", "num_nextn_predict_layers: 2"))
    p = make_plan("glm-5.3-8xh200-sglang", model=load_model(str(config)), mem_fraction_static=0.886, **REFERENCE)
    e = p.extras
    assert (e["mla_alloc_bytes"], e["indexer_alloc_bytes"]) == (36_018_997_248, 1_951_310_592)
    assert p.allocated_bytes == 39_079_710_976


def test_sglang_0_5_23_budgets_the_indexer_k_and_says_nothing_of_it() -> None:
    # fresh seed 53616. The "leaves the indexer K out of the KV budget" note is 0.5.3's (fixed by sgl-project/sglang
    # #11309, versions.py dsa_indexer_in_budget): GLM-5.3 on 0.5.23 and Llama-3.1-8B (no indexer) carry no such note
    for p in (make_plan(), make_plan(model="llama-3.1-8b")):
        assert not any("leaves the indexer K" in n for n in p.notes)


def test_an_swa_hybrids_allocation_adds_its_swa_pool() -> None:
    # fresh seed 53616. gpt-oss-120b fp8 at tp 8: one KV head a rank × 64 × (K + V) × 1 B = 128 B a layer; the full
    # pool holds 29,856,896 rows of 18 full-attention layers (2,304 B): (29,856,896 + 64) × 2,304 = 68,790,435,840;
    # SWAKVPool sizes the window layers' pool at swa_full_tokens_ratio 0.8: 29,856,896 × 0.8 = 23,885,516.8, a
    # whole page down 23,885,504, (23,885,504 + 64) × 2,304 = 55,032,348,672. Both are allocated: 123,822,784,512 B
    p = load_plan("gpt-oss-120b", None, ["kv_cache_dtype=fp8_e4m3", "page_size=64"])
    assert (p.rows, p.cell.main_bytes, p.extras["swa_tokens"]) == (29_856_896, 2_304, 23_885_504)
    assert (p.extras["mla_alloc_bytes"], p.extras["swa_alloc_bytes"]) == (68_790_435_840, 55_032_348_672)
    assert p.allocated_bytes == 123_822_784_512
