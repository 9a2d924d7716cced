"""Issue 24, items 2 (rest), 5 (rest) and 6: regression tests on verbatim public logs and configs.

Every expected figure is derived in a comment from the engine's source (file and function) or the log itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.engines.vllm_hybrid_log import blocks_for_logged_tokens
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.runbook.parse import parse_log
from tests.runbook.conftest import LOGS, body, line_of

runner = CliRunner(env={"KVPLAN_FORMAT": None})

VLLM = "glm-5.3-8xh200-vllm"  # a preset with no page_size of its own: the block is vLLM's default
KIMI_LINEAR_LOG = LOGS / "doctor-vllm-hybrid-kimi-linear-awq-tp2-mla-block-960-issue-28228.log"
# the `vllm serve` line of vllm#28228 (its header): tp 2 on RTX 3090s, 0.95, 120,000, 64,000, 8 seqs, bf16 KV
KIMI_LINEAR_SETS = ("tp=2", "gpu=rtx-3090", "engine=vllm", "engine_version=0.11.1", "context_length=120000",
                    "max_num_batched_tokens=64000", "max_running_requests=8", "gpu_memory_utilization=0.95",
                    "kv_cache_dtype=auto")  # fmt: skip


def _args(sets: tuple[str, ...]) -> list[str]:
    return [a for s in sets for a in ("--set", s)]


def test_item2_kimi_linear_on_vllm_0_11_1_aligns_its_mla_block_to_64() -> None:
    """vLLM 0.11.1 model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config: an MLA
    model's kernel_block_alignment_size is 64 (128 only with CUTLASS_MLA); attn_block_size = 64 × cdiv(mamba page,
    64 × MLA page of one token). Kimi-Linear at tp 2: KDA state 16 heads × 128 × 128 × 4 B + conv 3 × 3 × 2,048 × 2 B
    = 1,048,576 + 36,864 = 1,085,440 B; MLA row (512 + 64) × 2 = 1,152 B: 64 × cdiv(1,085,440, 73,728) = 64 × 15
    = 960 (kvplan planned 16 × cdiv(1,085,440, 18,432) = 944 before the fix)."""
    p = plan_pool(
        load_model("kimi-linear-48b-a3b"), load_deployment(VLLM, ("model=kimi-linear-48b-a3b", *KIMI_LINEAR_SETS))
    )
    assert p.extras["state_bytes"] == 1_085_440
    assert p.extras["block_size"] == 960
    # group size 7 (7 MLA, 20 KDA: 20 >= 1.5 × 7), 1 + cdiv(20, 7) = 4 groups; 7 × 960 × 1,152 = 7,741,440 B
    assert (p.extras["group_size"], p.extras["kv_cache_groups"], p.extras["bytes_per_block"]) == (7, 4, 7_741_440)
    # per request at 120,000 ('none' mode before 0.26: one state block a KDA group): cdiv(120,000, 960) + 3 = 128
    assert p.extras["blocks_per_request"] == 128


def test_item2_the_0_27_rule_still_aligns_mla_to_128() -> None:
    # from 0.27.0 platforms/interface.py _align_hybrid_block_size: MLA at least 128: 128 × cdiv(1,085,440, 147,456)
    # = 128 × 8 = 1,024 (tests/engines/test_vllm_hybrid.py pins the tp 1 case at 1,920)
    sets = (*tuple(s for s in KIMI_LINEAR_SETS if not s.startswith("engine_version=")), "engine_version=0.28.0")
    p = plan_pool(load_model("kimi-linear-48b-a3b"), load_deployment(VLLM, ("model=kimi-linear-48b-a3b", *sets)))
    assert p.extras["block_size"] == 1_024


def test_blocks_for_logged_tokens_inverts_the_engine_map() -> None:
    # before 0.20.1 (kv_cache_utils._report_kv_cache_config): tokens = num_blocks // groups × block; 318 // 4 × 960
    # = 75,840 (vllm#28228), and so do 316 .. 319
    assert blocks_for_logged_tokens(75_840, version="0.11.1", groups=4, block=960, blocks_per_request=128,
                                    max_model_len=120_000) == (316, 319)  # fmt: skip
    # from 0.20.1 (get_kv_cache_capacity): tokens = int(num_blocks / 128 × 120,000); 318 → 298,125
    low, high = blocks_for_logged_tokens(298_125, version="0.20.1", groups=4, block=960, blocks_per_request=128,
                                         max_model_len=120_000)  # fmt: skip
    assert low <= 318 <= high and all(int(n / 128 * 120_000) == 298_125 for n in range(low, high + 1))


def test_item2_kimi_linear_log_is_not_another_model() -> None:
    """vllm-project/vllm#28228: 'Available KV cache memory: 2.30 GiB', 'GPU KV cache size: 75,840 tokens' (= 79 ×
    960: num_blocks 316 .. 319; 'Maximum concurrency … 2.48x' = 318 / 128). 2.30 GiB (±0.005) over 316 .. 319 blocks
    is 7,700,117 .. 7,832,199 B a block, which holds the 7,741,440 B of 7 × 960 × 1,152. Before the fix: "ANOTHER
    MODEL: the log's KV budget over 80 blocks … kimi-linear-48b-a3b's rows take 7,612,416 B" (944-token blocks,
    and the logged tokens divided by one block as if the model were uniform)."""
    r = runner.invoke(app, ["doctor", "--log", str(KIMI_LINEAR_LOG), "--format", "json", "--model",
                            "kimi-linear-48b-a3b", *_args(KIMI_LINEAR_SETS)])  # fmt: skip
    assert r.exit_code in (0, 1), r.output
    data = json.loads(r.stdout)
    h = data["headline"]
    assert h["kind"] != "model", h
    # with the log's 2.30 GiB: 2,464,237,487 .. 2,474,974,904 B // 7,741,440 = 318 .. 319 blocks, // 4 groups × 960
    # = 75,840 both ends: the count is the engine's; only the memory differs (the config's bf16 weights, 45.78 GiB a
    # rank, do not load on a 24 GiB RTX 3090; the server ran 4-bit AWQ weights)
    pool = data["pool"]
    assert (pool["low"], pool["high"], pool["logged"], pool["within"]) == (75_840, 75_840, 75_840, True), pool
    assert h["kind"] == "memory", h
    text = json.dumps(data, ensure_ascii=False)
    assert "KV budget over 316 – 319 blocks" in text, text
    assert "7,612,416" not in text and "over 80 blocks" not in text


def test_item2_kimi_linear_log_alone_names_no_model(tmp_path: Path) -> None:
    # no line of the excerpt names the model: the doctor reads the log alone (issue 24 item 5)
    del tmp_path
    r = runner.invoke(app, ["doctor", "--log", str(KIMI_LINEAR_LOG), "--format", "json"])
    assert r.exit_code == 0, r.output
    h = json.loads(r.stdout)["headline"]
    assert h["kind"] == "cannot_tell" and h["cause"] is None, h


# --------------------------------------------------------------------------- item 5: the long-context knob

LONGVT = LOGS / "doctor-vllm-maxlen-above-derived-refused-longvt-9.log"


def test_item5_a_length_above_the_derived_one_refused_is_a_refused_start() -> None:
    """EvolvingLMMs-Lab/LongVT#9: vLLM's 'User-specified max_model_len (131072) is greater than the derived
    max_model_len (max_position_embeddings=32768.0 …). To allow overriding this maximum, set the env var
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.' (config/model.py _get_and_verify_max_len raises without the env var). Before
    the fix: exit 2, 'no engine startup lines recognised'. The refusal's own advice 'set the env var …=1' is not
    the env var set."""
    run = parse_log(body(LONGVT), LONGVT.name).chosen
    assert run.long_context is None and len(run.errors) == 1
    r = runner.invoke(app, ["doctor", "--log", str(LONGVT)])
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    line = line_of(LONGVT.read_text(encoding="utf-8"), "Value error, User-specified")
    assert f"REFUSED AT STARTUP (line {line}): vLLM refused the length: User-specified max_model_len (131072)" in text


# vLLM after vllm#20904 with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (config/model.py _get_and_verify_max_len:
# logger.warning_once("%s %s", msg, warning)), filled with timothystewart6/vllm-gb10#7's figures (Qwen3-32B,
# max_model_len 131072 above max_position_embeddings 40960 on vLLM 0.20.0, which "warns at startup" and goes on);
# no public log of the whole line was found, so this is the engine's format string, as parse.VLLM_LINES says
VL_WARNING = (
    "User-specified max_model_len (131072) is greater than the derived max_model_len (max_position_embeddings=40960 "
    "or model_max_length=None in model's config.json). VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme "
    "caution. If the model uses relative position encoding (RoPE), positions exceeding derived_max_model_len lead to "
    "nan. If the model uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA "
    "array out-of-bounds error."
)
# SGLang ModelConfig._derive_context_length with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN set (logger.warning(msg))
SG_WARNING = (
    "[2026-05-22 10:00:00] Warning: User-specified context_length (131072) is greater than the derived context_length "
    "(40960). This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may "
    "differ from max_position_embeddings in the model's config."
)
QWEN3_32B = str(LOGS.parent / "hf" / "qwen3-32b" / "config.json")  # max_position_embeddings 40960


LONG_CASES = [
    (VL_WARNING, "vllm"),
    (SG_WARNING, "sglang"),
    ("export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\n" + VL_WARNING, "vllm"),
]


@pytest.mark.parametrize(("text", "engine"), LONG_CASES, ids=["vllm-warning", "sglang-warning", "vllm-env-and-warning"])
def test_item5_the_allowed_long_length_is_the_knob_not_would_not_start(text: str, engine: str, tmp_path: Path) -> None:
    """The warning (or the env var) says the server started above Qwen3-32B's 40,960 with the knob set: the doctor
    reads allow_long_context and the length, and plans with both -- never "would not start" with "User-specified
    max_model_len (131072) …" (vllm.py / sglang.py refuse the length only without allow_long_context)."""
    run = parse_log(text, "warning.log").chosen
    assert run.long_context is not None and run.engine == engine and not run.errors
    path = tmp_path / "warning.log"
    path.write_text(text + "\n", encoding="utf-8")
    code, data = _doctor(path, "--model", QWEN3_32B, "--set", f"engine={engine}", "--set", "tp=2")
    knobs = {r["knob"]: r["log_value"] for r in data["revealed"]}
    assert knobs["allow_long_context"] is True and knobs["context_length"] == 131_072, knobs
    assert data["startup"] is None and code == 0
    assert "User-specified" not in json.dumps(data["plan"]), "the plan refused the length the log shows it ran"
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" not in json.dumps(data["headline"])


