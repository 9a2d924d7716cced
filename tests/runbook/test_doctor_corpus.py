"""The doctor over the whole corpus of real public start-up logs (issue 14 item 5 and "done when").

Every log in tests/data/logs/field/, the doctor-* logs in tests/data/logs/ and the shared excerpts in
../shared/logs/ is a real public log with a provenance header (source, selection, the engine arithmetic). Run as a
person runs it at 3 a.m. -- ``kvplan doctor --log FILE``, no --model, no --deploy -- each must end in a headline
that is right or says "cannot tell" with what to add, never a wrong cause, and exit 2 only for a log with no
start-up line. Where the log's figures fix the bytes of one pool row, the true bytes of the model it names (the
arithmetic in the comment, from the model's config) lie in the doctor's derived range.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.runbook.parse import parse_log
from tests.runbook.conftest import LOGS, SHARED_LOGS, run_doctor
from tests.runbook.test_field_logs import DOCTOR_CASES, config_path, text_of

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def corpus() -> list[Path]:
    logs = sorted((LOGS / "field").glob("*.log")) + sorted(LOGS.glob("doctor-*.log"))
    if SHARED_LOGS.is_dir():
        logs += sorted(SHARED_LOGS.glob("*.log"))
    return logs


@dataclass(frozen=True)
class Expect:
    headline: str
    """The headline's kind with the log alone: 'cannot_tell' or 'refused' (no config given: never a cause)."""
    row_bytes: int | None = None
    """The true bytes of one pool row (SGLang: per row of one rank; vLLM: per token, or per block for V0), from
    the model's config; None where the log's figures give no range (or, for vllm-project/vllm#21348's LMCache run,
    a range the plain K/V shape is not in: the issue's own question)."""
    fits: str | None = None
    """A preset that must be among the ranked candidates that fit."""


