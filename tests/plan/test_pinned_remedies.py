"""plan/remedies.py pinned (issue 26): the figures each remedy's detail prints, read, and derived from the engine."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.admission import with_pool_tokens
from kvplan.plan.admit import Request, admit, memory_remedy
from kvplan.plan.remedies import _context_first
from tests.conftest import make_plan
from tests.models.test_load_refusals import QWEN_FP8
from tests.models.test_load_refusals import _plan as load_plan_for

M = 1 << 20


def test_the_dcp_remedy_names_the_row_it_re_planned() -> None:
    # GLM-5.3 1M on 8xH200 SGLang: 16,384 pages > 8,869. dcp 2 (the smallest divisor of tp 8 above 1): SGLang's
    # _dsa_dcp_overrides sets the DSA backends to trtllm under dcp > 1, whose fp8 MLA row is 512 + 64 = 576 B a
    # layer (flashmla's 656 B at dcp 1), × 78 layers = 44,928 B, and the index K is replicated under DCP
    # (kv_cache_configurator: indexer_cell_size *= dcp_size): 2 × 2,772 B. Cell: 44,928 + 5,544 = 50,472 B
    (dcp,) = (r for r in admit(make_plan(), Request(ctx_tokens=M)).remedies if r.knob == "dcp")
    assert (dcp.value, dcp.detail) == (2, "fp8 rows, cell 50,472 B")


def test_remedies_under_a_logged_pool_are_scaled_and_say_so() -> None:
    # --pool-tokens 500,000 where kvplan plans 567,616: a remedy's pool is its planned pool × 500,000 / 567,616,
    # rounded down to its page (admission.with_pool_tokens / remedies._replan); dcp 2 plans 1,278,208 tokens in
    # pages of 64 × 2: 1,278,208 × 500,000 // 567,616 = 1,125,943 -> // 128 × 128 = 1,125,888
    a = admit(with_pool_tokens(make_plan(), 500_000), Request(ctx_tokens=M))
    (dcp,) = (r for r in a.remedies if r.knob == "dcp")
    assert dcp.detail == "fp8 rows, cell 50,472 B; pool scaled by logged / planned = 500,000 / 567,616"
    assert make_plan(dcp=2).logged_tokens == 1_278_208 and dcp.pool_tokens == 1_125_888


def test_the_dp_remedy_says_how_the_requests_spread() -> None:
    # 8 × 128K: one fits the TP8 pool (2,048 pages of 8,869), eight do not; dp 2 gives 2 pools, ceil(8 / 2) = 4 each
    a = admit(make_plan(), Request(ctx_tokens=128 * 1024, concurrent=8))
    (dp,) = (r for r in a.remedies if r.knob == "dp_attention")
    pool = make_plan(dp_attention=2).logged_tokens
    assert dp.value == 2 and dp.pool_tokens == pool
    assert dp.detail == f"2 pools of {pool:,} tokens, at most 4 of the 8 requests each"


def test_running_requests_remedies_name_their_count() -> None:
    # max_running_requests 4 and 8 copies of 1K: 8 at once on one pool; or DP attention 8, where SGLang gives each
    # rank max(1, 4 // 8) = 1 running request (resolve_max_num_reqs), 1 of the 8 on each of 8 pools
    a = admit(make_plan(max_running_requests=4), Request(ctx_tokens=1024, concurrent=8))
    by = {r.knob: r for r in a.remedies}
    assert (by["max_running_requests"].value, by["max_running_requests"].detail) == (8, "8 at once")
    assert by["dp_attention"].value == 8 and by["dp_attention"].detail.endswith("at most 1 of the 8 requests each")


def test_a_smaller_request_table_reads_both_sizes() -> None:
    # mem_fraction_static 0.95 leaves too little slack for the workspaces: fewer running requests shrink SGLang's
    # ReqToTokenPool, (max_running_requests + 1) × (context_len + 4) × 4 B int32 (memory_pool.py ReqToTokenPool,
    # extra 4 without speculative decoding): 2,049 × 1,048,580 × 4 = 8,594,161,680 B before
    a = admit(make_plan(mem_fraction_static=0.95), Request(ctx_tokens=1024))
    (mrr,) = (r for r in a.remedies if r.knob == "max_running_requests")
    assert mrr.detail == "req_to_token {size:after} instead of {size:before}"
    assert dict(mrr.sizes) == {"after": (mrr.value + 1) * 1_048_580 * 4, "before": 8_594_161_680}


@pytest.mark.parametrize(
    ("engine", "ep", "detail"),
    [
        # SGLang: ep 2 of tp 8 leaves moe_tp 4: 1,536 / 4 = 384 a rank (FusedMoE intermediate_size_per_partition)
        ("sglang", 2, "experts split 4 ways (384 wide a rank) over ep 2; bf16 rows"),
        # vLLM --enable-expert-parallel: EP over all 8 ranks, each expert whole: 1,536 wide
        ("vllm", 8, "whole experts (1536 wide a rank) over ep 8; bf16 rows"),
    ],
)
def test_the_layout_remedies_name_the_split(engine: str, ep: int, detail: str) -> None:
    # Qwen3-235B-A22B-FP8 at tp 8: 1,536 / 8 = 192 is not a whole 128-row fp8 block (load_checks)
    a = admit(load_plan_for(engine, QWEN_FP8, tp=8), Request(ctx_tokens=32768))
    by = {r.knob: r for r in a.remedies}
    assert (by["ep"].value, by["ep"].detail) == (ep, detail)
    # the largest smaller tp that loads: 4 GPUs (pp 1), the weights a GPU as a size the render writes
    assert by["tp"].value == 4 and by["tp"].detail == "4 GPUs: weights {size:weights} a GPU; bf16 rows"


def test_sglang_tries_ep_up_to_tp(tmp_path: Path) -> None:
    # experts 384 wide (Qwen3-235B-A22B-FP8's config with moe_intermediate_size 384): FusedMoE splits each expert
    # over moe tp = tp / ep ranks, and a split must be whole 128-row fp8 blocks: ep 2 -> 384 / 4 = 96, ep 4 -> 192,
    # neither whole; ep 8 -> moe tp 1, the expert whole: the smallest ep dividing 8 that loads is tp itself
    data = json.loads(Path(QWEN_FP8).read_text())
    data["moe_intermediate_size"] = 384
    (tmp_path / "config.json").write_text(json.dumps(data))
    a = admit(load_plan_for("sglang", str(tmp_path / "config.json"), tp=8), Request(ctx_tokens=32768))
    (ep,) = (r for r in a.remedies if r.knob == "ep")
    assert (ep.value, ep.detail) == (8, "whole experts (384 wide a rank) over ep 8; bf16 rows")


def test_a_layout_remedy_counts_the_pipeline_stages() -> None:
    # Qwen3-235B-A22B-FP8 at tp 8 × pp 2 (2 nodes): tp 4 loads, and a GPU count is tp × pp = 4 × 2 = 8
    a = admit(load_plan_for("sglang", QWEN_FP8, tp=8, pp=2, nodes=2), Request(ctx_tokens=32768))
    (tp,) = (r for r in a.remedies if r.knob == "tp")
    assert tp.value == 4 and tp.detail.startswith("8 GPUs: weights {size:weights} a GPU")


def test_more_gpus_counts_the_pipeline_stages_and_their_nodes() -> None:
    # Llama-3.1-70B bf16 on H100s, tp 1 × pp 2 on nodes of 2 GPUs: 4 × 100,000 tokens fit no memory fraction;
    # tp 2 × pp 2 = 4 GPUs, which nodes of 2 hold as 2 (deployment._check_gpu_count: max(tp, ep) × pp <= nodes ×
    # gpus_per_node), so nodes=2 goes with it
    p = make_plan("glm-5.3-8xh200-sglang", model="llama-3.1-70b", gpu="H100", tp=1, pp=2, gpus_per_node=2)
    (tp,) = admit(p, Request(ctx_tokens=100_000, concurrent=4)).remedies
    assert (tp.knob, tp.value, tp.also) == ("tp", 2, (("nodes", 2),))
    assert tp.detail.startswith("4 GPUs on 2 node(s) of 2: weights {size:weights} a GPU (estimated)")


def test_dp_attention_up_to_tp() -> None:
    # max_running_requests 4 split by DP attention: SGLang resolve_max_num_reqs gives each rank max(1, 4 // dp):
    # dp 2 -> 2 a rank, 4 of 8 needed; dp 4 -> 1, 2 needed; dp 8 -> 1, 1 needed: only dp = tp admits 8 at once
    a = admit(make_plan(max_running_requests=4), Request(ctx_tokens=1024, concurrent=8))
    (dp,) = (r for r in a.remedies if r.knob == "dp_attention")
    assert dp.value == 8


def test_a_context_remedy_under_a_logged_pool_says_it_is_scaled(tmp_path: Path) -> None:
    # Qwen3-32B on vLLM (tests/plan/test_pinned_context_remedy.py): 128K needs the card's YaRN; under --pool-tokens
    # equal to the planned pool the scale is 1, and the remedy still says how its pool was scaled
    dep = tmp_path / "q.yaml"
    dep.write_text("model: qwen3-32b\n")
    d = load_deployment(str(dep), ["engine=vllm"])
    p = plan_pool(load_model(d.model), d)
    n = p.logged_tokens
    (m,) = admit(with_pool_tokens(p, n), Request(ctx_tokens=128 * 1024)).remedies
    assert m.sets == ("rope_scaling=yarn",)
    assert m.detail.endswith(f"; pool scaled by logged / planned = {n:,} / {n:,}")


def test_dcp_up_to_tp() -> None:
    # 3 × 1M: dcp 2 and 4 pools (1,278,208 and 2,303,488 tokens) hold fewer than 3 × 1,048,576 = 3,145,728; dcp 8
    # (3,845,632) holds them, with a cell of 44,928 B (trtllm rows) + 8 × 2,772 B replicated index K = 67,104 B
    assert [make_plan(dcp=d).logged_tokens for d in (2, 4, 8)] == [1_278_208, 2_303_488, 3_845_632]
    (dcp,) = (r for r in admit(make_plan(), Request(ctx_tokens=M, concurrent=3)).remedies if r.knob == "dcp")
    assert (dcp.value, dcp.detail) == (8, "fp8 rows, cell 67,104 B")


def test_a_layout_the_engine_refuses_is_no_remedy_under_a_logged_pool() -> None:
    # Qwen3-235B-A22B-FP8 (fp8 KV) at tp 4 under --pool-tokens: 110 × 32,000 tokens fit no memory fraction; tp 8
    # would plan 4,296,206 tokens but SGLang refuses to load it (1,536 / 8 = 192 rows, not whole 128-row fp8
    # blocks), and scaling a logged pool onto it must not hide the refusal: no remedy at all
    dep = replace(
        load_deployment("glm-5.3-8xh200-sglang", ["context_length=32768", "tp=4"]),
        model=QWEN_FP8,
        kv_cache_dtype="fp8_e4m3",
        page_size=None,
    )
    p = plan_pool(load_model(QWEN_FP8), dep)
    a = admit(with_pool_tokens(p, p.logged_tokens), Request(ctx_tokens=32_000, concurrent=110))
    assert not a.admitted and a.remedies == ()


def test_a_vllm_refusal_gets_max_model_len_cut_to_the_request() -> None:
    # vLLM 0.33 check_enough_kv_cache_memory: max_model_len 1,048,576 needs 52.68 GiB of KV cache, more than the
    # GLM-5.3 8xH200 pool holds, so the engine refuses to start; a 100K request (102,400 tokens) starts with
    # --max-model-len 102400, which the pool holds
    p = make_plan("glm-5.3-8xh200-vllm", context_length=1_048_576)
    assert p.startup_error is not None and p.startup_error.startswith("To serve at least one request")
    by = {r.knob: r for r in admit(p, Request(ctx_tokens=100 * 1024)).remedies}
    ctx = by["context_length"]
    assert (ctx.value, ctx.detail) == (102_400, "max_model_len the pool can start with")
    assert ctx.pool_tokens >= 102_400


def test_no_dp_attention_for_a_gqa_model_even_where_it_would_admit() -> None:
    # kvplan offers DP attention only as the MLA layout (remedies._dp_remedies; test_admit_dp.py): Llama-3.1-70B
    # with max_running_requests 4 and 8 × 1K plans dp_attention 8 as admitted, yet the one remedy is 8 at once
    p = make_plan(model="llama-3.1-70b", kv_cache_dtype="auto", page_size=1, context_length=131072,
                  max_running_requests=4)  # fmt: skip
    a = admit(p, Request(ctx_tokens=1024, concurrent=8))
    assert [(r.knob, r.value) for r in a.remedies] == [("max_running_requests", 8)]


def test_a_remedy_past_the_context_length_carries_it(tmp_path: Path) -> None:
    # Qwen3-32B (max_position_embeddings 40,960) run at context_length 32,768: 110 × 40,000 tokens are over the
    # context length and, at 40,000, over the bf16 pool (3,811,252 tokens) too: fp8_e4m3 rows (1 B, half the
    # bytes) with context_length 40,000 (<= 40,960, no override needed) carried along
    dep = tmp_path / "q.yaml"
    dep.write_text("model: qwen3-32b\n")
    d = load_deployment(str(dep), ["context_length=32768"])
    p = plan_pool(load_model(d.model), d)
    assert p.logged_tokens == 3_811_252 < 110 * 40_000
    by = {r.knob: r for r in admit(p, Request(ctx_tokens=40_000, concurrent=110)).remedies}
    kv = by["kv_cache_dtype"]
    assert kv.sets == ("kv_cache_dtype=fp8_e4m3", "context_length=40000")
    assert kv.detail == "fp8_e4m3 rows; with context_length 40,000, up to max_position_embeddings"


def _qwen_fp8(tmp_path: Path, **changes: int) -> str:
    data = json.loads(Path(QWEN_FP8).read_text())
    (tmp_path / "config.json").write_text(json.dumps({**data, **changes}))
    return str(tmp_path / "config.json")


def test_a_layout_refused_at_tp_2_is_offered_tp_1(tmp_path: Path) -> None:
    # Qwen3-235B-A22B-FP8 cut to 20 layers with experts 384 wide: at tp 2 the gate/up slice is 384 / 2 = 192 rows,
    # not whole 128-row fp8 blocks (SGLang fp8.py Fp8MoEMethod.create_weights); tp 1 holds each expert whole, so
    # the largest smaller tp that loads is 1, beside ep 2 (moe tp 1, whole experts)
    p = load_plan_for("sglang", _qwen_fp8(tmp_path, num_hidden_layers=20, moe_intermediate_size=384), tp=2)
    by = {r.knob: r.value for r in admit(p, Request(ctx_tokens=32768)).remedies}
    assert (by["ep"], by["tp"]) == (2, 1)


def test_vllm_expert_parallel_does_not_bound_the_smaller_tp(tmp_path: Path) -> None:
    # 60 attention heads at tp 8: vLLM ModelConfig.verify_with_parallel_config refuses (60 % 8 = 4); tp 4 divides
    # them. vLLM's --enable-expert-parallel spreads the experts over every rank (EP = TP × DP), so kvplan's ep 8
    # sets no floor on tp as SGLang's ep_size (which divides tp) does: the remedy is tp 4
    p = load_plan_for("vllm", _qwen_fp8(tmp_path, num_attention_heads=60), tp=8, ep=8)
    assert [(r.knob, r.value) for r in admit(p, Request(ctx_tokens=32768)).remedies] == [("tp", 4)]


def test_sglang_keeps_expert_parallel_in_its_ep_remedy(tmp_path: Path) -> None:
    # 60 experts at ep 8: SGLang FusedMoE asserts num_experts % moe_ep_size == 0 (60 % 8 = 4). The ep remedy is
    # the smallest ep from 2 dividing tp 8 that loads: ep 2 (60 % 2 = 0; moe tp 4, 2,048 / 4 = 512 = 4 fp8
    # blocks), keeping the expert parallelism the deployment asked for (ep 1, none, would load too)
    p = load_plan_for("sglang", _qwen_fp8(tmp_path, num_experts=60, moe_intermediate_size=2048), tp=8, ep=8)
    (ep,) = (r for r in admit(p, Request(ctx_tokens=32768)).remedies if r.knob == "ep")
    assert (ep.value, ep.detail) == (2, "experts split 4 ways (512 wide a rank) over ep 2; bf16 rows")


def test_a_workspace_refusal_is_offered_a_lower_memory_fraction() -> None:
    # mem_fraction_static 0.95 on GLM-5.3 8xH200 SGLang leaves too little slack for the workspaces while the pool
    # holds the request: SGLang's advice for an OOM outside the pool is to decrease --mem-fraction-static
    # (docs/advanced_features/hyperparameter_tuning.md). The remedy is the largest lower fraction, in SGLang's
    # thousandths, whose slack holds the workspaces: at it the request is admitted, one thousandth above it the
    # workspace check still fails, and it is below 0.95 (a raise only shrinks the slack)
    a = admit(make_plan(mem_fraction_static=0.95), Request(ctx_tokens=1024))
    assert [c.name for c in a.checks if not c.ok] == ["workspace"]
    (mem,) = (r for r in a.remedies if r.knob == "mem_fraction_static")
    value = float(mem.value)  # type: ignore[arg-type]
    assert 0.9 < value < 0.95 and round(value * 1000) == value * 1000
    at = make_plan(mem_fraction_static=value)
    above = admit(make_plan(mem_fraction_static=round(value * 1000 + 1) / 1000), Request(ctx_tokens=1024))
    assert admit(at, Request(ctx_tokens=1024)).admitted
    assert [c.name for c in above.checks if not c.ok] == ["workspace"]
    assert mem.pool_tokens == at.logged_tokens < make_plan(mem_fraction_static=0.95).logged_tokens
    assert mem.detail == "leaves {size:slack} for the workspaces" and dict(mem.sizes) == {
        "slack": at.extras["slack_bytes"]
    }
    # the raise search alone (fit's) finds nothing above 0.95 that holds the workspaces
    assert memory_remedy(make_plan(mem_fraction_static=0.95), Request(ctx_tokens=1024)) is None


def test_a_pool_refusal_is_never_offered_a_lower_memory_fraction() -> None:
    # 600,000 tokens on the default plan (567,616 at 0.886) are refused by the pool pages: a lower fraction only
    # shrinks the pool, so the memory remedy raises the fraction above the default 0.886, never lowers it
    a = admit(make_plan(), Request(ctx_tokens=600_000))
    assert [c.name for c in a.checks if not c.ok] == ["pool pages"]
    (mem,) = (r for r in a.remedies if r.knob == "mem_fraction_static")
    assert float(mem.value) > 0.886  # type: ignore[arg-type]


def test_the_memory_remedy_under_a_logged_pool_says_it_is_scaled() -> None:
    # --pool-tokens 500,000 where kvplan plans 567,616 and a 520,000-token request: the raised fraction's pool is
    # scaled like the logged one (remedies._replan), and its detail says by what, as every other remedy's does
    a = admit(with_pool_tokens(make_plan(), 500_000), Request(ctx_tokens=520_000))
    (mem,) = (r for r in a.remedies if r.knob == "mem_fraction_static")
    assert float(mem.value) > 0.886  # type: ignore[arg-type]
    assert mem.detail == (
        "leaves {size:slack} of slack outside the pool; pool scaled by logged / planned = 500,000 / 567,616"
    )


def test_one_thousandth_over_the_workspace_boundary_is_lowered_not_raised() -> None:
    # at 0.925 the workspaces fail by one thousandth (0.924 holds them: the test above): the raise search starts
    # above the current fraction, so it finds nothing; the lowering remedy names 0.924 and says what it is for
    plan = make_plan(mem_fraction_static=0.925)
    assert memory_remedy(plan, Request(ctx_tokens=1024)) is None
    a = admit(plan, Request(ctx_tokens=1024))
    (mem,) = (r for r in a.remedies if r.knob == "mem_fraction_static")
    assert (mem.value, mem.detail) == (0.924, "leaves {size:slack} for the workspaces")


def test_a_context_change_that_does_not_start_under_a_logged_pool_is_no_remedy() -> None:
    # vLLM GLM-5.3 8xH200 at max_model_len 131,072 with a logged pool of 150,000 tokens, asked for 600,000: past
    # the context length and the pool. The context change alone fails vLLM's start check at the planned pool
    # (kv_cache_utils._check_enough_kv_cache_memory: "the estimated maximum model length is 533824"), and under
    # a logged pool a re-plan that does not start is no plan (remedies._replan), so _context_first offers nothing
    # on 8 GPUs, and admit still answers
    plan = with_pool_tokens(make_plan("glm-5.3-8xh200-vllm", context_length=131_072), 150_000)
    req = Request(ctx_tokens=600_000)
    assert "533824" in (make_plan("glm-5.3-8xh200-vllm", context_length=600_000).startup_error or "")
    assert _context_first(plan, req) == []
    a = admit(plan, req)
    assert not a.admitted and not any(r.knob == "context_length" for r in a.remedies)


@pytest.mark.parametrize(("tokens", "fraction"), [(744_448, 0.95), (744_449, None)])
def test_the_sglang_memory_search_stops_at_0_95(tokens: int, fraction: float | None) -> None:
    # kvplan raises mem_fraction_static at most to 0.95 (its top step, the slack SGLang's workspaces need on a
    # GPU of this size). profile_max_num_token on GLM-5.3 8xH200 (test_sglang_memory_remedy_prints_its_slack):
    # pool = 149,036,204,032 × mfs − 101,425,652,695 B over 53,940 B a row, in whole pages of 64.
    #   0.950: 40,158,741,135 B // 53,940 = 744,508 rows -> 744,448 tokens: a request of 744,448 fits at 0.95
    #   0.951: 40,307,777,339 B // 53,940 = 747,271 rows -> 747,264: one token more needs 0.951, past the top
    # max_running_requests 256 keeps req_to_token (257 × 1,048,580 × 4 B) inside 0.95's slack
    plan = make_plan(max_running_requests=256)
    assert make_plan(max_running_requests=256, mem_fraction_static=0.95).logged_tokens == 744_448
    mem = memory_remedy(plan, Request(ctx_tokens=tokens))
    assert (mem.value, mem.pool_tokens) == (0.95, 744_448) if fraction else mem is None


def test_a_running_cap_set_by_rows_is_raised_by_the_next_thousandth() -> None:
    # SGLang's default running cap is min(clamp(int(S / context_len × 512), 2048, 4096), S // 2)
    # (kv_cache_configurator.resolve_max_num_reqs): on a 2,302-row pool (Llama-3.1-8B fp8 on one H200 at
    # mem_fraction_static 0.109, page 1) S // 2 = 1,151 binds. 1,152 one-token requests fit the pages but not
    # the running cap; the pool already holds them at 0.109, so the search must start one thousandth above the
    # current fraction: 0.110 gives 4,576 rows and the cap min(2,048, 2,288) = 2,048
    plan = make_plan(model="llama-3.1-8b", tp=1, dcp=1, page_size=1, mem_fraction_static=0.109)
    assert (plan.logged_tokens, plan.max_running_requests) == (2_302, 1_151)
    a = admit(plan, Request(ctx_tokens=1, concurrent=1_152))
    assert [c.name for c in a.checks if not c.ok] == ["running requests"]
    (mem,) = (r for r in a.remedies if r.knob == "mem_fraction_static")
    assert (mem.value, mem.pool_tokens) == (0.11, 4_576)
    assert make_plan(model="llama-3.1-8b", tp=1, dcp=1, page_size=1, mem_fraction_static=0.11).max_running_requests == (
        2_048
    )


def test_the_lowered_fraction_under_a_logged_pool_says_it_is_scaled() -> None:
    # --pool-tokens 700,000 on GLM-5.3 8xH200 at 0.95 (744,448 planned): the workspaces still fail, and the lowered
    # fraction's detail says how its pool was scaled, as every remedy's does under a logged pool
    a = admit(with_pool_tokens(make_plan(mem_fraction_static=0.95), 700_000), Request(ctx_tokens=1024))
    (mem,) = (r for r in a.remedies if r.knob == "mem_fraction_static")
    assert mem.value == 0.924
    assert mem.detail == ("leaves {size:slack} for the workspaces; pool scaled by logged / planned = 700,000 / 744,448")


@pytest.mark.parametrize(("tokens", "fraction"), [(617_408, 0.904), (617_409, None)])
def test_the_lowered_fraction_must_keep_the_pool(tokens: int, fraction: float | None) -> None:
    # GLM-5.3 8xH200 at 0.905, profile_max_num_token: pool = 149,036,204,032 × mfs − 101,425,652,695 B over
    # 53,940 B a row in pages of 64; slack = 149,036,204,032 × (1 − mfs).
    #   0.905: 620,173 rows -> 620,160 tokens; slack 14,158,439,383 B < the 14.2 GB of workspaces: refused
    #   0.904: 33,303,075,750 B // 53,940 = 617,410 rows -> 617,408 tokens; slack 14,307,475,587 B holds them
    # A request of exactly 617,408 tokens is admitted one thousandth lower; one token more needs 0.905's pool,
    # whose slack does not hold the workspaces: no fraction serves both
    plan = make_plan(mem_fraction_static=0.905)
    assert make_plan(mem_fraction_static=0.904).logged_tokens == 617_408
    a = admit(plan, Request(ctx_tokens=tokens))
    assert [c.name for c in a.checks if not c.ok] == ["workspace"]
    mem = [(r.value, r.pool_tokens) for r in a.remedies if r.knob == "mem_fraction_static"]
    assert mem == ([(fraction, 617_408)] if fraction else [])


def test_a_request_of_exactly_the_models_positions_raises_the_context_length_first() -> None:
    # GLM-5.3 (max_position_embeddings 1,048,576) under --context-length 131,072, asked for 1,048,576 tokens: the
    # pool (567,616) holds it at neither length, so the context change comes first and the remedies of the
    # re-planned deployment follow; 1,048,576 is within the model's positions (<=), so it is a plain context_length,
    # not a RoPE scaling: dcp 2 (1,278,208 tokens, the dcp remedy above) with context_length 1,048,576 carried
    a = admit(make_plan(context_length=131_072), Request(ctx_tokens=M))
    (r,) = a.remedies
    assert (r.knob, r.value, r.also) == ("dcp", 2, (("context_length", M),))
    assert r.detail == "fp8 rows, cell 50,472 B; with context_length 1,048,576, up to max_position_embeddings"


# Fresh seed 17085 (issue 26): a layout remedy cuts the context length only where vLLM needs it to start.


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_layout_that_admits_as_it_stands_carries_no_context_change(engine: str) -> None:
    # Qwen3-235B-A22B-FP8 (94 layers, 4 KV heads of 128, bf16 KV) at tp 8, refused at load (1,536 / 8 = 192 rows,
    # not whole 128-row fp8 blocks), context_length 32,768, asked for 16,384 tokens: the ep and tp 4 layouts load.
    # At tp 4 a token is 94 layers × 1 KV head (4 / 4) × 128 × 2 (K and V) × 2 B = 48,128 B, so a 32,768-token
    # request is 1,577,058,304 B (1.47 GiB), well inside an H200's 139.80 GiB CUDA total less ~55 GiB of weights a GPU
    # (235B parameters in fp8 over 4): vLLM starts at max_model_len 32,768 (kv_cache_utils
    # _check_enough_kv_cache_memory refuses only a max_model_len the KV cache cannot hold) and SGLang starts at any
    # context length (TpModelWorker, managers/tp_worker.py, caps a request at max_req_len = min(context_len - 1,
    # pool - 1) instead). Neither remedy carries a context_length, though the request (16,384) is shorter than it
    a = admit(load_plan_for(engine, QWEN_FP8, tp=8), Request(ctx_tokens=16_384))
    by = {r.knob: r for r in a.remedies}
    assert (by["ep"].also, by["tp"].value, by["tp"].also) == ((), 4, ())
