"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/plan/fit.py: how a candidate that
meets the flat requirements but not the trace ranks (Outcome.closeness_ppm, kvplan's own ranking rule: just below
every candidate that holds the trace, in proportion to the hit rate it reached)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvplan.errors import InputError
from kvplan.models.deploy import Requirements
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.plan.fit import TRACE_PASSES, Fit, FitQuery, Outcome, _replay_group, candidates, evaluate, layout, tp_sizes
from kvplan.plan.fit_pd import pd_staging
from kvplan.plan.fit_trace import TraceFit
from kvplan.render.fit_report import PER_GPU_COUNT
from tests.plan.test_fit import _glm_query
from tests.plan.test_fit_trace import SMALL, spec_for, write_trace
from tests.plan.test_fit_trace import plan as trace_plan

DEP = load_deployment("glm-5.3-8xh200-sglang")


def _trace(**fields: object) -> TraceFit:
    base: dict[str, object] = {"engine": "sglang", "router": "round-robin", "ranks": 1, "pool_pages": 100,
                               "page_tokens": 64, "max_running": 8, "eagle": False, "min_hit_ppm": 600_000}  # fmt: skip
    return TraceFit(**{**base, **fields})  # type: ignore[arg-type]


def test_a_held_trace_short_of_the_hit_rate_ranks_by_its_share() -> None:
    # held, 50 % hit against --min-hit 60 %: 500,000 × 999,999 // 600,000 = 833,332 (not the 999,999 cap)
    t = _trace(hit_tokens=500, prompt_tokens=1_000)
    assert t.holds and not t.ok
    assert Outcome(deployment=DEP, trace=t).closeness_ppm == 833_332


def test_a_bound_with_no_prompt_tokens_is_zero_not_a_crash() -> None:
    # reuse_bound on a trace whose prompts hold no tokens: the hit is at most 0 of 0 (the division guarded by
    # max(prompt_tokens, 1)), so it ranks last
    t = _trace(bound_tokens=0, prompt_tokens=0)
    assert Outcome(deployment=DEP, trace=t).closeness_ppm == 0


def test_trace_replays_stop_at_the_frontier_tables_rows() -> None:
    # --trace replays a GPU count's candidates until TRACE_PASSES hold the trace: as many as the frontier table
    # shows per GPU count (render/fit_report.py PER_GPU_COUNT); one fewer would leave a row of the table unreplayed
    assert TRACE_PASSES == PER_GPU_COUNT == 3


def test_past_three_holding_replays_the_rest_are_counted_unreplayed(tmp_path: Path) -> None:
    # five candidates of one GPU count that meet the flat requirements, each a 6-page pool that holds the small
    # trace (test_fit_trace: 6 pages hold it): the first TRACE_PASSES = 3 are replayed and hold it; the other 2 are
    # marked unreplayed and counted, so `fit` can say how many it skipped
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL))
    group = [Outcome(deployment=DEP, plan=trace_plan(pages=6)) for _ in range(5)]  # type: ignore[arg-type]
    q = FitQuery(model_ref="x", gpus=(), engines=("sglang",), requirements=Requirements(min_ctx_tokens=256),
                 trace=spec)  # fmt: skip
    assert _replay_group(group, q) == 2
    assert [(o.trace is not None and o.trace.ok, o.unreplayed) for o in group] == [(True, False)] * 3 + [
        (False, True)
    ] * 2


def test_a_capped_gpu_count_replays_three_whatever_they_find(tmp_path: Path) -> None:
    # a GPU count past the first that holds the trace is shown for the table only: at most TRACE_PASSES replays
    # even when none holds it (5 pages do not: test_fit_trace), the rest counted unreplayed
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL))
    group = [Outcome(deployment=DEP, plan=trace_plan(pages=5)) for _ in range(5)]  # type: ignore[arg-type]
    q = FitQuery(model_ref="x", gpus=(), engines=("sglang",), requirements=Requirements(min_ctx_tokens=256),
                 trace=spec)  # fmt: skip
    assert _replay_group(group, q, capped=True) == 2
    assert [o.trace is not None for o in group] == [True] * 3 + [False] * 2


def test_the_layout_cell_names_every_parallel_axis_above_one() -> None:
    # fit's retry with ep = tp (whole experts) after an expert-slicing refusal is a different layout: at tp 2 it is
    # ep 2, and the cell must say so (SGLang --ep-size 2 / vLLM --enable-expert-parallel)
    assert layout(replace(DEP, tp=2, ep=2, dp_attention=1, dcp=1)) == f"TP2 EP2 · {DEP.kv_cache_dtype}"
    assert layout(replace(DEP, tp=2, ep=1, dp_attention=2, dcp=2)) == f"TP2 DPA2 DCP2 · {DEP.kv_cache_dtype}"


