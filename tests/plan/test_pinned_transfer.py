"""plan/transfer.py pinned at the boundaries its mutants moved (issue 26): a context shorter than the window, a
1-token hand-off, a state's 0 rows, each kv head's copies under GQA, and the sharding words under dcp per engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.cli._common import load_plan
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.plan.transfer import parse_unit, transfer
from tests.conftest import make_plan
from tests.engines.test_gqa_goldens import _plan as gqa_plan
from tests.engines.test_sglang_allswa import _plan as allswa_plan
from tests.engines.test_sglang_hybrid import _qwen3_next

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def test_a_context_shorter_than_the_window_moves_every_token(tmp_path: Path) -> None:
    # SGLang 0.5.23 disaggregation/prefill.py _swa_payload: window_start = max(0, seq_len − sliding_window_size)
    # rounded down to a page: a 4-token request under an 8-token window (page 1) sends rows 0..4, all 4 of them,
    # × 32 layers × 4 kv heads × 64 × 2 (K, V) × 2 B = 32,768 B a row: 131,072 B
    t = transfer(allswa_plan(tmp_path), 4)
    (swa,) = t.hybrid
    assert (swa.tokens, swa.bytes_per_rank) == (4, 131_072)
    assert swa.how == "the window's pages: from max(4 − 8, 0) // 1 × 1 = 0 to 4: 4 rows × 32,768 B"


def test_a_state_moves_no_rows(tmp_path: Path) -> None:
    # SGLang _mamba_payload: one state slot per request, not rows per token: the JSON's tokens is 0
    sets = ["tp=4", "kv_cache_dtype=auto", "context_length=32768", "weights_per_gpu=20GiB"]
    (state,) = transfer(load_plan(_qwen3_next(tmp_path), None, sets), 4_096).hybrid
    assert (state.per, state.tokens) == ("request", 0)
    assert state.how == "one state per request over 36 layers"  # 36 Gated DeltaNet layers of 48


def test_a_one_token_hand_off_moves_one_page() -> None:
    # GLM-5.3 on SGLang: pages of 64 tokens; a 1-token request's page moves whole: 64 rows × 53,940 B
    # (51,168 B MLA + 2,772 B indexer K a token) = 3,452,160 B a rank
    t = transfer(make_plan(), 1)
    assert (t.moved_tokens, t.bytes_per_rank) == (64, 3_452_160)
    with pytest.raises(InputError, match="--ctx must be positive, got 0"):
        transfer(make_plan(), 0)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_kv_heads_split_evenly_have_one_copy(engine: str) -> None:
    # Llama-3.1-70B, 8 kv heads at tp 4: 2 heads a rank, each head on one rank (no replication); a row is
    # 80 layers × 2 heads × 128 × 2 (K, V) × 2 B = 81,920 B; 32,768 rows a rank, × 4 ranks
    t = transfer(gqa_plan(engine, "llama-3.1-70b", tp=4), 32_768)
    assert t.copies == 1
    assert t.sharding == "TP shards the 8 kv heads, 2 per rank at attention tp 4"
    assert t.total_bytes == 4 * 32_768 * 81_920 == 10_737_418_240


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_kv_heads_fewer_than_ranks_are_replicated(engine: str) -> None:
    # Qwen3-235B-A22B, 4 kv heads at tp 8: vLLM QKVParallelLinear (num_kv_head_replicas = tp_size //
    # total_num_kv_heads) and SGLang's QKVParallelLinear put each kv head on 8 / 4 = 2 ranks; a rank's row is
    # 94 layers × 1 head × 128 × 2 × 2 B = 48,128 B
    t = transfer(gqa_plan(engine, "qwen3-235b-a22b", tp=8), 32_768)
    assert t.copies == 2
    assert t.sharding == "TP shards the 4 kv heads, 1 per rank at attention tp 8, each head on 2 ranks (replicated)"
    assert t.total_bytes == 8 * 32_768 * 48_128 == 12_616_466_432


def test_dcp_on_sglang_keeps_the_whole_indexer_on_each_rank() -> None:
    # SGLang 0.5.23 kv_cache_configurator: "index-K buffer is replicated under DCP while the latent KV shards"
    # (indexer_cell_size *= dcp_size): at dcp 8 each rank sends 1/8 of the rows, 1,048,576 / 8 = 131,072, but each
    # row carries 8 tokens' index K: 131,072 × 8 × 2,772 B = 2,906,652,672 B, the whole request's index K
    t = transfer(make_plan(dcp=8), 1 << 20)
    assert t.rows_per_rank == 131_072 and t.indexer_bytes_per_rank == (1 << 20) * 2_772 == 2_906_652_672
    assert t.copies == 1  # tp 8 / dcp 8
    assert t.sharding == (
        "dcp 8 splits the tokens across 8 ranks, each sending 1/8 of the rows, but SGLang keeps the whole indexer K"
        " on each rank"
    )


def test_dcp_on_vllm_says_nothing_of_sglang() -> None:
    # vLLM (the glm-5.3-8xh200-vllm preset) at dcp 8: the same split, without SGLang's replicated indexer
    t = transfer(make_plan("glm-5.3-8xh200-vllm", dcp=8), 1 << 20)
    assert t.sharding == "dcp 8 splits the tokens across 8 ranks, each sending 1/8 of the rows"


def test_dcp_with_copies_names_them() -> None:
    # tp 8 / dcp 2: every token on 4 ranks
    t = transfer(make_plan("glm-5.3-8xh200-vllm", dcp=2), 1 << 20)
    assert t.sharding == (
        "dcp 2 splits the tokens across 2 ranks, each sending 1/2 of the rows; TP 8 keeps 4 copies of each token"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("page", ("page", 0)), ("Token", ("token", 0)), ("chunk:256", ("chunk", 256)), ("chunk:1K", ("chunk", 1024))],
)
def test_units(text: str, expected: tuple[str, int]) -> None:
    assert parse_unit(text) == expected


def test_a_bad_chunk_names_it() -> None:
    with pytest.raises(InputError, match=r"^--unit 'chunk:0': "):
        parse_unit("chunk:0")


def test_json_reads_the_state_rows(tmp_path: Path) -> None:
    r = runner.invoke(app, ["transfer", "--ctx", "4", "-f", "json", "--model", _qwen3_next(tmp_path),
                            "--set", "tp=4", "--set", "kv_cache_dtype=auto", "--set", "context_length=32768",
                            "--set", "weights_per_gpu=20GiB"])  # fmt: skip
    assert r.exit_code == 0, r.output
    (kind,) = json.loads(r.stdout)["hybrid_kinds"]
    # 36 GDN layers × 536,576 B at tp 4 (SGLang's MambaPool state for Qwen3-Next): 19,316,736 B, 0 rows
    assert (kind["tokens"], kind["bytes_per_rank"]) == (0, 19_316_736)


def test_an_mtp_hand_off_moves_the_draft_rows_too() -> None:
    # SGLang 0.5.23 disaggregation/prefill.py (_init_kv_manager): "We should also transfer draft model kv cache":
    # the draft pool's buffers (draft_token_to_kv_pool.get_contiguous_buf_infos) are appended to kv_data_ptrs.
    # GLM-5.3 fp8 with its 1 NextN layer (tests/engines/test_sglang.py test_worked_example_mtp): a row is 51,168 B
    # MLA + 656 B draft MLA and 2,772 B index K + 132 B draft index K. A 1-token request moves its 64-token page:
    # 64 × 51,824 = 3,316,736 B of latent and 64 × 2,904 = 185,856 B of index K, 3,502,592 B a rank
    t = transfer(make_plan(speculative_num_draft_tokens=3), 1)
    assert (t.plan.cell.draft_main_bytes, t.plan.cell.draft_indexer_bytes) == (656, 132)
    assert (t.main_bytes_per_rank, t.indexer_bytes_per_rank) == (3_316_736, 185_856)
    assert t.bytes_per_rank == 3_502_592


def test_a_long_unit_is_cut_to_40_characters_in_the_message() -> None:
    # the refusal quotes the first 40 characters of --unit: 'chunk:' and 34 of the 50 digits
    with pytest.raises(InputError) as e:
        parse_unit("chunk:" + "9" * 50)
    assert str(e.value).startswith("--unit 'chunk:" + "9" * 34 + "': ")


def _gpt_oss_vllm() -> PoolPlan:
    return make_plan("glm-5.3-8xh200-vllm", model="gpt-oss-120b", kv_cache_dtype="auto", page_size="default")


def test_a_window_past_its_start_moves_its_pages() -> None:
    # gpt-oss-120b (config.json: 36 layers alternating full and 128-token sliding attention, 8 kv heads of 64) at tp 8,
    # bf16: 18 layers × 1 head × 64 × 2 (K, V) × 2 B = 4,608 B a token for each kind; vLLM's 16-token blocks.
    # SGLang's _swa_payload rule (vLLM's connectors assumed alike, the module's ASSUMPTION): a 1,001-token request
    # sends the full-attention pages, cdiv(1,001, 16) × 16 = 1,008 rows, 4,644,864 B; the window from
    # (1,001 − 128) // 16 × 16 = 864, cdiv(137, 16) = 9 pages = 144 rows, 663,552 B; 5,308,416 B a rank
    p = _gpt_oss_vllm()
    assert (p.logical_page_tokens, p.cell.main_bytes) == (16, 4_608)
    t = transfer(p, 1_001)
    (swa,) = t.hybrid
    assert (t.moved_tokens, t.main_bytes_per_rank) == (1_008, 4_644_864)
    assert (swa.tokens, swa.bytes_per_rank) == (144, 663_552)
    assert t.bytes_per_rank == 5_308_416
    # token unit: the last min(128, moved) tokens: 100 of a 100-token request, 128 of a 1,001-token one
    assert [m.tokens for m in transfer(p, 100, unit="token").hybrid] == [100]
    assert [m.tokens for m in transfer(p, 1_001, unit="token").hybrid] == [128]


def test_an_all_window_model_moves_no_full_rows(tmp_path: Path) -> None:
    # the all-sliding-window model of tests/engines/test_sglang_allswa.py (8-token window, 1-token pages, 32,768 B a
    # row): no per-token kind, so no full-attention rows move; a 20-token request sends its window, rows 12..20,
    # 8 × 32,768 = 262,144 B, and that is the whole hand-off
    t = transfer(allswa_plan(tmp_path), 20)
    (swa,) = t.hybrid
    assert (t.full_row_bytes, t.main_bytes_per_rank) == (0, 0)
    assert (swa.tokens, swa.bytes_per_rank, t.bytes_per_rank) == (8, 262_144, 262_144)


def test_link_time_is_rounded_up_to_the_microsecond() -> None:
    # 400 Gb/s = 50,000,000,000 B/s = 50,000 B a µs: 50,000 B take exactly 1 µs, 5,000,001 B take 100.00002 -> 101
    t = transfer(make_plan(), 1)
    assert (t.microseconds(50_000), t.microseconds(5_000_001)) == (1, 101)


def test_pipeline_stages_say_each_sends_its_own_layers() -> None:
    # GLM-5.3 at pp 2 × tp 4 (layers 40 + 38): each stage's 4 ranks hold and send only their own layers' rows, so
    # the sharding names the stages after the TP rule
    t = transfer(make_plan(pp=2, tp=4, pp_layer_partition="40,38"), 1)
    assert t.sharding == (
        "TP replicates the MLA latent on each of the 4 ranks; pp 2: each stage's ranks send their own layers "
        "(per rank: the binding stage's)"
    )
