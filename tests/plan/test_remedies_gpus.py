"""A deployment whose weights do not load is a verdict, and remedies may add GPUs (issue 12, item 5).

GLM-5.3 FP8 at TP8 takes 94.46 GiB a GPU (measured, vLLM recipes PR #893: 101,425,652,695 B). On an H100
(catalog: NVML 81,559 MiB, CUDA total 81,105 MiB = 85,044,756,480 B) that does not load:
- SGLang: pre-load free = CUDA total − runtime_overhead 1 GiB = 80,081 MiB = 83,971,014,656 B (78.20 GiB);
- vLLM: the weights load into the CUDA total, 85,044,756,480 B (79.20 GiB).
Before issue 12 both were exit 2 ("kvplan: error: the engine does not start"), as if the input were bad; the input
is valid, so the answer is the verdict: REJECTED, exit 1, the chain up to the weights, and remedies that add GPUs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.models.arch import Split
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.admit import Request, admit
from kvplan.units import GiB, MiB, cdiv
from tests.conftest import make_plan

SGLANG, VLLM = "glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"
K = 1024
WEIGHTS_TP8 = 101_425_652_695  # 94.46 GiB, the measured TP8 point
CUDA_H100 = 81_105 * MiB  # 85,044,756,480 B
PRE_H100 = CUDA_H100 - GiB  # 83,971,014,656 B
runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})


def test_glm_on_8xh100_sglang_does_not_load_and_says_why() -> None:
    p = make_plan(SGLANG, gpu="H100")
    assert p.knob("weights_per_gpu").as_int() == WEIGHTS_TP8 and p.knob("pre_load_free").as_int() == PRE_H100
    # 101,425,652,695 B > 83,971,014,656 B: loading runs out of memory; no pool, nothing allocated
    assert p.startup_error == (
        "weights 94.46 GiB (101,425,652,695 B) > 78.20 GiB (83,971,014,656 B) pre-load free memory on one "
        "NVIDIA H100 80GB HBM3: loading them runs out of memory"
    )
    assert not p.loads_weights
    assert (p.available_bytes, p.rows, p.logged_tokens, p.allocated_bytes) == (0, 0, 0, 0)


def _tp8() -> Split:
    return Split.of(tp=8, dp_attention=1, ep=1, pp=1)


def test_glm_on_8xh100_sglang_remedy_is_tp16_on_two_nodes() -> None:
    a = admit(make_plan(SGLANG, gpu="H100"), Request(ctx_tokens=128 * K))
    assert not a.admitted and a.binding.name == "engine starts"
    # No change on the same 8 GPUs loads 94.46 GiB into 78.20 GiB; the smallest wider layout is tp 16, which needs
    # max(16, ep 1) × pp 1 = 16 GPUs = 2 nodes of 8 (the loader's GPU-count rule), so nodes=2 goes with it.
    assert [(r.knob, r.value, r.also) for r in a.remedies] == [("tp", 16, (("nodes", 2),))]
    r = a.remedies[0]
    assert r.sets == ("tp=16", "nodes=2") and r.flags == "--set tp=16 --set nodes=2"
    # At tp 16 there is no measured point: the estimate, 49,013,001,344 B a GPU, the path the preset shares with its
    # config.json (tests/models/test_weights_one_path.py): the checkpoint's tensors at tp 16, 48,735,652,992 B, +
    # SGLang's
    # rotary cache 1,048,576 × 64 × 2 = 134,217,728 B + the absorbed w_kc / w_vc 78 layers × 512 × 64 / 16 heads ×
    # (192 + 256) × 2 B = 143,130,624 B (kvplan.models.additions). It was 46,853,200,902 B from the MLA parameter
    # groups before one model got one weight (issue 23 item 4).
    # mem_fraction_static = round((81,559 − reserved) / 81,559, 3), reserved = 512 + 8,192 × 1.5 + 16 × 1 / 8 × 1,024
    #   + decode graph 512 × 2 + MLA prefill graph 1,536 = 17,408 MiB -> round(0.78656, 3) = 0.787
    # available = (83,971,014,656 − 49,013,001,344) − 83,971,014,656 × (1 − 0.787) = 17,072,187,190 B (GiB floats)
    # rows = 17,072,187,190 // 53,940 // 64 × 64 = 316,480; 128K = 2,048 pages ≤ 4,945 pages
    fixed = plan_pool(load_model("glm-5.3"), load_deployment(SGLANG, ["gpu=H100", *r.sets]))
    assert fixed.knob("weights_per_gpu").as_int() == 48_735_652_992 + 134_217_728 + 143_130_624 == 49_013_001_344
    # the estimate is checked against the measured TP8 point: the checkpoint 95,228,613,120 B there
    # (test_weights_published.test_known_gaps_pinned) + SGLang's rotary cache 134,217,728 + absorbed 8 heads a rank
    # 78 × 512 × 8 × 448 × 2 = 286,261,248 -> 95,649,092,096 B estimated against 101,425,652,695 B measured, so the
    # remedy says how far off the estimate was (93,470,472,204 B from the parameter groups before)
    assert load_model("glm-5.3").estimated_weights_per_gpu(_tp8()) == 95_228_613_120
    assert (
        "(estimated; at tp 8, attention 8, experts 8 measured 101,425,652,695 B, estimated 95,649,092,096 B)"
        in r.detail
    )
    assert fixed.knob("mem_fraction_static").as_float() == 0.787
    weights, pre = 49_013_001_344, PRE_H100
    available = int(((pre - weights) / GiB - pre / GiB * (1 - 0.787)) * GiB)
    assert fixed.available_bytes == available == 17_072_187_190
    assert r.pool_tokens == fixed.logged_tokens == available // 53_940 // 64 * 64 == 316_480
    assert admit(fixed, Request(ctx_tokens=128 * K), remedies=False).admitted


def test_glm_on_8xh100_vllm_remedy_brings_the_context_length_to_the_request() -> None:
    # vLLM loads into the CUDA total: 101,425,652,695 B > 85,044,756,480 B
    p = make_plan(VLLM, gpu="H100")
    assert p.startup_error is not None and p.startup_error.endswith(
        "> 79.20 GiB (85,044,756,480 B) CUDA total on one NVIDIA H100 80GB HBM3: loading them runs out of memory"
    )
    a = admit(p, Request(ctx_tokens=128 * K))
    assert [r.sets for r in a.remedies] == [("tp=16", "nodes=2", "context_length=131072")]
    # tp 16 alone: the preset's max_model_len 524,288 needs 3,452,160 B × 8,192 blocks = 28,279,695,360 B, more than
    # the 23.7 GB of KV memory tp 16 leaves: vLLM refuses to start, so the remedy cuts max_model_len to the request.
    alone = make_plan(VLLM, gpu="H100", tp=16, nodes=2)
    assert alone.startup_error is not None and alone.startup_error.startswith("To serve at least one request")
    fixed = make_plan(VLLM, gpu="H100", tp=16, nodes=2, context_length=131072)
    # requested = ceil(85,044,756,480 × 0.92) = 78,241,175,962; available = requested − weights 48,727,406,592 (the
    # checkpoint's 48,735,652,992 B at tp 16 + vLLM's load-time additions, the config.json path; 46,853,200,902 B
    # from the parameter groups before)
    #   − the DSA buffers and non-KV other of the chain; num_blocks = available // (64 × 53,940 = 3,452,160).
    # tp 16 on 2 nodes of 8: the TP group spans nodes, so vLLM builds no custom all-reduce (custom_all_reduce.py
    # CustomAllreduce.__init__: "spans across nodes") and no NVLS buffers; the non-torch growth is the TP1 figure,
    # 268,435,456 B, not the TP4-fitted 2,330,019,758 B: 2,061,584,302 B more KV memory, 6,434 -> 7,031 blocks
    # (411,776 -> 449,984 tokens)
    requested = 78_241_175_962
    non_kv = sum(t.bytes or 0 for t in fixed.chain[3:-4])  # weights, DSA buffers, activations + graphs
    assert fixed.chain[3].bytes == 48_727_406_592
    assert fixed.available_bytes == requested - non_kv
    assert [t.bytes for t in fixed.chain if t.label == "non-torch growth"] == [268_435_456]
    assert a.remedies[0].pool_tokens == fixed.logged_tokens == (requested - non_kv) // 3_452_160 * 64 == 449_984
    assert 3_452_160 * cdiv(131_072, 64) <= fixed.available_bytes - 3_452_160  # max-model-len check passes
    assert admit(fixed, Request(ctx_tokens=128 * K), remedies=False).admitted


def test_llama_70b_bf16_on_one_h100_remedy_is_tp4_in_the_node() -> None:
    # 70,553,706,496 parameters in bf16: 141,140,967,424 B at tp 1 (embeddings and head included) > 83,971,014,656 B
    p = make_plan(SGLANG, model="llama-3.1-70b", gpu="H100", tp=1)
    assert p.knob("weights_per_gpu").as_int() == 141_140_967_424 and not p.loads_weights
    a = admit(p, Request(ctx_tokens=8 * K))
    # tp 2: 70,588,579,840 B load, but free after weights 13,382,434,816 B < slack 83,971,014,656 × (1 − 0.828)
    #   = 14,443,014,520 B: "Loaded weights leave no GPU memory for the KV cache" (SGLang's own refusal);
    # tp 4: 35,312,386,048 B; slack × (1 − 0.819); available = 33,459,874,955 B; cell = 80 layers × 2 kv heads
    #   × (128 + 128) × 1 B (fp8_e4m3) = 40,960 B; rows = 33,459,874,955 // 40,960 // 64 × 64 = 816,832.
    # 4 GPUs are within the one 8-GPU node: no nodes change.
    tp2 = make_plan(SGLANG, model="llama-3.1-70b", gpu="H100", tp=2)
    assert tp2.loads_weights and tp2.startup_error is not None and tp2.startup_error.startswith("Loaded weights")
    assert [(r.knob, r.value, r.also, r.pool_tokens) for r in a.remedies] == [("tp", 4, (), 816_832)]
    tp4 = make_plan(SGLANG, model="llama-3.1-70b", gpu="H100", tp=4)
    assert tp4.cell.total_bytes == 80 * 2 * (128 + 128) * 1 == 40_960
    assert tp4.logged_tokens == 33_459_874_955 // 40_960 // 64 * 64 == 816_832


def test_weights_as_set_get_no_gpu_remedy() -> None:
    # weights_per_gpu given by the user stays as given at any tp: more GPUs would not change it, so none is offered
    a = admit(make_plan(SGLANG, gpu="H100", weights_per_gpu="79GiB"), Request(ctx_tokens=128 * K))
    assert not a.admitted and a.remedies == ()


def test_gpu_remedies_only_when_nothing_on_the_same_gpus_admits() -> None:
    # 1M on 8 × H200: dcp 2 admits (tests/plan/test_admit.py), so no GPUs are added
    a = admit(make_plan(SGLANG), Request(ctx_tokens=1 << 20))
    assert a.remedies and all(r.knob != "tp" and not r.also for r in a.remedies)


# ---------------------------------------------------------------------------------------------- the CLI


def test_admit_on_h100_is_a_rejection_not_bad_input() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--set", "gpu=H100"])
    assert r.exit_code == 1, r.output  # before: 2, "kvplan: error: the engine does not start: ..."
    assert "kvplan: error" not in r.output
    assert "REJECTED: the engine does not start — weights 94.46 GiB (101,425,652,695 B) > 78.20 GiB" in r.output
    assert "ENGINE WOULD NOT START" in r.output
    assert "does not load" in r.output  # the chain stops at the weights
    assert "free after weights" not in r.output and "Memory map" not in r.output
    assert "--set tp=16 --set nodes=2" in r.output


def test_admit_json_lists_each_remedy_as_its_sets() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--set", "gpu=H100", "-f", "json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["admitted"] is False and doc["startup_error"].startswith("weights 94.46 GiB")
    assert doc["plan"]["loads_weights"] is False  # the memory_map's weights are clipped to the GPU: say so
    assert [m["set"] for m in doc["remedies"]] == [["tp=16", "nodes=2"]]


@pytest.mark.parametrize("cmd", [["budget"], ["workspace"], ["transfer", "--ctx", "128K"]])
def test_other_commands_report_it_and_exit_0(cmd: list[str]) -> None:
    # not a verdict command: the report says the engine would not start; no exit 2
    r = runner.invoke(app, [*cmd, "--set", "gpu=H100"])
    assert r.exit_code == 0, r.output
    assert "ENGINE WOULD NOT START: weights 94.46 GiB" in r.output


def _h100_config(tmp_path: Path) -> Path:
    f = tmp_path / "h100.yaml"
    f.write_text(
        "schema_version: 1\nmodel: glm-5.3\nengine: sglang\ngpu: H100\ntp: 8\nkv_cache_dtype: fp8_e4m3\n",
        encoding="utf-8",
    )
    return f


def test_lock_records_engine_starts_false_and_gate_fails(tmp_path: Path) -> None:
    cfg, lock = _h100_config(tmp_path), tmp_path / "kvplan.lock"
    r = runner.invoke(app, ["lock", str(cfg), "--lock", str(lock)])
    assert r.exit_code == 0, r.output  # before: exit 2, nothing written
    entry = json.loads(lock.read_text())["configs"]["h100.yaml"]
    assert entry["engine_starts"] is False and entry["pool_tokens"] == 0
    g = runner.invoke(app, ["gate", str(cfg), "--lock", str(lock)])
    assert g.exit_code == 1, g.output
    assert "engine starts" in g.output and "weights 94.46 GiB" in g.output


def test_validate_refuses_a_deployment_that_builds_no_pool() -> None:
    # before: the scaled "pool" of 0 rows was allocated and reported as PREDICTION MISSED (exit 1)
    pytest.importorskip("torch")
    r = runner.invoke(app, ["validate", "--device", "cpu", "--tokens", "1024", "--set", "gpu=H100"])
    assert r.exit_code == 2, r.output
    assert "the engine would not start (weights 94.46 GiB" in r.output and "no pool to validate" in r.output