def test_staging_buffers_carry_the_mtp_layers_kv() -> None:
    # GLM-4.5-Air, SGLang TP2 fp8 on H200 with MTP: 8 kv heads / 2 = 4 × (128 + 128) × 1 B = 1,024 B a layer,
    # 46 layers = 47,104 B and the NextN layer's 1,024 B. init_staging_buffers sizes each buffer by Σ kv_item_lens,
    # one page of every registered K and V buffer, the draft's included: 48,128 B a token (page 1);
    # 4 buffers × 8,192 pages × 48,128 = 1,577,058,304 B
    arch = load_model("glm-4.5-air")
    q = FitQuery(model_ref="glm-4.5-air", gpus=(find_gpu("h200"),), engines=("sglang",),
                 requirements=Requirements(min_ctx_tokens=131_072), max_gpus=8, mtp=(True,))  # fmt: skip
    dep = next(
        d for d in candidates(arch, q) if (d.tp, d.kv_cache_dtype, d.dcp, d.dp_attention) == (2, "fp8_e4m3", 1, 1)
    )
    p = evaluate(arch, dep, q.requirements).plan
    assert p is not None and (p.cell.main_bytes, p.cell.draft_main_bytes) == (47_104, 1_024)
    assert pd_staging(p, "prefill", "mooncake", sglang_staging=True).bytes == 1_577_058_304


def test_a_pruned_candidate_admits_no_context_and_has_no_headroom() -> None:
    # a candidate the engine refused (no plan, no requirement checked): the largest context it serves is 0 tokens
    # and it has 0 ppm to spare (the JSON row's largest_ctx_tokens and headroom_ppm read these)
    o = Outcome(deployment=DEP, pruned="SGLang refuses it")
    assert (o.largest_ctx, o.headroom_ppm, o.low_headroom_ppm, o.ok) == (0, 0, 0, False)


def test_closeness_is_the_least_share_of_a_requirement_met_in_ppm() -> None:
    # Outcome.closeness_ppm (kvplan's ranking of candidates that miss): half of a 1,048,576-token context
    # (524,288) is 500,000 ppm; 3 of 4 requests at once 750,000 ppm; the least of the two ranks it
    def check(concurrency: bool, got: int, want: int) -> SimpleNamespace:
        req = SimpleNamespace(ctx_tokens=want, concurrent=want)
        a = SimpleNamespace(largest_ctx=got, max_concurrent=got, request=req, admitted=False, checks=())
        return SimpleNamespace(concurrency=concurrency, admission=a)

    ctx, conc = check(False, 524_288, 1_048_576), check(True, 3, 4)
    assert Outcome(deployment=DEP, checks=(ctx,)).closeness_ppm == 500_000  # type: ignore[arg-type]
    assert Outcome(deployment=DEP, checks=(conc,)).closeness_ppm == 750_000  # type: ignore[arg-type]
    assert Outcome(deployment=DEP, checks=(conc, ctx)).closeness_ppm == 500_000  # type: ignore[arg-type]
    # a requirement met twice over counts as met, no more: capped at 1,000,000
    over = check(False, 2_097_152, 1_048_576)
    assert Outcome(deployment=DEP, checks=(over,)).closeness_ppm == 1_000_000  # type: ignore[arg-type]


def test_a_trace_bounded_short_of_the_hit_rate_ranks_by_the_bounds_share() -> None:
    # reuse_bound says at most 300 of the 1,000 prompt tokens can hit: 300,000 ppm, against --min-hit 60 %:
    # 300,000 × 999,999 // 600,000 = 499,999 (not held: capped at 999,998, which does not bind)
    t = _trace(bound_tokens=300, prompt_tokens=1_000)
    assert not t.holds
    assert Outcome(deployment=DEP, trace=t).closeness_ppm == 499_999
    # a bound over every prompt token (1,666,665 against 60 %) still ranks below every held trace: 999,998
    assert Outcome(deployment=DEP, trace=_trace(bound_tokens=1_000, prompt_tokens=1_000)).closeness_ppm == 999_998


def test_candidates_take_the_nodes_their_gpus_need() -> None:
    # nodes = ceil(tp / gpus_per_node): TP1-8 on one 8-GPU node, TP16 on 2, TP32 on 4 (the --emit-deploy nodes)
    q = FitQuery(model_ref="llama-3.1-8b", gpus=(find_gpu("h200"),), engines=("sglang",),
                 requirements=Requirements(min_ctx_tokens=131_072), max_gpus=32)  # fmt: skip
    nodes = {d.tp: d.nodes for d in candidates(load_model("llama-3.1-8b"), q)}
    assert nodes == {1: 1, 2: 1, 4: 1, 8: 1, 16: 2, 32: 4}


def test_ok_at_the_low_end_of_the_band() -> None:
    # an exact pool (no band: low_checks None) is ok at its low end; a banded one is when every requirement is
    # admitted at the band's low end, and is not when one is refused there
    def low(*admitted: bool) -> tuple[SimpleNamespace, ...]:
        return tuple(SimpleNamespace(admission=SimpleNamespace(admitted=a)) for a in admitted)

    assert Outcome(deployment=DEP).ok_at_low_end
    assert Outcome(deployment=DEP, low_checks=low(True, True)).ok_at_low_end  # type: ignore[arg-type]
    assert not Outcome(deployment=DEP, low_checks=low(True, False)).ok_at_low_end  # type: ignore[arg-type]


