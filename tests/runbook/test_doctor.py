"""The doctor: each fixture's verdict, the cause it names with its numbers, and the runbook checks.

Shared arithmetic (SGLang "GB" are GiB; a printed X.YZ is XYZ × 2^30 // 100 B, exact to ±0.005 GiB):
  Load weight begin avail mem 138.80 -> pre = 149,035,365,171 B (138.795 .. 138.805: 149,029,996,463 .. 149,040,733,880)
  Load weight end avail mem 44.34    -> free = 47,609,712,476 B (44.335 .. 44.345: 47,604,343,768 .. 47,615,081,185)
  available = int((free − pre × (1 − mfs)) GiB), as SGLang computes it in GiB floats:
    mfs 0.886: mid 30,619,680,846; low (free low, pre high) 30,613,700,105; high (free high, pre low) 30,625,661,588
    mfs 0.897: mid 32,259,069,863; low 32,253,148,178; high 32,264,991,549
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.runbook.doctor import CANNOT_CHECK, MATCH, MISMATCH, Diagnosis
from tests.runbook.conftest import KIMI, LOGS, SHARED_LOGS, fixture, line_of, run_doctor, shared

runner = CliRunner(env={"KVPLAN_FORMAT": None})

VLLM = "glm-5.3-8xh200-vllm"
KIMI_SETS = ("kv_cache_dtype=auto", "page_size=64", "context_length=256K")


def cli(tmp_path: Path, text: str, *args: str) -> Result:
    log = tmp_path / "server.log"
    log.write_text(text, encoding="utf-8")
    return runner.invoke(app, ["doctor", "--log", str(log), *args])


def cause_keys(d: Diagnosis) -> list[str]:
    return [c.key for c in d.explaining]


# --------------------------------------------------------------------------- the synthetic fixtures


def test_match_fixture() -> None:
    d = run_doctor(fixture("sglang-0.5.23-glm53-match.log"))
    assert d.status == MATCH and d.problems == ()
    c = d.comparison
    assert c is not None and c.within and c.memory_from_log
    # (a) = (a') = the preset's plan: 567,616 tokens (fixture header); (b) from the log's figures:
    # 30,619,680,846 // 53,940 = 567,661 -> 567,616; low 30,613,700,105 // 53,940 = 567,550 -> 567,488;
    # high 30,625,661,588 // 53,940 = 567,772 -> 567,744
    assert (c.config, c.revealed, c.expected, c.low, c.high, c.logged.value) == (
        567_616,
        567_616,
        567_616,
        567_488,
        567_744,
        567_616,
    )
    assert c.logged.line == line_of(fixture("sglang-0.5.23-glm53-match.log"), "max_total_num_tokens")
    assert all(t.matches for t in d.memory) and not any(r.differs for r in d.revealed)
    # KV size 28.52 GiB: the tensors of 567,616 rows are 30,620,659,200 B (fixture header) = 28.5177 GiB
    assert d.kv_size is not None and d.kv_size.matches and d.kv_size.expected_bytes == 30_620_659_200
    assert not d.kv_size.overcommits
    assert d.causes == ()


def test_match_fixture_cli_exit_0_and_json(tmp_path: Path) -> None:
    text = fixture("sglang-0.5.23-glm53-match.log")
    r = cli(tmp_path, text)
    assert r.exit_code == 0, r.output
    assert any(line.startswith("MATCH: the pool is the one the config implies") for line in r.stdout.splitlines())
    data = json.loads(cli(tmp_path, text, "--format", "json").stdout)
    assert data["schema_version"] == 1 and data["command"] == "doctor" and data["status"] == "match"
    assert data["pool"]["logged"] == 567_616 and data["pool"]["low"] == 567_488 and data["pool"]["high"] == 567_744
    assert data["figures"]["kv"][0]["kv_bytes"] == 2852 * 2**30 // 100
    assert data["plan"]["cell"]["total_bytes"] == 53_940
    md = cli(tmp_path, text, "--format", "markdown")
    assert md.exit_code == 0 and "**MATCH" in md.stdout and "### Findings" in md.stdout


def test_sglang_0_5_9_names_the_indexer_on_all_layers() -> None:
    text = fixture("sglang-0.5.9-glm53-indexer-all-layers.log")
    d = run_doctor(text)
    assert d.status == MISMATCH
    assert d.problems == ("knob mem_fraction_static", "accounting")
    # the log's mem_fraction_static 0.897 is 0.5.9's default (reserved 14,848 MiB), 0.5.23 would pick 0.886
    mfs = next(r for r in d.revealed if r.knob == "mem_fraction_static")
    assert mfs.value == 0.897 and mfs.config_value == 0.886 and "0.5.9" in mfs.explained_by
    c = d.comparison
    assert c is not None and not c.within
    # 0.5.23 accounting at mfs 0.897: 32,259,069,863 // 53,940 = 598,054 -> 598,016; the log says 584,128
    assert (c.expected, c.logged.value) == (598_016, 584_128)
    cause = d.explaining[0]
    assert cause.key == "sglang_0_5_9" and "all 78 layers" in cause.name
    # 0.5.9's cell: 576 × 78 + 132 × 78 = 44,928 + 10,296 = 55,224 B against 0.5.23's 53,940 B
    # its pool: mid 32,259,069,863 // 55,224 = 584,149 -> 584,128; low 32,253,148,178 // 55,224 = 584,042 -> 584,000;
    # high 32,264,991,549 // 55,224 = 584,256 -> 584,256
    assert (cause.cell_bytes, cause.expected_cell_bytes) == (55_224, 53_940)
    assert (cause.value, cause.low, cause.high) == (584_128, 584_000, 584_256)
    # elision off alone (656-B rows, indexer on all 78 layers: 51,168 + 10,296 = 61,464 B) does not explain it
    off = next(x for x in d.causes if x.key == "indexer_all")
    assert off.cell_bytes == 61_464 and not off.explains
    # the pool allocates 656-B rows and 78 index buffers: 35,906,777,088 B (header) > the 32,259,069,863 B budget
    assert d.kv_size is not None and d.kv_size.matches and d.kv_size.overcommits
    assert any("0.5.9" in n for n in d.notes)


def test_sglang_0_5_9_report_prints_the_ratio(tmp_path: Path) -> None:
    r = cli(tmp_path, fixture("sglang-0.5.9-glm53-indexer-all-layers.log"))
    assert r.exit_code == 1
    out = " ".join(r.stdout.split())
    # the headline names the cause (issue 14: one headline, then the evidence)
    assert "0.5.9 CAUSE: indexer on all 78 layers" in out
    assert "SGLang 0.5.9 semantics" in out and "55,224/53,940 = 1.0238" in out  # 55,224 / 53,940 = 1.02380


def test_dcp8_is_not_a_mismatch_when_the_config_has_it() -> None:
    text = fixture("sglang-0.5.23-glm53-dcp8.log")
    d = run_doctor(text, sets=("dcp=8",))
    assert d.status == MATCH, d.problems
    # '#tokens: 480704' rows per rank; the scheduler prints rows × dcp = 480,704 × 8 = 3,845,632
    assert d.per_rank is not None and d.per_rank.consistent
    assert (d.per_rank.rows, d.per_rank.dcp, d.per_rank.logical) == (480_704, 8, 3_845_632)
    c = d.comparison
    # cell 576 × 78 + 132 × 21 × 8 = 67,104 B; mid 32,259,069,863 // 67,104 = 480,732 -> 480,704 × 8 = 3,845,632;
    # low 32,253,148,178 // 67,104 = 480,644 -> 480,640 × 8 = 3,845,120; high 32,264,991,549 // 67,104 = 480,820
    # -> 480,768 × 8 = 3,846,144
    assert c is not None and (c.expected, c.low, c.high) == (3_845_632, 3_845_120, 3_846_144)


def test_dcp8_against_a_dcp1_config(tmp_path: Path) -> None:
    d = run_doctor(fixture("sglang-0.5.23-glm53-dcp8.log"))
    assert d.status == MISMATCH and d.problems == ("knob dcp",)
    dcp = next(r for r in d.revealed if r.knob == "dcp")
    # dcp 8 alone on the config: 567,616 -> 3,845,632 tokens, cell 53,940 -> 67,104 B
    assert (dcp.config_pool, dcp.pool_after, dcp.cell_before, dcp.cell_after) == (567_616, 3_845_632, 53_940, 67_104)
    # trtllm and mfs 0.897 are what SGLang picks under dcp 8 itself: consequences, not drifts
    for knob in ("attention_backend", "mem_fraction_static"):
        r = next(x for x in d.revealed if x.knob == knob)
        assert r.differs and r.consequence and not r.drift
    out = " ".join(cli(tmp_path, fixture("sglang-0.5.23-glm53-dcp8.log"), "--set", "dcp=8").stdout.split())
    assert "per-rank vs logical (not a mismatch)" in out and "dcp 8 × 480,704 rows per rank" in out


def test_bf16_vs_fp8() -> None:
    d = run_doctor(fixture("sglang-0.5.23-glm53-bf16.log"))
    assert d.status == MISMATCH and d.problems == ("knob kv_cache_dtype",)
    kv = next(r for r in d.revealed if r.knob == "kv_cache_dtype")
    assert kv.value == "bfloat16" and kv.drift
    assert kv.shown.startswith("torch.bfloat16")
    # bf16 rows: 1,152 × 78 + 132 × 21 = 92,628 B; 30,620,424,077 // 92,628 = 330,574 -> 330,560 (header)
    assert (kv.cell_before, kv.cell_after, kv.config_pool, kv.pool_after) == (53_940, 92_628, 567_616, 330_560)
    c = d.comparison
    # with the log's memory: 30,619,680,846 // 92,628 = 330,566 -> 330,560 (low 330,496, high 330,624)
    assert c is not None and c.within and (c.expected, c.low, c.high) == (330_560, 330_496, 330_624)
    backend = next(r for r in d.revealed if r.knob == "attention_backend")
    assert backend.consequence  # flashmla_sparse/fa3 is the bf16 default


def test_vllm_max_seq_len_refusal(tmp_path: Path) -> None:
    text = fixture("vllm-0.33.0-glm53-max-seq-len.log")
    d = run_doctor(text, deploy=VLLM, sets=("context_length=1M",))  # the recipe's 1M (the preset ships 512K)
    assert d.status == MISMATCH and d.problems == ("startup",)
    assert d.memory_matches is True
    s = d.startup
    assert s is not None and s.predicted and s.line == line_of(text, "ValueError: To serve")
    # needed = 3,452,160 × 16,384 = 56,560,189,440 B = 52.6758 GiB -> "52.68"
    assert s.planned_needed_bytes == 56_560_189_440 and s.needed is not None and s.needed.covers(56_560_189_440)
    # the estimate from 25.94 GiB ± 0.005: (27,847,494,206 .. 27,858,231,623) − 3,452,160 per block, // 3,452,160
    # = 8,065 .. 8,068 blocks -> 516,160 .. 516,352; the log's 516,288 = 8,067 × 64 is within
    assert (s.planned_estimate_low, s.planned_estimate_high) == (516_160, 516_352)
    assert s.estimated_max_len == 516_288
    c = d.comparison
    assert c is not None and c.logged.unit == "needed" and c.within
    r = cli(tmp_path, text, "--deploy", VLLM)
    assert r.exit_code == 1 and "vLLM refused to start" in r.stdout.replace("\n", " ")


def test_messy_log_uses_the_last_complete_run(tmp_path: Path) -> None:
    text = fixture("sglang-messy-three-starts.log")
    d = run_doctor(text)
    assert d.status == MATCH and d.run.index == 2
    assert d.comparison is not None and d.comparison.logged.value == 567_616
    note = next(n for n in d.notes if "server start" in n)
    assert "3 server start(s)" in note and "using run 2" in note and "skipped run 3" in note
    r = cli(tmp_path, text)
    assert r.exit_code == 0 and "using run 2" in r.stdout.replace("\n", " ")


def test_garbage_exits_2_with_one_line(tmp_path: Path) -> None:
    r = cli(tmp_path, fixture("garbage.log"))
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("kvplan: error: ") and r.stderr.count("\n") == 1
    assert "no engine startup lines recognised; looked for" in r.stderr and "KV Cache is allocated" in r.stderr


def test_missing_log_exits_2_with_one_line(tmp_path: Path) -> None:
    r = runner.invoke(app, ["doctor", "--log", str(tmp_path / "nope.log")])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == f"kvplan: error: log {tmp_path / 'nope.log'}: no such file\n"


# --------------------------------------------------------------------------- the real excerpts


def test_real_sglang_mha_cannot_be_planned(tmp_path: Path) -> None:
    text = shared("sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log")
    d = run_doctor(text)
    assert d.status == CANNOT_CHECK and d.problems == ("model",)
    assert d.model.kind == "mha" and d.model.log_class == "Qwen2ForCausalLM"
    # (K 1.42 + V 1.42 GiB, each ±0.005 GiB) / (46,611 + 1 padding row): 3,038,689,362 // 46,612 = 65,191 ..
    # 3,060,164,198 // 46,612 = 65,651; K + V of 64 layers × (8 KV heads / tp 4) × 128 × 2 B × 2 = 65,536 fits
    assert d.implied is not None and d.implied.low <= 65_536 <= d.implied.high
    # the log's own budget: 6.09 − 21.63 × (1 − 0.85), each ±0.005: 2.83975 .. 2.85125 GiB; the pool of
    # 46,611 × 65,536 = 3,054,698,496 B = 2.8449 GiB lies in it
    assert d.log_budget is not None and d.log_budget[0] <= 46_611 * 65_536 <= d.log_budget[1]
    # the CLI with no --model/--deploy reads this log alone (issue 14 item 5): it is from Qwen2ForCausalLM, not the
    # default deployment's model; it cannot tell (exit 0), says what to add, and ranks the presets whose rows fit:
    # qwen3-32b has the same K/V shape (64 layers × 8 kv heads × 128), 65,536 B per row at tp 4; so has grok-2 at tp 4
    # (64 layers × 2 kv heads × 128 × 2 × 2 B), named after it: its 125.54 GiB of weights a GPU are further from the
    # log's 'mem usage=15.54 GB' than qwen3-32b's ~15 GiB
    r = cli(tmp_path, text)
    out = " ".join(r.stdout.split())
    assert r.exit_code == 0
    assert "CANNOT TELL" in out and "the log is from Qwen2ForCausalLM" in out and "--model" in out
    assert "(the rows of qwen3-32b, grok-2)" in out


def test_real_vllm_kimi_tp8_reproduces_the_collector_arithmetic() -> None:
    text = shared("vllm-kimi-k2-thinking-h200-vllm-recipes-tp8.log")
    d = run_doctor(text, deploy=VLLM, model=str(KIMI), sets=KIMI_SETS)
    assert d.best is not None and d.best.cell.total_bytes == 61 * 1152 == 70_272
    # 46.80 GiB = 50,251,117,363 B; / 70,272 B = 715,094 tokens -> floor to 64 = 715,072 (the collector's check);
    # vLLM's way: 50,251,117,363 // (64 × 70,272 = 4,497,408) = 11,173 blocks × 64 = 715,072
    assert d.log_plan is not None and d.log_plan.extras["bytes_per_block"] == 4_497_408
    assert d.log_plan.extras["num_blocks"] == 11_173 and 50_251_117_363 // 70_272 // 64 * 64 == 715_072
    c = d.comparison
    # ±0.005 GiB: 50,245,748,655 // 4,497,408 = 11,172 .. 50,256,486,072 // 4,497,408 = 11,174 blocks
    assert c is not None and c.within and (c.expected, c.low, c.high) == (715_072, 715_008, 715_136)
    # the model has no parameter groups: its config memory is not a real estimate, so memory is flagged
    assert d.problems == ("memory",)


def test_real_vllm_kimi_matches_with_the_logged_kv_memory() -> None:
    sets = (*KIMI_SETS, "kv_cache_memory=46.80GiB")
    d = run_doctor(shared("vllm-kimi-k2-thinking-h200-vllm-recipes-tp8.log"), deploy=VLLM, model=str(KIMI), sets=sets)
    assert d.status == MATCH, d.problems
    # dcp 8 (revealed by "Multiplying the GPU KV cache size by the dcp_world_size 8"): 11,172 .. 11,174 blocks
    # × 64 × 8 = 5,720,064 .. 5,721,088; the log's 5,721,088 = 715,136 × 8 is 11,174 blocks: within the rounding
    text = shared("vllm-kimi-k2-thinking-h200-vllm-recipes-tp8-dcp8.log")
    d8 = run_doctor(text, deploy=VLLM, model=str(KIMI), sets=(*sets, "dcp=8"))
    assert d8.status == MATCH, d8.problems
    c = d8.comparison
    assert c is not None and (c.expected, c.low, c.high, c.logged.value) == (5_720_576, 5_720_064, 5_721_088, 5_721_088)
    drift = run_doctor(text, deploy=VLLM, model=str(KIMI), sets=sets)
    assert drift.problems == ("knob dcp",)
    assert next(r for r in drift.revealed if r.knob == "dcp").source == "dcp_world_size multiplier"


def test_real_vllm_kimi_against_glm_says_which_model_it_needs(tmp_path: Path) -> None:
    text = shared("vllm-kimi-k2-thinking-h200-vllm-recipes-tp8.log")
    d = run_doctor(text)
    assert d.status == MISMATCH and not d.explaining
    assert any("the log is from vllm" in n for n in d.notes)
    # 50,245,748,655 // (715,072 + 64) + 1 = 70,261 .. 50,256,486,072 // 715,072 = 70,281 B per row:
    # 61 × 1,152 = 70,272 fits (and so does 122 × 576)
    assert d.implied is not None and (d.implied.low, d.implied.high) == (70_261, 70_281)
    assert d.implied.shapes[0].startswith("61 MLA layers × 1152 B (bf16")
    # the CLI (no --model/--deploy): the log's rows are not glm-5.3's, so it reads the log alone (issue 14 item 3):
    # 70,242 .. 70,281 B per token (the KV budget over 715,072 tokens + one block of up to 256 .. over 715,072) fit the
    # presets of the same MLA shape, 61 × (512 + 64) × 2 B = 70,272 B: deepseek-v3 and kimi-k2
    r = cli(tmp_path, text)
    out = " ".join(r.stdout.split())
    assert r.exit_code == 0 and "CANNOT TELL" in out and "--model" in out
    assert "(the rows of deepseek-v3, kimi-k2)" in out


# --------------------------------------------------------------------------- hidden causes (inline logs)

TS = "[2026-03-01 12:00:00 TP0]"


def sglang_log(rows: int, *, logical: int | None = None, end: str = "44.34", usage: str = "94.46",
               dtype: str | None = None, kv_size: str = "28.52") -> str:  # fmt: skip
    """A minimal SGLang log without a ServerArgs dump: only the lines the doctor needs."""
    kv_dtype = f"dtype: {dtype}, " if dtype else ""
    return "\n".join(
        (
            f"{TS} Load weight begin. avail mem=138.80 GB",
            f"{TS} Load weight end. elapsed=1.00 s, type=GlmMoeDsaForCausalLM, avail mem={end} GB, "
            f"mem usage={usage} GB.",
            f"{TS} KV Cache is allocated. {kv_dtype}#tokens: {rows}, KV size: {kv_size} GB",
            f"{TS} max_total_num_tokens={logical or rows}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=2048, context_len=1048576, available_gpu_mem=5.00 GB",
        )
    )


@pytest.mark.parametrize(
    ("rows", "key", "cell"),
    [
        # bf16 rows: 92,628 B; -> 330,560 (as the bf16 fixture)
        (330_560, "layout", 92_628),
        # an MTP draft: + 656 + 132 = 54,728 B; 30,619,680,846 // 54,728 = 559,488 -> 559,488
        (559_488, "mtp", 54_728),
        # elision off, 0.5.23 rows: 656 × 78 + 132 × 78 = 61,464 B; 30,619,680,846 // 61,464 = 498,172 -> 498,112
        (498_112, "indexer_all", 61_464),
    ],
)
def test_hidden_causes(rows: int, key: str, cell: int) -> None:
    d = run_doctor(sglang_log(rows))
    assert d.status == MISMATCH and d.problems == ("accounting",)
    best = d.explaining[0]
    assert (best.key, best.cell_bytes, best.expected_cell_bytes) == (key, cell, 53_940)
    assert best.low <= rows <= best.high


def test_kv_size_states_the_raw_fp8_row() -> None:
    # raw fp8 rows (trtllm): 576 × 78 + 2,772 = 47,700 B; 30,619,680,846 // 47,700 = 641,922 -> 641,920. This log's
    # 'KV size: 28.52 GB' states the row (issue 24 items 8 and 9; was a hidden 'layout' cause): SGLang's tensors of
    # 641,920 rows are (641,920 + 64) × 576 × 78 = 28,843,057,152 B of MLA rows + 10,031 index pages × 8,448 B × 21
    # layers = 1,779,579,648 B, 30,622,636,800 B = 28.5196 GiB -> "28.52"; the fp8_ds_mla rows would take 32.25 GiB.
    # The row is a knob the log prints, read as one: with it the config's accounting gives the log's pool.
    d = run_doctor(sglang_log(641_920))
    r = next(r for r in d.revealed if r.knob == "mla_layout")
    assert (r.value, r.source, r.cell_after, r.drift) == ("fp8", "KV Cache is allocated KV size", 47_700, True)
    assert d.comparison is not None and d.comparison.within and d.problems == ("knob mla_layout",)
    assert d.headline.kind == "cause" and not any(c.key == "layout" for c in d.causes)


def test_hidden_memory_fraction() -> None:
    # mfs 0.850: int((44.34 − 138.80 × 0.15) GiB) = 25,254,407,700 B // 53,940 = 468,194 -> 468,160;
    # 0.001 of 138.80 GiB is ~2,763 tokens, so only 0.850 fits. The KV size of those rows: (468,160 + 64 padding)
    # × 53,940 B = 25,256,002,560 B = 23.5214 GiB -> "23.52" (the rows are the config's: the fit is allowed)
    d = run_doctor(sglang_log(468_160, kv_size="23.52"))
    mf = next(c for c in d.explaining if c.key == "mem_fraction")
    assert mf.name == "mem_fraction_static 0.850 instead of 0.886"
    assert mf.change == "--set mem_fraction_static=0.850" and mf.fitted and not mf.contradicted
    assert d.byte_fact is not None and d.byte_fact.agrees and d.headline.kind == "cause"


def test_fitted_memory_fraction_is_never_reported_against_the_byte_facts() -> None:
    # regression (issue 14, the DeepSeek-V3.2-Exp B200 shape): the same pool with a KV size of 28.52 GiB for
    # 468,160 rows: 30,617,748,112 .. 30,628,485,529 B, i.e. 65,397 .. 65,420 B per row where the config's rows
    # take 25,256,002,560 B (53,940 B each). A memory fraction (0.850) fits the count, but the rows are not the
    # config's rows: the fit is contradicted and never the headline
    d = run_doctor(sglang_log(468_160))
    assert d.byte_fact is not None and not d.byte_fact.agrees
    assert (d.byte_fact.low, d.byte_fact.high, d.byte_fact.config) == (30_617_748_112, 30_628_485_529, 25_256_002_560)
    assert all(c.key != "mem_fraction" for c in d.explaining)
    mf = next(c for c in d.causes if c.key == "mem_fraction")
    assert mf.contradicted and d.headline.kind != "cause"


def test_dcp_from_the_ratio_of_the_two_lines() -> None:
    # no ServerArgs: the scheduler's 3,845,632 over the KV line's 480,704 rows reveals dcp 8
    text = sglang_log(480_704, logical=3_845_632, dtype="torch.float8_e4m3fn", kv_size="30.05")
    d = run_doctor(text)
    dcp = next(r for r in d.revealed if r.knob == "dcp")
    assert dcp.value == 8 and dcp.source == "scheduler max_total_num_tokens / KV #tokens" and dcp.drift
    assert run_doctor(text, sets=("dcp=8",)).status == MATCH


def test_memory_difference_is_not_accounting() -> None:
    # weights 96.00 GiB: free after = 42.80 GiB; int((42.80 − 138.80 × 0.114) GiB) = 28,966,118,437 B
    # // 53,940 = 537,006 -> 536,960
    d = run_doctor(sglang_log(536_960, end="42.80", usage="96.00", dtype="torch.float8_e4m3fn", kv_size="27.00"))
    assert d.problems == ("memory",)
    weights = next(t for t in d.memory if t.name.startswith("weights"))
    # config 94.46 GiB = 101,425,652,695 B is not within 96.00 GiB ± 0.005
    assert weights.matches is False and weights.config_bytes == 101_425_652_695
    assert d.comparison is not None and d.comparison.within and d.comparison.revealed == 567_616


def test_vllm_null_block() -> None:
    # with a logged "Available KV cache memory" one block (3.45 MB) is inside the ±0.005 GiB rounding; with no
    # memory line the comparison is exact. The config's 27,852,520,897 B // 3,452,160 = 8,068 blocks = 516,352
    # tokens; a count one block short (516,288) is the null block
    text = "(EngineCore_DP0 pid=2) INFO 03-01 12:00:01 [k.py:1] GPU KV cache size: 516,288 tokens\n"
    d = run_doctor(text, deploy=VLLM, sets=("context_length=1M",))  # the recipe's 1M (the preset ships 512K)
    assert d.comparison is not None and not d.comparison.memory_from_log
    assert (d.comparison.expected, d.comparison.low, d.comparison.high) == (516_352, 516_352, 516_352)
    assert d.problems == ("pool",)
    assert cause_keys(d) == ["page"] and "null block" in d.explaining[0].name


def test_vllm_block_override() -> None:
    # the profiled count (8,068 blocks, from 25.94 GiB // 3,452,160 B) is checked against the accounting; the pool
    # the engine built is the override: 4,000 blocks × 64 = 256,000 tokens (4,000 − 1 null block usable)
    text = (
        "(Worker_TP0 pid=1) INFO 03-01 12:00:00 [w.py:1] Available KV cache memory: 25.94 GiB\n"
        "(EngineCore_DP0 pid=2) INFO 03-01 12:00:01 [k.py:1] Overriding num_gpu_blocks=8068 with "
        "num_gpu_blocks_override=4000\n"
        "(EngineCore_DP0 pid=2) INFO 03-01 12:00:01 [k.py:1] GPU KV cache size: 256,000 tokens\n"
    )
    d = run_doctor(text, deploy=VLLM, ctx=131_072)
    c = d.comparison
    # 25.94 GiB ± 0.005: 27,847,494,206 // 3,452,160 = 8,066 .. 27,858,231,623 // 3,452,160 = 8,069 blocks
    assert c is not None and c.logged.unit == "blocks" and c.within and (c.low, c.high) == (8_066, 8_069)
    assert d.admission is not None and d.admission.admitted
    # 128K = 2,048 blocks of 64 tokens, against 3,999 usable
    assert d.admission.usable_tokens == 3_999 * 64


# --------------------------------------------------------------------------- the runbook checks


def test_admission_with_the_logs_pool() -> None:
    text = fixture("sglang-0.5.23-glm53-match.log")
    ok = run_doctor(text, ctx=131_072)
    assert ok.status == MATCH and ok.admission is not None and ok.admission.admitted
    # 1M needs 1,048,576 / 64 = 16,384 pages; the log's 567,616 tokens are 8,869 pages
    d = run_doctor(text, ctx=1_048_576)
    assert d.problems == ("admission",) and d.admission is not None
    b = d.admission.binding
    assert (b.name, b.need, b.have) == ("pool pages", 16_384, 8_869)
    assert d.admission.pool_source.startswith("the log's max_total_num_tokens")


def test_prefix_hit_share_of_the_indexer_work() -> None:
    d = run_doctor(fixture("sglang-0.5.23-glm53-match.log"), ctx=512_000, hit=102_400)
    h = d.prefix
    assert d.status == MATCH and h is not None
    # R = min(102,400, 511,999) // 64 × 64 = 102,400; saved R(R+1)/2 = 5,242,931,200 of L(L+1)/2 = 131,072,256,000
    # -> 40,000 ppm (4.0 %), while the naive hit ratio is 102,400 / 512,000 = 200,000 ppm
    assert (h.reusable_tokens, h.pairs_saved, h.pairs_total) == (102_400, 5_242_931_200, 131_072_256_000)
    assert (h.saved_ppm, h.naive_ppm) == (40_000, 200_000)


def test_decode_indexer_read() -> None:
    dr = run_doctor(fixture("sglang-0.5.23-glm53-match.log")).decode
    assert dr is not None
    # context = the pool, 567,616 (< context_len 1,048,576); 132 B × 21 layers = 2,772 B a key
    # 567,616 × 2,772 = 1,573,431,552 B; at 4.8 TB/s: × 10^6 // 4.8 × 10^12 = 327 µs
    # weights from the log: 94.46 GiB = 101,425,652,695 B -> 21,130 µs; 101,425,652,695 / 1,573,431,552 = 64.5 -> 65
    assert (dr.ctx_tokens, dr.indexer_bytes_per_token, dr.indexer_read_bytes) == (567_616, 2_772, 1_573_431_552)
    assert (dr.indexer_us, dr.weights_bytes, dr.weights_us, dr.batch_equal) == (327, 101_425_652_695, 21_130, 65)
    # the sparse MLA read: top-k 2,048 × 656 × 78 = 104,792,064 B, whatever the context
    assert dr.sparse_read_bytes == 104_792_064
    # one request's indexer read equals the weights at 101,425,652,695 // 2,772 = 36,589,340 tokens
    assert dr.crossover_ctx == 36_589_340


# --------------------------------------------------------------------------- the command


def test_help_lists_doctor() -> None:
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0 and "doctor" in r.stdout
    r = runner.invoke(app, ["doctor", "--help"])
    assert r.exit_code == 0 and "--log" in r.stdout and "--hit" in r.stdout


def test_doctor_loads_no_gpu_stack() -> None:
    log = LOGS / "sglang-0.5.23-glm53-bf16.log"
    code = (
        "import sys\n"
        "from kvplan.cli import app\n"
        "from typer.testing import CliRunner\n"
        f"r = CliRunner().invoke(app, ['doctor', '--log', {str(log)!r}])\n"
        "assert r.exit_code in (0, 1), (r.exit_code, r.output)\n"
        "bad = [m for m in ('torch', 'pynvml') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr


def test_shared_logs_path() -> None:
    # the real excerpts are read in place, from the repository's sibling folder
    assert SHARED_LOGS.name == "logs" and SHARED_LOGS.parent.name == "shared"