def _doctor(path: Path, *args: str) -> tuple[int, dict[str, object]]:
    r = runner.invoke(app, ["doctor", "--log", str(path), "--format", "json", *args])
    assert r.exit_code in (0, 1), r.output
    data: dict[str, object] = json.loads(r.stdout)
    return r.exit_code, data


# --------------------------------------------------------------------------- item 2: the same rule's other branch


@pytest.mark.parametrize(("gpu", "expected"), [("b200", 288), ("h200", 272)])
def test_the_same_rule_aligns_head_256_to_32_on_blackwell(gpu: str, expected: int) -> None:
    """HybridAttentionMambaModelConfig.verify_and_update_config's full-attention branch (the function the Kimi-Linear
    fix reads): kernel_block_alignment_size 32 on SM10x with head_size 256 and FlashInfer (flashinfer#1993), else 16.
    Qwen3-Next-80B at tp 4 on vLLM 0.20.0: attention max(1, 2 // 4) kv head × (256 + 256) × 2 B = 1,024 B a token;
    GDN state (bf16, mamba_ssm_cache_dtype auto) 32 // 4 heads × 128 × 128 × 2 B + conv 3 × (2 × 16 × 128 + 32 × 128)
    // 4 × 2 B = 262,144 + 12,288 = 274,432 B: B200 32 × cdiv(274,432, 32,768) = 288, H200 16 × cdiv(274,432,
    16,384) = 272 (kvplan planned 272 on both before)."""
    sets = ("model=qwen3-next-80b-a3b", f"gpu={gpu}", "tp=4", "engine_version=0.20.0", "kv_cache_dtype=auto",
            "kv_cache_memory=40GiB")  # fmt: skip
    p = plan_pool(load_model("qwen3-next-80b-a3b"), load_deployment(VLLM, sets))
    assert p.extras["state_bytes"] == 274_432 and p.extras["page_bytes"] // p.extras["block_size"] == 1_024
    assert p.extras["block_size"] == expected
