"""Issue 13 item 3: every command answers for a hybrid model (budget, admit, prefix, transfer, workspace).

gpt-oss-120b (the preset: 36 layers alternating sliding window 128 with sinks and full attention, 8 kv heads ×
head_dim 64) on the glm-5.3-8xh200-sglang preset (H200, TP8) with kv_cache_dtype fp8_e4m3 and 64-token pages set
as that preset sets them for GLM-5.3 (GLM_KNOBS: since issue 23 a preset's model knobs do not follow --model): at
attention tp 8 a rank holds 8 // 8 = 1 kv head, so one layer's K + V of a token is 2 × 64 × 1 B = 128 B and the
18 layers of each kind 18 × 128 = 2,304 B a token; a 64-token page of 18 layers is 64 × 2,304 = 147,456 B.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.cli._common import load_plan
from kvplan.plan.budget import budget, kind_costs, pool_needs

RUNNER = CliRunner(env={"KVPLAN_FORMAT": None})
GLM_KNOBS = ["kv_cache_dtype=fp8_e4m3", "page_size=64"]
GLM_SETS = [a for k in GLM_KNOBS for a in ("--set", k)]
PAGE_BYTES = 64 * 2_304  # 147,456 B: one page (SGLang) / one block (vLLM, group size 18 × 64 × 128 B)


def _json(args: list[str]) -> dict:  # type: ignore[type-arg]
    r = RUNNER.invoke(app, [*args, "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_budget_kinds_split_window_and_full() -> None:
    p = load_plan("gpt-oss-120b", None, GLM_KNOBS)
    kinds = {k.kind: k for k in kind_costs(p)}
    swa, full = kinds["sliding window 128 + sinks"], kinds["GQA"]
    assert (full.per, full.layers, full.bytes_per_token, full.request_max_bytes) == ("token", 18, 2_304, 0)
    # the window holds at most 128 tokens: 128 × 2,304 = 294,912 B, whatever the context
    assert (swa.per, swa.layers, swa.bytes_per_token, swa.request_max_bytes) == ("window", 18, 2_304, 294_912)


def test_budget_per_pool_sglang_golden() -> None:
    b = budget(load_plan("gpt-oss-120b", None, GLM_KNOBS), (8_192, 131_072))
    (full_8k, swa_8k), (full_128k, swa_128k) = b.pools_per_context
    # full attention: ceil(8,192 / 64) = 128 pages, ceil(131,072 / 64) = 2,048 pages, × 147,456 B
    assert (full_8k.units, full_8k.bytes) == (128, 128 * PAGE_BYTES) == (128, 18_874_368)
    assert (full_128k.units, full_128k.bytes) == (2_048, 301_989_888)
    # SGLang's SWA pool: window 128 + SGLANG_SWA_EVICTION_INTERVAL 128 = 256 tokens -> ceil(256 / 64) + 2 = 6
    # pages (compute_swa_request_cap), at 8K and at 128K alike: 6 × 147,456 = 884,736 B
    assert (swa_8k.units, swa_128k.units, swa_128k.bytes) == (6, 6, 884_736)


def test_budget_per_pool_vllm_golden() -> None:
    p = load_plan("gpt-oss-120b", None, ["engine=vllm", *GLM_KNOBS])
    (need,) = pool_needs(p, 131_072)
    full, sw = need.demands
    # full attention group: ceil(131,072 / 64) = 2,048 blocks; the sliding-window group keeps window − 1 +
    # in-flight = 128 − 1 + 2 × max_num_batched_tokens 8,192 = 16,511 tokens: ceil(16,511 / 64) = 258 + 1 = 259
    assert (full.units, sw.units) == (2_048, 259)
    assert (need.units, need.bytes) == (2_307, 2_307 * PAGE_BYTES) == (2_307, 340_180_992)


def test_budget_per_kind_bytes_add_up_to_the_total() -> None:
    for sets in ([], ["engine=vllm"]):
        b = budget(load_plan("gpt-oss-120b", None, [*sets, *GLM_KNOBS]), (1, 8_192, 1_000_000))
        for needs in b.pools_per_context:
            for n in needs:
                assert sum(d.bytes for d in n.demands) == n.bytes


def test_budget_command_prints_kinds_and_pools_for_a_hybrid() -> None:
    d = _json(["budget", "--model", "gpt-oss-120b", *GLM_SETS, "--ctx", "128K"])
    assert [k["kind"] for k in d["kinds"]] == ["sliding window 128 + sinks", "GQA"]
    (ctx,) = d["per_context"]
    # 2,048 + 6 pages × 147,456 B = 302,874,624 B (was 2,048 × 147,456 = 301,989,888: the full layers only)
    assert ctx["total_bytes"] == 2_054 * PAGE_BYTES == 302_874_624
    r = RUNNER.invoke(app, ["budget", "--model", "gpt-oss-120b", *GLM_SETS, "--ctx", "128K"])
    assert "main GQA + sliding-window KV" not in r.stdout and "Pools on one GPU" in r.stdout


def test_budget_of_a_uniform_model_is_unchanged() -> None:
    b = budget(load_plan(None, None, []), (8_192,))
    assert b.kinds == () and b.pools_per_context == ()


def test_admit_shows_each_pool_for_a_hybrid() -> None:
    d = _json(["admit", "--ctx", "128K", "--model", "gpt-oss-120b", *GLM_SETS, "--set", "engine=vllm"])
    (pool,) = d["need_by_pool"]
    # 2,048 full attention + 259 sliding window blocks (test_budget_per_pool_vllm_golden) × 147,456 B
    assert (pool["units"], pool["bytes"]) == (2_307, 340_180_992)
    full, swa = _json(["admit", "--ctx", "128K", "--model", "gpt-oss-120b", *GLM_SETS])["need_by_pool"]
    # SGLang: 2,048 full-attention pages and 6 SWA pages (test_budget_per_pool_sglang_golden)
    assert (full["units"], swa["units"], swa["bytes"]) == (2_048, 6, 884_736)
    r = RUNNER.invoke(app, ["admit", "--ctx", "128K", "--model", "gpt-oss-120b", *GLM_SETS])
    assert "884,736 B" in r.stdout and "main KV per GPU" not in r.stdout


def test_qwen3_next_state_kind_on_both_engines(tmp_path: Path) -> None:
    from tests.engines.test_sglang_hybrid import _qwen3_next

    model = _qwen3_next(tmp_path)
    sets = ["tp=4", "kv_cache_dtype=auto", "context_length=32768", "weights_per_gpu=20GiB", "page_size=64"]
    p = load_plan(model, None, sets)
    kinds = {k.per: k for k in kind_costs(p)}
    # GDN state at tp 4, SGLang (conv bf16, recurrent fp32): 536,576 B a layer × 36 = 19,316,736 B a request
    # (tests/engines/test_sglang_hybrid.py test_qwen3_next_golden_tp4); full attention 1 kv head × (256 + 256) × 2 B
    # × 12 layers = 12,288 B a token
    assert (kinds["request"].layers, kinds["request"].request_max_bytes) == (36, 19_316_736)
    assert (kinds["token"].layers, kinds["token"].bytes_per_token) == (12, 12_288)
    full, state = pool_needs(p, 4_096)
    # a 4,096-token request: 64 token pages; 5 state slots (3 + 2 extra-buffer tracking slots) × 19,316,736 B
    assert (full.units, state.units, state.bytes) == (64, 5, 5 * 19_316_736)


def test_workspace_runs_on_a_hybrid_and_its_walls_use_the_pools() -> None:
    from kvplan.plan.workspace import WorkspaceQuery, walls, workspace

    for sets, batch_wall, pool in (
        # The weights a GPU at tp 8 are the MXFP4 experts as the Triton MoE backend holds them (both engines on
        # H200): 36 × 241,041,408 B (tests/models/test_mxfp4_layout.py derives the layer) + the rest, 9,266,716,352
        # B; 1,080,225,856 B more than kvplan took before (8,186,490,496 B: the checkpoint's expert values and
        # scales, without the biases, the sinks and the swizzled scale copy). 7,326 pages of 147,456 B fewer.
        # SGLang: the full-attention pool's 466,514 pages (470,584 − 4,070) hold 466,514 // 2,048 = 227 requests of
        # 131,072 tokens (the SWA pool's 373,211 = 376,467 − 3,256 pages would hold 373,211 // 6 = 62,201)
        ([], 227, "pool: full attention (18 layers)"),
        # vLLM: 825,508 blocks (832,834 − 7,326: 1,080,225,856 / 147,456 = 7,325.75, floored on the rest) // 2,307
        # blocks a 131,072-token request (test_budget_per_pool_vllm_golden) = 357 (832,834 before;
        # and 830,274 before gpt-oss's monolithic MXFP4 MoE took no fused-MoE workspace in the profile: +
        # 8,192 × 4 × (2,880 + 2,880) × 2 B = 377,487,360 B = 2,560 blocks of 147,456 B)
        (["engine=vllm"], 357, "pool: vLLM block pool"),
    ):
        p = load_plan("gpt-oss-120b", None, [*sets, *GLM_KNOBS])
        assert p.pools[0].capacity in (466_514, 825_508)
        q = WorkspaceQuery(batch=1, ctx=131_072)
        assert workspace(p, q).pool_fits
        b, d, _ = walls(p, q)  # was: exit 2 on the MTP wall's re-plan with speculative decoding
        assert (b.largest_fitting, b.breaks) == (batch_wall, pool)
        # the draft-token wall stops at the deployment's 0: neither engine's hybrid plan has speculative decoding
        assert d.largest_fitting == 0 and d.breaks.startswith("not planned: kvplan does not yet plan speculative")
        # batch_wall + 1 requests no longer fit in the binding pool
        assert not workspace(p, WorkspaceQuery(batch=batch_wall + 1, ctx=131_072)).pool_fits


def test_workspace_command_exit_0_on_a_hybrid() -> None:
    r = RUNNER.invoke(app, ["workspace", "--model", "gpt-oss-120b", "--format", "json"])
    assert r.exit_code == 0, r.output


def test_transfer_moves_the_window_not_every_token() -> None:
    from kvplan.plan.transfer import transfer

    for sets in ([], ["engine=vllm"]):
        t = transfer(load_plan("gpt-oss-120b", None, [*sets, *GLM_KNOBS]), 100_000)
        # full attention: cdiv(100,000, 64) = 1,563 pages = 100,032 rows × 2,304 B = 230,473,728 B
        assert t.main_bytes_per_rank == 100_032 * 2_304 == 230_473_728
        # SGLang _swa_payload: start = (100,000 − 128) // 64 × 64 = 99,840; cdiv(160, 64) = 3 pages = 192 rows
        (swa,) = t.hybrid
        assert (swa.tokens, swa.bytes_per_rank) == (192, 192 * 2_304) == (192, 442_368)
        # was 230,473,728 B a rank (the full layers only); now + the window: 230,916,096 B, × 8 ranks
        assert t.bytes_per_rank == 230_916_096 and t.total_bytes == 8 * 230_916_096
    # token unit: exactly min(window 128, moved) rows
    (swa,) = transfer(load_plan("gpt-oss-120b", None, GLM_KNOBS), 100_000, unit="token").hybrid
    assert swa.tokens == 128


def test_transfer_moves_one_state_per_request(tmp_path: Path) -> None:
    from kvplan.plan.transfer import transfer
    from tests.engines.test_sglang_hybrid import _qwen3_next

    sets = ["tp=4", "kv_cache_dtype=auto", "context_length=32768", "weights_per_gpu=20GiB"]
    t = transfer(load_plan(_qwen3_next(tmp_path), None, sets), 4_096)
    (state,) = t.hybrid
    # 36 GDN layers × 536,576 B at tp 4 = 19,316,736 B, whatever the context; full: 4,096 rows × 12,288 B
    assert (state.per, state.bytes_per_rank) == ("request", 19_316_736)
    assert t.bytes_per_rank == 4_096 * 12_288 + 19_316_736


def test_prefix_hit_per_kind_and_engine_rules() -> None:
    from kvplan.plan.prefix import HYBRID_APPROXIMATION, prefix_hit

    for sets, rule in (([], "SGLang (UnifiedRadixCache, SWA component)"), (["engine=vllm"], "vLLM prefix reuse")):
        h = prefix_hit(load_plan("gpt-oss-120b", None, [*sets, *GLM_KNOBS]), 100_000, 50_000)
        # min(50,000, 99,999) // 64 × 64 = 49,984 tokens reused (781 pages)
        assert h.reusable_tokens == 49_984
        # full attention and sliding window: 49,984 rows × 2,304 B each = 115,163,136 B not written
        assert h.main_bytes_saved == 49_984 * 2_304 == 115_163_136
        (swa,) = h.kinds_saved
        assert swa.bytes == 115_163_136
        assert h.hybrid_rules[0].startswith(rule) and h.hybrid_rules[-1] == HYBRID_APPROXIMATION


def test_prefix_on_a_mamba_hybrid_per_vllm_version(tmp_path: Path) -> None:
    from kvplan.plan.prefix import prefix_hit
    from tests.engines.test_sglang_hybrid import _qwen3_next

    model = _qwen3_next(tmp_path)
    sets = ["tp=4", "kv_cache_dtype=auto", "context_length=32768", "weights_per_gpu=20GiB", "engine=vllm"]
    h = prefix_hit(load_plan(model, None, sets), 30_000, 20_000)
    # vLLM 0.33 'align': the hit ends on a whole aligned block (320 tokens here): 20,000 // 320 × 320 = 19,840
    assert h.plan.logical_page_tokens == 320 and h.reusable_tokens == 19_840
    (state,) = h.kinds_saved
    assert state.bytes == 0  # the state is copied, one state written either way
    # vLLM 0.25: a Mamba hybrid runs without prefix caching: nothing reused
    old = prefix_hit(load_plan(model, None, [*sets, "engine_version=0.25.0"]), 30_000, 20_000)
    assert old.reusable_tokens == 0 and "without prefix caching" in old.rule


def test_simulate_deploy_says_what_it_approximates_for_a_hybrid(tmp_path: Path) -> None:
    rows = [{"timestamp": i, "input_length": 2048, "output_length": 1, "hash_ids": [0, 1, 2, 3 + i]} for i in range(4)]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["simulate", str(trace), "--deploy", "glm-5.3-8xh200-sglang"]
    d = _json([*base, "--model", "gpt-oss-120b", *GLM_SETS])
    # the full-attention pool's 466,514 pages (test_workspace_runs_on_a_hybrid_and_its_walls_use_the_pools)
    assert d["capacity_units"] == 466_514 and "HYBRID, APPROXIMATED" in d["capacity_text"]
    assert "APPROXIMATED" not in _json(base)["capacity_text"]  # a uniform model: no such sentence


def test_a_foreign_preset_gives_no_mtp_to_a_model_without_mtp_layers(tmp_path: Path) -> None:
    dep = tmp_path / "d.yaml"
    dep.write_text(
        'schema_version: 1\nname: t-mtp\nmodel: glm-5.3\nengine: sglang\nengine_version: "0.5.23"\ngpu: h200\n'
        "gpus_per_node: 8\nnodes: 1\ntp: 8\nspeculative_num_draft_tokens: 3\n"
    )
    # gpt-oss-120b has no MTP layers: the GLM-5.3 preset's 3 draft tokens are dropped, said in a note (was exit 2:
    # SGLang's hybrid plan refuses speculative decoding)
    p = load_plan("gpt-oss-120b", str(dep), [])
    assert p.deployment.speculative_num_draft_tokens == 0
    assert any("speculative_num_draft_tokens=3 is not applied to gpt-oss-120b" in n for n in p.notes)
    # the preset's own model keeps them; a --set keeps them too (and the hybrid is refused in one line, exit 2)
    assert load_plan(None, str(dep), []).deployment.speculative_num_draft_tokens == 3
    r = RUNNER.invoke(
        app, ["budget", "-d", str(dep), "--model", "gpt-oss-120b", "--set", "speculative_num_draft_tokens=3"]
    )
    assert r.exit_code == 2
