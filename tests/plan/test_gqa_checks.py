"""Checks by kind: what exists only with an indexer, and what a model without one pays (issue 11 item 5)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.models.from_hf import load_model
from kvplan.plan.prefix import pairs, prefix_hit
from kvplan.plan.workspace import WorkspaceQuery, workspace
from kvplan.units import MiB
from tests.engines.test_gqa_goldens import _plan

runner = CliRunner(env={"KVPLAN_FORMAT": None})
HF = Path(__file__).resolve().parents[1] / "data" / "hf"
SETS = ["--set", "kv_cache_dtype=auto", "--set", "page_size=1"]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_workspace_has_no_indexer_buffers_without_an_indexer(engine: str) -> None:
    w = workspace(_plan(engine, "llama-3.1-70b", tp=8), WorkspaceQuery(batch=1))
    names = {i.name for i in w.items}
    for dsa_only in ("prefill logits", "decode logits", "prefill top-k indices", "decode top-k indices",
                     "topk_indices_buffer", "per-layer top-k", "indexer prefill buffer"):  # fmt: skip
        assert dsa_only not in names
    if engine == "sglang":
        # CUDA graphs: decode max_bs 512 × 2 MiB + the non-MLA prefill graph 58 sizes × 8 MiB = 1,488 MiB
        (graphs,) = (i for i in w.items if i.name == "CUDA graphs (estimate)")
        assert graphs.bytes == (512 * 2 + 58 * 8) * MiB
    else:
        # vLLM's room is its persistent non-KV items; the 512 MiB logits cap is an indexer's
        assert w.room_bytes == sum(i.bytes for i in w.items if i.phase == "persistent")


def test_workspace_dsa_keeps_its_buffers() -> None:
    w = workspace(_plan("sglang", "glm-5.3", tp=8), WorkspaceQuery(batch=1))
    assert {"prefill logits", "decode top-k indices"} <= {i.name for i in w.items}


def test_prefix_counts_attention_pairs_without_an_indexer() -> None:
    # Llama-3.1-70B: L = 32,768, P = 16,384 (page 1: R = 16,384); pairs(L) = 32,768 × 32,769 / 2 = 536,887,296;
    # saved R(R + 1)/2 = 134,225,920 (25.0 %, not the naive 50 %); FLOPs per pair = 64 heads × (128 + 128) × 2
    # = 32,768 per layer, × 80 layers
    h = prefix_hit(_plan("sglang", "llama-3.1-70b", tp=8), 32768, 16384)
    assert h.counts == "attention"
    assert (h.pairs_total, h.pairs_saved) == (pairs(32768), pairs(16384)) == (536_887_296, 134_225_920)
    assert h.flops(1) == 64 * (128 + 128) * 2 * 80
    assert h.indexer_bytes_saved == 0
    # bytes read per key: the main KV of one token on one GPU (40,960 B at TP8)
    assert h.indexer_k_bytes_per_key == 40_960


def test_prefix_mla_pairs_use_qk_nope_plus_rope() -> None:
    # DeepSeek-V3 prefill: 128 heads × ((128 + 64) + 128) × 2 = 81,920 FLOPs per pair per layer, 61 layers
    h = prefix_hit(_plan("sglang", "deepseek-v3", tp=8, kv_cache_dtype="bf16"), 8192, 4096)
    assert h.flops(1) == 128 * (192 + 128) * 2 * 61


@pytest.mark.parametrize(
    "args",
    [
        ["admit", "--ctx", "32K"],
        ["budget", "--ctx", "32K"],
        ["workspace"],
        ["prefix", "--ctx", "32K", "--hit", "16K"],
        ["transfer", "--ctx", "32K"],
    ],
)
@pytest.mark.parametrize("model", ["llama-3.1-70b", "qwen3-235b-a22b", "glm-4.5-air", "deepseek-v3"])
def test_commands_work_for_every_kind(args: list[str], model: str) -> None:
    r = runner.invoke(app, [*args, "--model", model, *SETS, "--set", "context_length=32768", "--format", "json"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    text = r.stdout
    assert "MLA latent on each" not in text
    if args[0] == "admit":
        assert doc["main_only"] is None  # the main-only comparison only where there is an indexer


def test_tables_say_no_indexer() -> None:
    r = runner.invoke(
        app, ["budget", "--ctx", "32K", "--model", "llama-3.1-70b", *SETS, "--set", "context_length=32768"]
    )
    assert r.exit_code == 0, r.stderr
    assert "main GQA KV" in r.stdout
    # issue 23 (words for every model): a model without an indexer gets no indexer column, row or share at all
    # (was an 'indexer: none ... every byte is main KV' row and an all-zero indexer column)
    assert "indexer" not in r.stdout.lower()


@pytest.mark.parametrize(
    ("model", "line"),
    [
        # 8 kv heads // 8 = 1 per rank: 1 × (128 + 128) × 2 B × 80 layers = 40,960 B/token
        ("llama-3.1-70b", "80 × GQA, 8 kv heads × 128 → 1 per rank at tp 8 (40,960 B/token bf16)"),
        # 4 kv heads < 8 ranks: max(1, 0) = 1, replicated: 256 × 2 × 94 = 48,128
        ("qwen3-235b-a22b", "94 × GQA, 4 kv heads × 128 → 1 per rank, replicated at tp 8 (48,128 B/token bf16)"),
        # (512 + 64) × 2 × 61 = 70,272; raw fp8 576 × 61 = 35,136
        (
            "deepseek-v3",
            "61 × MLA, latent 512 + rope 64, replicated on every rank (70,272 B/token bf16, 35,136 raw fp8)",
        ),
    ],
)
def test_models_show_says_each_layer_kind(model: str, line: str) -> None:
    r = runner.invoke(app, ["models", "show", model, "--format", "json"])
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["model"]["cache_kinds_at_tp8"] == [line]


def test_weights_line_says_the_quantization_and_its_assumptions(tmp_path: Path) -> None:
    # an unknown quant_method is planned as bf16 and said on the weights line, never silently
    config = json.loads((HF / "llama-3.1-8b" / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "weird_q", "bits": 3}
    path = tmp_path / "weird" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    dep = replace(_plan("sglang", "llama-3.1-8b").deployment, weights_per_gpu=None)  # the estimate, not a figure
    p = plan_pool(load_model(str(path)), dep)
    origin = p.knob("weights_per_gpu").origin
    assert "ASSUMPTION" in origin and "weird_q" in origin
    fp8 = plan_pool(load_model(str(HF / "qwen3-235b-a22b-fp8" / "config.json")), p.deployment)
    assert "fp8 e4m3" in fp8.knob("weights_per_gpu").origin and "ASSUMPTION" not in fp8.knob("weights_per_gpu").origin


def test_validate_tensors_are_the_engines_own() -> None:
    from kvplan.probes.tensors import pool_tensors

    # SGLang MHATokenToKVPool: per layer k_buffer and v_buffer of (rows + page, kv heads per rank, head_dim), bf16;
    # at TP4, 8 // 4 = 2 heads: 80 layers × 2 tensors, together the plan's allocated bytes
    p = _plan("sglang", "llama-3.1-70b", tp=4)
    t = pool_tensors(p)
    k0 = next(x for x in t if x.name == "k_buffer[0]")
    assert (k0.shape, k0.dtype) == ((p.rows + 1, 2, 128), "bfloat16")
    assert sum(x.nbytes for x in t if x.group == "pool") == p.allocated_bytes == (p.rows + 1) * 2 * 256 * 2 * 80
    # vLLM: one backing tensor of num_blocks × bytes_per_block
    v = _plan("vllm", "llama-3.1-70b", tp=4)
    (kv,) = (x for x in pool_tensors(v) if x.group == "pool")
    assert kv.nbytes == v.extras["num_blocks"] * 16 * 2 * 256 * 2 * 80


def test_gate_default_contexts_stop_at_the_model_length() -> None:
    from kvplan.models.deploy import Requirements
    from kvplan.plan.gate import DEFAULT_CONTEXTS, promised_contexts

    # defaults 128K and 1M: a 131,072-position Llama keeps 128K only; Qwen3's 40,960 keeps its own length;
    # GLM-5.3's 1,048,576 keeps both (its DSA gate figures unchanged); a promise is kept whatever the model
    assert DEFAULT_CONTEXTS == (131_072, 1_048_576)
    assert promised_contexts(Requirements(), 131_072) == (131_072,)
    assert promised_contexts(Requirements(), 40_960) == (40_960,)
    assert promised_contexts(Requirements(), 1_048_576) == DEFAULT_CONTEXTS
    assert promised_contexts(Requirements(min_ctx_tokens=1 << 20), 131_072) == (1 << 20,)
