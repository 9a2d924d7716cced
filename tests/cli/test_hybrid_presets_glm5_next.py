"""The glm-5.3-flash preset through the CLI: ``models show``, and ``admit --ctx 128K`` on both default deployments.

Issue 13's done-when: a verdict (exit 0 or 1) on both engines: SGLang 0.5.23 (tests/engines/test_sglang_glm5_next.py)
and vLLM 0.33.0 (tests/engines/test_vllm_glm5_next.py) plan GLM-5.3-Flash.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "200"})


def test_models_show_lists_the_preset() -> None:
    r = runner.invoke(app, ["models", "show", "glm-5.3-flash"])
    assert r.exit_code == 0, r.output
    # 321,323,031,390 parameters: tests/models/test_params_glm5_next.py derives them per module
    assert "321,323,031,390" in r.stdout
    assert "34 × KDA state" in r.stdout and "11 × indexer K, head_dim 128, kpool 4" in r.stdout
    r = runner.invoke(app, ["models", "list"])
    assert r.exit_code == 0 and "glm-5.3-flash" in r.stdout


def test_admit_128k_on_sglang_is_a_verdict() -> None:
    # with the preset's fp8 KV set: since issue 23 the GLM-5.3 preset's model knobs do not follow --model
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", "glm-5.3-flash", "-d", "glm-5.3-8xh200-sglang",
                            "--set", "kv_cache_dtype=fp8_e4m3", "-f", "json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    # 512 pages of 256 tokens × 6,171 B (528 B fp8_ds_mla × 11 MLA layers + 33 B × 11 pooled index keys) and
    # 5 state slots of 18,452,480 B; 30,463 pages hold 59 such requests
    pools = {p["pool"]: (p["units"], p["bytes"]) for p in d["need_by_pool"]}
    assert pools == {"MLA (11 layers)": (512, 512 * 256 * 6_171), "mamba state (34 layers)": (5, 5 * 18_452_480)}
    assert d["admitted"] and d["max_concurrent"] == 59


def test_admit_128k_on_vllm_is_a_verdict() -> None:
    # with the preset's fp8 KV and max_model_len 524,288 set (issue 23: they do not follow --model on their own)
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", "glm-5.3-flash", "-d", "glm-5.3-8xh200-vllm",
                            "--set", "kv_cache_dtype=fp8", "--set", "context_length=524288", "-f", "json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    # one block id of 6,910,464 B: cdiv(131,072, 1,152) = 114 MLA + indexer blocks, 4 KDA groups × 3, 1 tail ring
    # block (tests/engines/test_vllm_glm5_next.py); 13,206 usable blocks // 127 = 103 at once
    (pool,) = d["need_by_pool"]
    assert {k["kind"]: k["units"] for k in pool["by_kind"]} == {"MLA + indexer K": 114, "KDA state": 12,
                                                                "indexer tail ring": 1}  # fmt: skip
    assert d["admitted"] and d["max_concurrent"] == 103


def test_admit_with_speculative_decoding_on_vllm_is_a_verdict() -> None:
    # was refused in one line (exit 2); planned now (tests/engines/test_hybrid_spec_glm5_next.py derives the groups)
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", "glm-5.3-flash", "-d", "glm-5.3-8xh200-vllm",
                            "--set", "speculative_num_draft_tokens=3"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "ADMITTED" in r.output and "glm5_next_mtp, num_speculative_tokens 3" in r.output