L8 = 32 * 8 * 128 * 2 * 2  # Llama-3.1-8B: 32 layers × 8 kv heads × head_dim 128 × (K, V) × 2 B = 131,072 B
MLA61 = 61 * (512 + 64) * 2  # DeepSeek-V3 / Kimi-K2 MLA latent: 61 layers × (512 + 64) × 2 B = 70,272 B
EXPECT: dict[str, Expect] = {
    # SGLang 0.5.3 before #11309: 'KV size' counts the 656-B fp8 rows only: 61 × 656 = 40,016 B
    "sglang-deepseek-v3.2-exp-b200-sglang-pr-11309-main.log": Expect("cannot_tell", 61 * 656),
    # #11309 (0.5.4): 'KV size' with the index K: 61 × (656 + 132) = 48,068 B
    "sglang-deepseek-v3.2-exp-b200-sglang-pr-11309.log": Expect("cannot_tell", 61 * (656 + 132)),
    "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log": Expect("cannot_tell", MLA61, "kimi-k2"),
    "sglang-llama-3.1-8b-24gb-maxuhl98-thesis.log": Expect("cannot_tell", L8, "llama-3.1-8b at tp 1"),
    # no KV line: the free-memory drop gives an upper bound only (no candidates from it)
    "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log": Expect("cannot_tell"),
    "sglang-llama-3.1-8b-h100-sglang-pr-4760.log": Expect("cannot_tell", L8, "llama-3.1-8b at tp 1"),
    # Qwen3-235B at tp 4: 94 layers × max(1, 4 // 4) kv head × 128 × 2 × 2 B = 48,128 B
    "sglang-qwen3-235b-a22b-fp8-h100-vllm-issue-21348.log": Expect(
        "cannot_tell", 94 * 128 * 4, "qwen3-235b-a22b at tp 4"
    ),
    "vllm-deepseek-v2-lite-h100-llmd-planner-tp1.log": Expect("cannot_tell", 27 * (512 + 64) * 2),  # 31,104 B
    **{
        f"vllm-llama-3.1-8b-h100-llmd-planner-tp1{s}.log": Expect("cannot_tell", L8, "llama-3.1-8b")
        for s in ("", "-ctx2048", "-ctx4096", "-ctx16384", "-ctx32768", "-dtbf16", "-dtf16")
    },
    "vllm-llama-3.1-8b-h100-llmd-planner-tp1-kvfp8.log": Expect("cannot_tell", L8 // 2, "llama-3.1-8b"),  # fp8: 1 B
    "vllm-llama-3.1-8b-h100-llmd-planner-tp2.log": Expect("cannot_tell", L8 // 2, "llama-3.1-8b"),  # 4 kv heads/rank
    "vllm-llama-3.1-8b-h100-llmd-planner-tp4.log": Expect("cannot_tell", L8 // 4, "llama-3.1-8b"),
    # Llama-3.3-70B: 80 layers × (8 // tp) kv heads × 128 × 2 × 2 B: tp 2 163,840 B, tp 4 81,920 B
    "vllm-llama-3.3-70b-fp8-h100-llmd-planner-tp2.log": Expect("cannot_tell", 80 * 4 * 128 * 4, "llama-3.1-70b"),
    "vllm-llama-3.3-70b-fp8-h100-llmd-planner-tp4.log": Expect("cannot_tell", 80 * 2 * 128 * 4, "llama-3.1-70b"),
    "vllm-mixtral-8x7b-h100-llmd-planner-tp2.log": Expect("cannot_tell", 32 * 4 * 128 * 4),  # 65,536 B
    "vllm-qwen3-30b-a3b-h100-llmd-planner-tp1.log": Expect("cannot_tell", 48 * 4 * 128 * 4),  # 98,304 B
    "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log": Expect("cannot_tell", 36 * 8 * 128 * 4),  # 147,456
    "vllm-qwen3-8b-h100-llmd-planner-tp1.log": Expect("cannot_tell", 36 * 8 * 128 * 4),
    "vllm-v0-deepseek-r1-tp8-vllm-pr-14842.log": Expect("cannot_tell"),
    # V0 per block: 16 × 32 layers × 32 kv heads × 128 × 2 × 2 B = 8,388,608 B (Llama-2-7b, MHA)
    "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log": Expect("cannot_tell", 16 * 32 * 32 * 128 * 4),
    "vllm-v0-meta-llama-3-8b-h100-vllm-pr-10511.log": Expect("cannot_tell"),
    # V0 per block: 16 × 22 layers × 4 kv heads × 64 × 2 × 2 B = 360,448 B (rho-1b, TinyLlama shape)
    "vllm-v0-rho-1b-h200-grpocredit-0.6.4.log": Expect("cannot_tell", 16 * 22 * 4 * 64 * 4),
    "doctor-sglang-0.4.1-llama-3.1-8b-h100-docs-clipping.log": Expect("cannot_tell", L8, "llama-3.1-8b"),
    "doctor-sglang-kt-deepseek-v3-max-total-tokens-cap-ktransformers-1804.log": Expect(
        "cannot_tell", MLA61, "deepseek-v3"
    ),
    "doctor-sglang-summary-in-issue-title-issue-29575.log": Expect("cannot_tell"),
    "doctor-vllm-ascend-no-available-memory-dp0-issue-5707.log": Expect("refused"),
    "doctor-vllm-ascend-qwen3-14b-negative-kv-issue-9372.log": Expect("refused"),
    "doctor-vllm-max-seq-len-kvfp8-issue-25350.log": Expect("refused"),
    "doctor-vllm-nvfp4-sm120-1m-context-issue-49011.log": Expect("cannot_tell"),
    "doctor-vllm-qwen3-235b-fp8-h100-tp4-issue-21348.log": Expect("cannot_tell"),
    "doctor-vllm-v0-docker-compose-engine-line-livepeer-230.log": Expect("cannot_tell"),
    # V0 per block: 16 × 131,072 = 2,097,152 B
    "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log": Expect("refused", 16 * L8, "llama-3.1-8b at tp 1"),
    "doctor-vllm-v0-two-workers-weights-issue-12664.log": Expect("cannot_tell"),
    # QwQ-32B at tp 4: 64 layers × 2 kv heads × 128 × 2 × 2 B = 65,536 B (qwen3-32b has the same K/V shape)
    "sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log": Expect("cannot_tell", 64 * 2 * 128 * 4, "qwen3-32b"),
    # dcp 8: the logged tokens are ×8, so a token is 70,272 / 8 = 8,784 B of one rank
    "vllm-kimi-k2-thinking-h200-vllm-recipes-tp8-dcp8.log": Expect("cannot_tell", MLA61 // 8, "kimi-k2 at dcp 8"),
    "vllm-kimi-k2-thinking-h200-vllm-recipes-tp8.log": Expect("cannot_tell", MLA61, "kimi-k2"),
    # the summary line alone (12,079 tokens of Qwen3-30B-A3B-GPTQ-Int4): no bytes, no memory; never a knob drift
    "doctor-sglang-kt-qwen3-30b-a3b-gptq-int4-ktransformers-1928.log": Expect("cannot_tell"),
    # vLLM V0 0.4.1 on a W7900 (ROCm): 12,003 blocks, the weights, no KV budget printed: no bytes
    "doctor-vllm-v0-0.4.1-llama-3-8b-w7900-rocm-augmxnt.log": Expect("cannot_tell"),
    # SGLang 0.3.x on MI300X (ROCm): only the free-memory drop over the rows, an upper bound on Llama-3-8B's 131,072 B
    "doctor-sglang-0.3-llama-3-8b-mi300x-rocm-bench-latency-augmxnt.log": Expect("cannot_tell", L8),
    # vLLM V0 (early 2024) refusal of a GPTQ Qwen1.5-7B: 24,320 tokens = 1,520 blocks of 16 (no bytes printed)
    "doctor-vllm-v0-qwen1.5-7b-gptq-int4-rtx3090-max-seq-len-qwen-16.log": Expect("refused"),
    # a deepseek-v4 SGLang build's DSA set-up lines for DeepSeek-V3.2, cut before the pool: a start, not exit 2
    "doctor-sglang-dsv4-build-deepseek-v3.2-dsa-lines-ktransformers-1969.log": Expect("cannot_tell"),
    # hybrids (issue 13's done-when): the K/V rows are the full-attention layers' only, never a uniform preset's
    # Qwen3.5 GDN at tp 2: 15 full layers x max(1, 2 // 2) kv head x 256 x 2 (K, V) x 2 B = 15,360 B
    "doctor-sglang-hybrid-gdn-qwen3.5-moe-tp2-ktransformers-1870.log": Expect("cannot_tell", 15 * 1 * 256 * 2 * 2),
    # MiMo-V2-Flash at tp 4, the full pool (each rank's second line): 9 full layers x 4 // 4 kv heads x (192 + 128)
    # x 2 B = 5,760 B
    "doctor-sglang-hybrid-swa-mimo-v2-flash-tp4-sglang-pr-15464.log": Expect("cannot_tell", 9 * 1 * (192 + 128) * 2),
    "doctor-sglang-hybrid-swa-pool-sizes-mimo-v2-flash-sglang-pr-18039.log": Expect("cannot_tell"),  # SWA lines only
    "doctor-vllm-hybrid-gdn-qwen3.6-35b-a3b-nvfp4-5090-club-3090-612.log": Expect("cannot_tell"),
    "doctor-vllm-hybrid-page-alignment-qwen3.5-xpu-vllm-pr-37467.log": Expect("cannot_tell"),
    # gpt-oss-20b at tp 2, vLLM 0.19.0 logs num_blocks // 2 groups x 16: per logged token 2 groups x 12 layers x
    # 8 // 2 kv heads x 64 x 2 x 2 B / 2 = 24 x 1,024 B = 24,576 B
    "vllm-hybrid-gpt-oss-20b-h100-llmd-planner-tp2.log": Expect("cannot_tell", 24 * 4 * 64 * 2 * 2),
    # Qwen3-30B-A3B (not a hybrid, despite the source repository's name): 48 layers x 4 kv heads x 128 x 2 x 2 B
    **{
        f"{p}sglang-qwen3-30b-a3b-fp8-h100-mystous-vllm-hybrid.log": Expect("cannot_tell", 48 * 4 * 128 * 4)
        for p in ("", "weights-")
    },
    "weights-vllm-deepseek-r1-0528-h200-tp8-vllm-memory-estimator.log": Expect("cannot_tell", MLA61, "deepseek-v3"),
    "weights-vllm-qwen3-235b-a22b-tp8-ep8-issue-18446.log": Expect("cannot_tell"),  # weights lines only
    "weights-vllm-deepseek-v4-flash-h100-tp8-issue-41027.log": Expect("cannot_tell"),  # weights lines only
    # tp 1: 24 x 8 kv heads x 64 x 2 x 2 B = 49,152 B a logged token (vLLM 0.19.0: num_blocks // 2 groups x 16)
    "vllm-hybrid-gpt-oss-20b-h100-llmd-planner-tp1.log": Expect("cannot_tell", 24 * 8 * 64 * 2 * 2),
    # gpt-oss-120b at tp 4 on A100s, vLLM 0.10.1.1 logs num_blocks // 2 groups x 16: per logged token 2 groups x 18
    # layers x 8 // 4 kv heads x 64 x 2 (K, V) x 2 B = 36 x 512 B = 18,432 B
    "vllm-hybrid-gpt-oss-120b-a100-tp4-dennislee22-vllm-benchmarking.log": Expect("cannot_tell", 36 * 2 * 64 * 2 * 2),
    # the tp 2 twin at gpu_memory_utilization 0.95: the same 24,576 B a logged token as the 0.9 run
    "vllm-hybrid-gpt-oss-20b-h100-llmd-planner-tp2-gmu095.log": Expect("cannot_tell", 24 * 4 * 64 * 2 * 2),
    # Qwen3.8-27B-FP8 (GDN hybrid) pool lines alone, no line naming the model: read alone, never against glm-5.3
    "doctor-vllm-hybrid-qwen3.8-27b-fp8-tp2-pool-lines-talos-argocd-pr-1995.log": Expect("cannot_tell"),
    # issue 24: starts that died after their pool lines (CUDA-graph capture), and a refusal pasted over three lines
    "doctor-sglang-qwen3-cuda-graph-capture-exception-after-pool-issue-7227.log": Expect("refused"),
    "doctor-sglang-0.4.8-negative-profiled-value-deepseek-r1-mi300x-issue-7691.log": Expect("refused"),
    "doctor-vllm-repeated-pool-pair-worker-exception-gfx906-vllm-gfx906-44.log": Expect("refused"),
    "doctor-vllm-maxlen-refusal-three-line-paste-spark-vllm-docker-396.log": Expect("refused"),
    "doctor-vllm-v1-enginecore-failed-to-start-issue-17979.log": Expect("refused"),
    # Qwen3.6-27B's pool lines pasted above its non-default args: never a cause from glm-5.3
    "doctor-vllm-qwen3.6-27b-pool-then-args-club-3090-295.log": Expect("cannot_tell"),
    # Kimi-Linear AWQ (vllm#28228): the pool lines name no model; a logged token of a hybrid is no layer's bytes
    "doctor-vllm-hybrid-kimi-linear-awq-tp2-mla-block-960-issue-28228.log": Expect("cannot_tell"),
    # Qwen2.5-72B at max_model_len 131,072 above its 32,768 without VLLM_ALLOW_LONG_MAX_MODEL_LEN: refused
    "doctor-vllm-maxlen-above-derived-refused-longvt-9.log": Expect("refused"),
    # DeepSeek-V4-Flash on 2 x GH200 refused at start-up (max_model_len 30,000): the refusal line alone, no bytes
    "vllm-hybrid-deepseek-v4-flash-gh200-tp2-vllm-issue-44376.log": Expect("refused"),
    # GLM-5-FP8 on 8 x MI355X (SGLang 0.5.9 ROCm): the log's free memory before loading (279.48 GiB) is more than the
    # default deployment's H200 has, so the log is read alone; its rows: fp8_ds_mla 656 B (512 fp8 + 4 fp32 scales +
    # 64 bf16 rope) + the indexer's 132 B (128 fp8 + a 4 B scale), both on all 78 layers = 61,464 B: glm-5's
    "doctor-sglang-0.5.9-glm-5-fp8-mi355x-rocm-preload-usage-ajith-sirra-amd-issues.log": Expect(
        "cannot_tell", 78 * (656 + 132), "glm-5"
    ),
    # Grok-2 on 16 Ascend NPUs (sglang#29853): K + V of one rank, 64 layers x max(1, 8 // 16) kv head x 128 x 2 x 2 B
    # = 32,768 B, as grok-2 at tp 8 (one kv head a rank there too)
    "doctor-sglang-npu-grok-2-tp16-sglang-pr-29853.log": Expect("cannot_tell", 64 * 1 * 128 * 2 * 2, "grok-2 at tp 8"),
    # Qwen3-8B bf16 on one A100-40GB (dariustanrd/tokenkaki, vLLM 0.19.1 and 0.9.2): no preset of it, so cannot tell;
    # its rows: 36 layers x 8 kv heads x 128 x 2 (K, V) x 2 B = 147,456 B a token
    **{
        f"vllm-qwen3-8b-a100-40gb-tokenkaki-{v}.log": Expect("cannot_tell", 36 * 8 * 128 * 2 * 2)
        for v in ("0.19.1", "0.9.2")
    },
    # Qwen3-30B-A3B-FP8 on a GB10 with an fp8 KV cache (guardkit/guardkit, vLLM 0.13.0): 48 layers x 4 kv heads x
    # 128 x 2 x 1 B = 49,152 B a token
    "vllm-qwen3-30b-a3b-fp8-gb10-guardkit.log": Expect("cannot_tell", 48 * 4 * 128 * 2 * 1),
    # Llama-3.1-8B on one A100-40GB (ilseokoh/vllm-gce, vLLM 0.15.1): its 131,072 B a token, the preset at tp 1
    "vllm-llama-3.1-8b-a100-40gb-ilseokoh-vllm-gce.log": Expect("cannot_tell", L8, "llama-3.1-8b at tp 1"),
    # Qwen3-8B on an RTX 4090 (kthxo/distserving, vLLM 0.24.0): 36 x 8 x 128 x 2 x 2 B = 147,456 B a token; the
    # RTX 5090 start prints no 'Available KV cache memory', so no range
    "vllm-qwen3-8b-rtx-4090-kthxo-distserving.log": Expect("cannot_tell", 36 * 8 * 128 * 2 * 2),
    "vllm-qwen3-8b-rtx-5090-kthxo-distserving.log": Expect("cannot_tell"),
    # Qwen3-Coder-30B-A3B on 4 x L40S (aws-samples, vLLM 0.24.0): 48 layers x 1 kv head a rank (4 // tp 4) x 128 x 2
    # x 2 B = 24,576 B a token; its 'GPU KV cache size:         1,037,152 tokens' is aligned by spaces in the paste
    "vllm-qwen3-coder-30b-a3b-l40s-tp4-aws-samples-claude-code-multi-model.log": Expect(
        "cannot_tell", 48 * 128 * 2 * 2
    ),
    **{
        f"{engine}-llama-3.1-8b-a40-vireshkoli-llm-inference-optimization.log": Expect(
            "cannot_tell", L8, "llama-3.1-8b at tp 1"
        )
        for engine in ("sglang", "vllm")
    },
}


def test_corpus_has_at_least_40_real_logs_of_both_engines() -> None:
    logs = corpus()
    assert len(logs) >= 40, len(logs)
    assert sum("sglang" in p.name for p in logs) >= 10 and sum("vllm" in p.name for p in logs) >= 20
    for p in logs:
        head = p.read_text(encoding="utf-8").split("\n", 2)[:2]
        assert head[0] == "# real public log excerpt" and head[1].startswith("# source: "), p.name


@pytest.mark.parametrize("path", corpus(), ids=lambda p: p.name.removesuffix(".log"))
def test_corpus_log_alone(path: Path) -> None:
    expect = EXPECT.get(path.name)
    assert expect is not None, f"{path.name}: a corpus log needs its expected headline in EXPECT"
    r = runner.invoke(app, ["doctor", "--log", str(path), "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    data = json.loads(r.stdout)
    h = data["headline"]
    assert h["kind"] == expect.headline, (path.name, h)
    assert r.exit_code == (1 if expect.headline == "refused" else 0)
    assert h["cause"] is None  # no config given: never a cause
    if expect.headline == "cannot_tell":
        assert h["missing"], "a 'cannot tell' says what to add"
    rows = data["evidence"]["bytes_per_row"]
    if expect.row_bytes is not None:
        assert rows is not None and rows["low"] <= expect.row_bytes <= rows["high"], (path.name, rows)
    if expect.fits is not None:
        fits = [c["name"] for c in data["evidence"]["candidates"] if c["fits"]]
        assert expect.fits in fits, (path.name, fits)


@pytest.mark.parametrize("case", DOCTOR_CASES, ids=lambda c: c.log.removesuffix(".log"))
def test_corpus_with_the_stated_deployment(case: object, tmp_path: Path) -> None:
    # the same logs with the deployment their headers state: the rows and the log's budget give the log's pool, so
    # the headline is a match, the log's memory (the config's own memory estimate differs), or a knob the log
    # shows -- never another model, never an unexplained mismatch
    from tests.runbook.test_field_logs import DoctorCase

    assert isinstance(case, DoctorCase)
    cfg = config_path(case.model, tmp_path)
    d = run_doctor(text_of(case.log), sets=(f"model={cfg}", *case.sets), model=cfg)
    assert d.headline.kind in ("match", "memory", "cause"), (case.log, d.headline, d.problems)
    assert d.byte_fact is None or d.byte_fact.agrees
    if d.headline.kind == "cause":
        assert any(r.drift for r in d.revealed)  # a knob the log prints (mem_fraction_static), not a fitted one


def test_corpus_parses_and_exits_2_only_without_startup_lines(tmp_path: Path) -> None:
    for path in corpus():
        assert parse_log(path.read_text(encoding="utf-8"), path.name).runs
    empty = tmp_path / "noise.log"
    empty.write_text("# a comment\nhello\n", encoding="utf-8")
    r = runner.invoke(app, ["doctor", "--log", str(empty)])
    assert r.exit_code == 2 and r.stderr.startswith("kvplan: error: ") and r.stderr.count("\n") == 1
