"""The doctor on hybrid start-up logs (issue 13's done-when, issue 14's corpus): SGLang's Mamba state pool and SWA pool
lines, vLLM's page-unification lines, read from real public logs; a hybrid log is never read as a uniform model's
(no model candidates from uniform presets, no draft pool from a SWA pool's second line, no 'match' against a
uniform default deployment), and with the model's own config the doctor compares the log with the hybrid engine
rules (kvplan.engines.vllm_hybrid)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.runbook.doctor import diagnose
from kvplan.runbook.evidence import gather
from kvplan.runbook.parse import Gib, parse_log
from kvplan.units import cdiv
from tests.runbook.conftest import LOGS, body

runner = CliRunner(env={"KVPLAN_FORMAT": None})

GDN = LOGS / "doctor-sglang-hybrid-gdn-qwen3.5-moe-tp2-ktransformers-1870.log"
SWA = LOGS / "doctor-sglang-hybrid-swa-mimo-v2-flash-tp4-sglang-pr-15464.log"
SWA_SIZES = LOGS / "doctor-sglang-hybrid-swa-pool-sizes-mimo-v2-flash-sglang-pr-18039.log"
PAGE = LOGS / "doctor-vllm-hybrid-page-alignment-qwen3.5-xpu-vllm-pr-37467.log"
GPT_OSS = LOGS / "field" / "vllm-hybrid-gpt-oss-20b-h100-llmd-planner-tp2.log"
GPT_OSS_CONFIG = LOGS.parents[1] / "data" / "vllm_hybrid" / "gpt-oss-20b" / "config.json"


def doctor_json(*args: str) -> dict[str, object]:
    r = runner.invoke(app, ["doctor", *args, "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    data = json.loads(r.stdout)
    assert isinstance(data, dict)
    return data


def test_sglang_mamba_state_pool_line() -> None:
    run = parse_log(body(GDN), GDN.name).chosen
    assert run.hybrid == "linear state" and len(run.mamba) == 2 and len(run.kv) == 2 and not run.draft_kv
    m = run.mamba[0].value
    assert (m.slots, m.conv.text, m.ssm.text) == (82, "0.13", "7.29")
    # the state of one slot on one rank (Qwen3.5-397B-A17B's GDN at tp 2, ssm float32, conv bf16):
    # ssm 45 layers x 64 // 2 heads x 128 x 128 x 4 B = 94,371,840 B; conv 45 x 3 x (2 x 16 x 128 + 64 x 128) // 2
    # x 2 B = 1,658,880 B; 83 slots (82 + 1 padding) -> 7.2949 GiB and 0.1282 GiB, printed 7.29 and 0.13
    ssm = 45 * (64 // 2) * 128 * 128 * 4
    conv = 45 * 3 * ((2 * 16 * 128 + 64 * 128) // 2) * 2
    assert m.ssm.covers(83 * ssm) and m.conv.covers(83 * conv)
    e = gather(run)
    slot = next(f for f in e.facts if f.name.startswith("bytes of one Mamba state slot"))
    assert slot.low is not None and slot.high is not None and slot.low <= ssm + conv <= slot.high
    # the K/V rows are the 15 full-attention layers': 15 x 1 kv head x 256 x 2 x 2 B = 15,360 B a row
    assert e.per_row_low is not None and e.per_row_high is not None
    assert e.per_row_low <= 15 * 256 * 2 * 2 <= e.per_row_high and "full-attention layers only" in e.per_row_how
    assert e.hybrid == "linear state" and not e.candidates


def test_sglang_swa_pool_second_line_is_the_full_pool_not_a_draft() -> None:
    # SWAKVPool builds the SWA pool first and the full pool second on every rank (mem_cache/swa_memory_pool.py); the
    # excerpt starts after TP0's and TP3's SWA lines, so a rank's first line in it may be its full pool: the K/V
    # sizes of a rank's second line (K 4.82 + V 3.21 GB) mark the full pool
    run = parse_log(body(SWA), SWA.name).chosen
    assert run.hybrid == "sliding window" and not run.draft_kv
    assert sorted(k.rank or "" for k in run.kv) == ["TP0", "TP1", "TP2", "TP3"]
    assert {(k.value.k.text, k.value.v.text) for k in run.kv if k.value.k and k.value.v} == {("4.82", "3.21")}
    assert {k.value.k.text for k in run.swa_kv if k.value.k} == {"41.76"} and len(run.swa_kv) == 2
    assert run.swa_pool is not None and run.swa_pool.value.usage is not None
    # SWAKVPool's mem usage is both pools' K + V: 41.76 + 27.84 + 4.82 + 3.21 = 77.63 GB (as printed)
    assert run.swa_pool.value.usage.text == "77.63" and run.swa_pool.value.full_tokens == 1_496_958


def test_sglang_swa_pool_sizes_line() -> None:
    run = parse_log(body(SWA_SIZES), SWA_SIZES.name).chosen
    assert run.swa_pool is not None
    sizes = run.swa_pool.value
    # swa = int(full x swa_full_tokens_ratio 0.8) // page 64 x 64 = int(375,360 x 0.8) // 64 x 64 = 300,288
    assert (sizes.full_tokens, sizes.swa_tokens) == (375_360, int(375_360 * 0.8) // 64 * 64)
    # the two K/V lines have 300,288 rows: the SWA pool's (the full pool's lines are not in the excerpt)
    assert len(run.swa_kv) == 2 and not run.kv and not run.draft_kv


def test_swa_log_alone_is_never_a_match_against_the_default_deployment() -> None:
    # regression: the SWA lines alone against the default deployment (GLM-5.3, not a hybrid) headlined MATCH
    for path in (SWA_SIZES, SWA, GDN, PAGE):
        data = doctor_json("--log", str(path))
        h = data["headline"]
        assert isinstance(h, dict) and h["kind"] == "cannot_tell" and h["cause"] is None and h["missing"], path.name


def test_vllm_page_unification_lines() -> None:
    # a start cut after the two lines used to exit 2 ('no engine startup lines')
    run = parse_log(body(PAGE), PAGE.name).chosen
    assert run.engine == "vllm" and run.hybrid == "linear state"
    assert run.hybrid_block is not None and run.mamba_padding is not None
    # Qwen3.5-9B at tp 2 (ssm float32): Mamba page = 32 // 2 heads x 128 x 128 x 4 B + 3 x (2 x 16 x 128 + 32 x 128)
    # // 2 x 2 B = 1,048,576 + 24,576 = 1,073,152 B; attention 4 // 2 kv heads x 256 x 2 x 2 B = 2,048 B a token:
    # cdiv(1,073,152, 2,048) = 524 -> a multiple of 16: 528; padding (528 x 2,048 - 1,073,152) / 1,073,152 = 0.76 %
    mamba = (32 // 2) * 128 * 128 * 4 + 3 * ((2 * 16 * 128 + 32 * 128) // 2) * 2
    block = cdiv(cdiv(mamba, 2_048), 16) * 16
    assert run.hybrid_block.value == block == 528
    assert run.mamba_padding.value == f"{(block * 2_048 - mamba) * 100 / mamba:.2f}" == "0.76"


def test_vllm_hybrid_log_against_its_config_is_the_logs_memory_not_another_model() -> None:
    # regression: gpt-oss-20b TP2 on vLLM 0.19.0 with its own config read as ANOTHER MODEL: the byte check took
    # 'GPU KV cache size' for num_blocks x block, but a hybrid logs num_blocks // 2 groups x 16 (vLLM 0.19.0). The
    # engine's hybrid rules: 2 groups of 12 layers, a block 12 x 16 x 4 kv heads x 64 x 2 x 2 B = 196,608 B; the
    # log's tokens back to blocks with the engine's map inverted (kv_cache_utils._report_kv_cache_config before
    # 0.20.1: num_blocks // 2 x 16 = 2,591,776): num_blocks 323,972 .. 323,973 (issue 24: was 323,971, the plan's
    # own ratio, which logs 2,591,760), and 59.32 GiB (63,688,996,291 .. 63,699,733,708 B) over them is
    # 63,688,996,291 // 323,974 + 1 .. 63,699,733,708 // 323,972 = 196,587 .. 196,621 B a block: the config's 196,608.
    # With the log's memory the config's rows give the logged 2,591,776 tokens (the plan: 2,591,728 at 59.32 GiB)
    sets = ("engine=vllm", "engine_version=0.19.0", "gpu=h100-sxm", "tp=2", "kv_cache_dtype=auto", "page_size=default",
            "mla_layout=default", "dcp=1", "context_length=8192", "max_num_batched_tokens=8192",
            f"model={GPT_OSS_CONFIG}")  # fmt: skip
    arch = load_model(str(GPT_OSS_CONFIG))
    d = diagnose(arch, load_deployment(None, sets), parse_log(body(GPT_OSS), GPT_OSS.name))
    f = d.byte_fact
    assert f is not None and f.agrees and f.config == 12 * 16 * 4 * 64 * 2 * 2 == 196_608
    assert (f.low, f.high) == (63_688_996_291 // (323_973 + 1) + 1, 63_699_733_708 // 323_972)
    assert d.headline.kind in ("memory", "match") and d.headline.cause is None
    c = d.comparison
    assert c is not None and c.low <= 2_591_776 <= c.high and c.within
    assert Gib.parse("59.32").low_bytes == 63_688_996_291 and Gib.parse("59.32").high_bytes == 63_699_733_708
