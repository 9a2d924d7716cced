"""admit's checks, remedies and notes read number by number (issue 26: every message that carries a number has a
test that reads it). Figures are derived in the comments from the engines' rules; the GLM-5.3 8×H200 terms
they start from are the catalog's and the recipe's:

- H200: CUDA total 150,109,945,856 B (143,156 MiB to torch); SGLang's pre-load free = that − 1 GiB runtime
  overhead = 149,036,204,032 B; weights 94.46 GiB = 101,425,652,695 B a rank (vLLM recipes PR #893).
- A token costs 656 B × 78 layers (fp8_ds_mla) + 132 B × 21 indexer layers = 53,940 B; a 64-token page
  3,452,160 B.
- SGLang default: mem_fraction_static 0.886 -> 567,616 tokens = 8,869 pages (tests/engines/test_sglang.py).
- vLLM default: 8,388 blocks, 8,387 after the null block; non-KV = requested − available = 138,101,150,188
  − 28,959,817,153 = 109,141,333,035 B, none of it depending on gpu_memory_utilization.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.plan.admit import Admission, Check, Request, admit
from tests.conftest import make_plan

M = 1 << 20
VLLM = "glm-5.3-8xh200-vllm"
runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})


def _check(a: Admission, name: str) -> Check:
    return next(c for c in a.checks if c.name == name)


def test_sglang_check_details_carry_their_numbers() -> None:
    # 1M on SGLang: cdiv(1,048,576, 64) = 16,384 pages against 8,869; one pool (no DP attention): no spread text
    a = admit(make_plan(), Request(ctx_tokens=M), remedies=False)
    pages = _check(a, "pool pages")
    assert (pages.ok, pages.need, pages.have) == (False, 16_384, 8_869)
    assert pages.detail == "1 × 16,384 pages of 64 tokens"
    running = _check(a, "running requests")
    assert running.detail == "max_running_requests"  # SGLang's own name


def test_vllm_check_details_carry_their_numbers() -> None:
    # 3 × 250,000 on vLLM: 3 × cdiv(250,000, 64) = 3 × 3,907 = 11,721 blocks against 8,387
    a = admit(make_plan(VLLM), Request(ctx_tokens=250_000, concurrent=3), remedies=False)
    pages = _check(a, "pool pages")
    assert (pages.need, pages.have, pages.detail) == (11_721, 8_387, "3 × 3,907 pages of 64 tokens")
    assert _check(a, "running requests").detail == "max_num_seqs"  # vLLM's name


def test_dp_attention_spreads_the_requests_in_the_details() -> None:
    # SGLang --enable-dp-attention --dp 2: each DP rank schedules its own requests into its own pool, so 8
    # requests are at most ceil(8 / 2) = 4 a pool: 4 × cdiv(120,000, 64) = 4 × 1,875 = 7,500 pages
    a = admit(make_plan(dp_attention=2, context_length="128K"), Request(ctx_tokens=120_000, concurrent=8))
    pages = _check(a, "pool pages")
    assert pages.need == 7_500
    assert pages.detail == "4 × 1,875 pages of 64 tokens (8 requests over 2 DP-attention ranks, a pool each)"
    running = _check(a, "running requests")
    assert (running.need, running.detail) == (4, "max_running_requests per DP rank")


def test_vllm_memory_remedy_searches_up_to_0_98() -> None:
    # vLLM's KV budget is ceil(CUDA total × gpu_memory_utilization) − non-KV (gpu_worker.determine_available_memory).
    #   0.98: ceil(147,107,746,938.88) − 109,141,333,035 = 37,966,413,904 B // 3,452,160 = 10,997 blocks, 10,996
    #         usable = 703,808 tokens logged (blocks × 64)
    #   0.97: 36,465,314,446 B // 3,452,160 = 10,563 blocks, 10,562 usable
    # 2 × 351,872 tokens = 2 × 5,498 = 10,996 blocks: only 0.98 (admit's top step, the engine's < 1) holds them
    p = make_plan(VLLM)
    a = admit(p, Request(ctx_tokens=351_872, concurrent=2))
    mem = [(r.value, r.pool_tokens) for r in a.remedies if r.knob == "gpu_memory_utilization"]
    assert mem == [(0.98, 703_808)]
    # one token more: 2 × 5,499 = 10,998 blocks > 10,996: no utilization step holds them
    b = admit(p, Request(ctx_tokens=351_873, concurrent=2))
    assert all(r.knob != "gpu_memory_utilization" for r in b.remedies)


def test_sglang_memory_remedy_prints_its_slack() -> None:
    # 580,000 tokens need cdiv(580,000, 64) = 9,063 pages = 580,032 rows × 53,940 B = 31,286,926,080 B of pool.
    # profile_max_num_token: pool = pre-load free × mfs − weights, so mfs >= (31,286,926,080 + 101,425,652,695)
    # / 149,036,204,032 = 0.89047 -> 0.891 in SGLang's 0.001 steps: 149,036,204,032 × 0.891 − 101,425,652,695
    # = 31,365,605,097 B // 53,940 = 581,490 rows -> 581,440 in whole pages. The slack it leaves outside the pool:
    # 149,036,204,032 × (1 − 0.891) = 16,244,946,239 B = 15.13 GiB (16.24 GB).
    args = ["admit", "--ctx", "580000", "--set", "dcp=1"]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    line = next(x for x in r.stdout.splitlines() if "--set mem_fraction_static=" in x)
    assert "--set mem_fraction_static=0.891" in line and "581,440 tokens" in line
    assert "leaves 15.13 GiB (16.24 GB) of slack outside the pool" in " ".join(r.stdout.split())
    assert "{size:" not in r.stdout
    j = runner.invoke(app, [*args, "-f", "json"])
    mem = next(m for m in json.loads(j.stdout)["remedies"] if m["knob"] == "mem_fraction_static")
    assert (mem["value"], mem["pool_tokens"], mem["sizes"]) == (0.891, 581_440, {"slack": 16_244_946_239})
    assert mem["detail"] == "leaves 15.13 GiB (16.24 GB) of slack outside the pool"


def test_the_pool_shorter_than_the_context_length_note() -> None:
    # SGLang's scheduler caps a request at min(context_len, max_total_num_tokens) − 1 (Scheduler.max_req_input_len):
    # a pool of 567,616 tokens under --context-length 1,048,576 is the pool binding, and the note says so
    short = make_plan()
    assert "KV pool holds 567,616 tokens, fewer than --context-length 1,048,576." in short.notes
    # --context-length 128K = 131,072 < 567,616: no such note
    assert not any("fewer than --context-length" in n for n in make_plan(context_length="128K").notes)


def test_dp_attention_is_offered_only_when_one_copy_fits() -> None:
    # 1 × 1M on SGLang: one copy does not fit (16,384 > 8,869 pages), and a DP rank's pool holds no more than the
    # TP pool (MLA keeps the whole latent on every rank): dcp is the remedy, dp attention is not
    a = admit(make_plan(), Request(ctx_tokens=M))
    assert [r.knob for r in a.remedies] == ["dcp"]
    # 2 × 351,872 on vLLM: one copy fits (5,498 of 8,387 blocks), two do not: dp attention 2 puts
    # ceil(2 / 2) = 1 request in each rank's pool
    b = admit(make_plan(VLLM), Request(ctx_tokens=351_872, concurrent=2))
    dp = next(r for r in b.remedies if r.knob == "dp_attention")
    assert dp.value == 2 and dp.detail.endswith("at most 1 of the 2 requests each")


def test_more_gpus_starts_at_twice_the_tp() -> None:
    # GLM-5.3 on 8×H100: 94.46 GiB of weights a rank (the TP8 measurement) > 78.20 GiB pre-load free
    # (85,044,756,480 B CUDA total − 1 GiB): the engine cannot load, no knob on 8 GPUs helps. The first doubling,
    # tp 16, needs 16 ranks = 2 nodes of 8 and halves the per-rank weights (experts and attention split 16 ways),
    # so it is the remedy; 32 GPUs would be more than needed.
    a = admit(make_plan(gpu="h100"), Request(ctx_tokens=128 * 1024))
    assert a.plan.startup_error is not None and "78.20 GiB (83,971,014,656 B) pre-load free" in a.plan.startup_error
    assert [r.flags for r in a.remedies] == ["--set tp=16 --set nodes=2"]
    assert a.remedies[0].detail.startswith("16 GPUs on 2 node(s) of 8: weights {size:weights} a GPU (estimated;")


def test_workspace_check_names_each_engines_room() -> None:
    # SGLang: the room is the slack outside the pool, pre-load free × (1 − mem_fraction_static 0.886)
    # = 149,036,204,032 × 0.114 = 16,990,127,259 B, a margin that can bind
    ws = _check(admit(make_plan(), Request(ctx_tokens=M), remedies=False), "workspace")
    assert (ws.have, ws.reserved) == (16_990_127_259, False)
    assert ws.detail == "req_to_token, CUDA graphs, indexer logits, top-k outside the pool"
    # vLLM: the profile reserved what it measured before sizing the KV cache (need == have, never binding)
    v = _check(admit(make_plan(VLLM), Request(ctx_tokens=M), remedies=False), "workspace")
    assert v.reserved and v.detail == "DSA buffers counted in vLLM's non-KV profile, logits capped at 512 MiB"


def test_more_gpus_goes_up_to_64_times_the_tp() -> None:
    # Qwen3-235B-A22B bf16 on one RTX 4090 (pre-load free 24,309,137,408 B), SGLang: the pool is pre-load free ×
    # mem_fraction_static − weights (profile_max_num_token). The reserve grows with tp × pp
    # (handle_gpu_memory_settings), the weights a rank shrink with the split (the preset's tensors, per rank):
    #   tp 32: mfs 0.533: 24,309,137,408 × 0.533 = 12,956,770,238 < 14,973,361,152 B of weights: no KV cache
    #   tp 64: mfs 0.366: 24,309,137,408 × 0.366 − 7,640,570,880 = 1,256,573,411 B // 48,128 B a row = 26,108
    #          rows (page 1): a 4,096-token request fits
    # so the remedy is the sixth doubling, 64 GPUs on 8 nodes of 8 (admit widens a layout up to 64× its tp).
    # (DeepSeek-V3 served here before: from issue 23's load checks its fp8 128-blocks refuse tp 32 and 64.)
    p = make_plan(model="qwen3-235b-a22b", gpu="rtx-4090", tp=1, context_length="4K", page_size="default",
                  kv_cache_dtype="auto", mla_layout="default", attention_backend="default")  # fmt: skip
    a = admit(p, Request(ctx_tokens=4096))
    assert [r.flags for r in a.remedies] == ["--set tp=64 --set nodes=8"]
    knobs = {"context_length": "4K", "page_size": "default", "kv_cache_dtype": "auto", "mla_layout": "default"}
    wide = make_plan(model="qwen3-235b-a22b", gpu="rtx-4090", tp=64, nodes=8, attention_backend="default", **knobs)
    assert wide.available_bytes == 24_309_137_408 * 366 // 1000 - 7_640_570_880 == 1_256_573_411
    assert wide.rows == 1_256_573_411 // 48_128 == 26_108


def test_sglang_memory_remedy_can_be_the_very_next_step() -> None:
    # 567,680 tokens = 8,870 pages, one more than the default pool's 8,869 (mfs 0.886). One 0.001 step more:
    # 149,036,204,032 × 0.887 − 101,425,652,695 = 30,769,460,281 B // 53,940 = 570,438 rows -> 570,432 in whole
    # pages (8,913): the remedy is 0.887, the first value past the current one
    a = admit(make_plan(), Request(ctx_tokens=567_680))
    mem = [(r.value, r.pool_tokens) for r in a.remedies if r.knob == "mem_fraction_static"]
    assert mem == [(0.887, 570_432)]


def test_remedies_false_asks_only_the_verdict() -> None:
    # the 1M request on SGLang's default pool is refused (16,384 pages against 8,869, above); gate and the band
    # verdict call admit(..., remedies=False) to read the verdict alone, so no re-plan is searched and the
    # rejection carries no remedy, while the default search finds the ones an operator is offered
    assert not admit(make_plan(), Request(ctx_tokens=M), remedies=False).remedies
    assert admit(make_plan(), Request(ctx_tokens=M)).remedies