def test_an_mtp_candidate_drafts_4_tokens() -> None:
    # fit's MTP candidates run the launch SGLang documents for GLM MTP (docs.sglang.io basic_usage/glm45.html:
    # --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4): 4 draft tokens, set
    q = FitQuery(model_ref="glm-4.5-air", gpus=(find_gpu("h200"),), engines=("sglang",),
                 requirements=Requirements(min_ctx_tokens=131_072), max_gpus=2, mtp=(True,))  # fmt: skip
    deps = list(candidates(load_model("glm-4.5-air"), q))
    assert deps and {d.speculative_num_draft_tokens for d in deps} == {4}
    assert all("speculative_num_draft_tokens" in d.explicit for d in deps)


def test_experts_that_do_not_slice_two_ways_get_an_ep_candidate_at_tp_2(tmp_path: Path) -> None:
    # Qwen3-30B-A3B-FP8 with a moe_intermediate_size of 1,408 (11 blocks of 128): at tp 2 each expert's gate / up
    # is 704 wide, not a multiple of block_n 128 (SGLang fp8.py Fp8MoEMethod.create_weights refuses it), so fit
    # also tries ep 2, where each rank holds whole experts
    cfg = json.loads((Path(__file__).parents[1] / "data" / "hf" / "qwen3-30b-a3b-fp8" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "moe_intermediate_size": 1_408}))
    q = FitQuery(model_ref=str(path), gpus=(find_gpu("h200"),), engines=("sglang",),
                 requirements=Requirements(min_ctx_tokens=4_096), max_gpus=2, mtp=(False,))  # fmt: skip
    assert sorted({(d.tp, d.ep) for d in candidates(load_model(str(path)), q)}) == [(1, 1), (2, 1), (2, 2)]


def test_a_one_token_bound_of_a_one_token_prompt_is_a_whole_hit() -> None:
    # fresh seed 27437: reuse_bound 1 of 1 prompt token is 1,000,000 ppm, over the 600,000 asked: 1,000,000 ×
    # 999,999 // 600,000 = 1,666,665, capped at 999,998 for a trace not held (dividing by 2 would give 833,332)
    t = _trace(bound_tokens=1, prompt_tokens=1, hit_tokens=0)
    assert Outcome(deployment=DEP, trace=t).closeness_ppm == 999_998


def test_no_gpus_is_refused() -> None:
    # --max-gpus 0 searches nothing: refused as input, as a negative count is
    with pytest.raises(InputError, match=r"--max-gpus must be positive, got 0"):
        _glm_query(max_gpus=0)
    assert _glm_query(max_gpus=1).max_gpus == 1  # one GPU is a search (of TP1 candidates)


def test_a_candidate_missing_the_flat_requirements_is_not_replayed(tmp_path: Path) -> None:
    # only the candidates that meet the requirements replay the trace (``_replay_group``): one with a plan that the
    # requirements refused (here pruned) keeps no trace check and is not counted unreplayed; the one beside it that
    # meets them replays and holds it (6 pages: test_fit_trace)
    spec = spec_for(write_trace(tmp_path / "t.jsonl", SMALL))
    group = [Outcome(deployment=DEP, plan=trace_plan(pages=6), pruned="refused"),  # type: ignore[arg-type]
             Outcome(deployment=DEP, plan=trace_plan(pages=6))]  # type: ignore[arg-type]  # fmt: skip
    q = FitQuery(model_ref="x", gpus=(), engines=("sglang",), requirements=Requirements(min_ctx_tokens=256),
                 trace=spec)  # fmt: skip
    assert _replay_group(group, q) == 0
    assert [(o.trace is not None, o.unreplayed) for o in group] == [(False, False), (True, False)]


def test_the_closest_miss_is_the_one_meeting_the_largest_share() -> None:
    # nothing fits: two candidates holding a trace short of --min-hit 60 %, at 50 % (500,000 × 999,999 // 600,000 =
    # 833,332 ppm) and 30 % (499,999 ppm): the closest is the 50 % one, whatever the order they were planned in
    q = FitQuery(model_ref="x", gpus=(), engines=("sglang",), requirements=Requirements(min_ctx_tokens=256))
    near = Outcome(deployment=DEP, trace=_trace(hit_tokens=500, prompt_tokens=1_000))
    far = Outcome(deployment=DEP, trace=_trace(hit_tokens=300, prompt_tokens=1_000))
    assert (near.closeness_ppm, far.closeness_ppm) == (833_332, 499_999)
    assert Fit(query=q, outcomes=(far, near), skipped=0).closest is near


def test_tp_sizes_add_the_powers_of_two_that_do_not_divide() -> None:
    # fit searches tp over the powers of two up to --max-gpus and its divisors (fit.py module doc): for 24, the
    # divisors 1, 2, 3, 4, 6, 8, 12, 24 and the power 16
    assert tp_sizes(24) == (1, 2, 3, 4, 6, 8, 12, 16, 24)
