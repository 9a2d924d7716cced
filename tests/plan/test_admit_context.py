"""A request over the context length (issue 23, item 7): no "N at once", and the engines' own remedies.

Qwen3-32B (tests/data/hf/qwen3-32b/config.json): max_position_embeddings 40,960, no rope_scaling; its model card
("Processing Long Texts") documents YaRN, factor 4.0 over original_max_position_embeddings 32,768 -> 131,072.
The minimal deployment (``model: qwen3-32b``: SGLang 0.5.23, one H200 node, tp 8) plans 3,811,252 pool rows of
32,768 B (test_gate.py's derivation of the same config).

- SGLang ``TokenizerManager._validate_one_request`` rejects an input of 131,072 >= context_len 40,960 before the
  scheduler sees it, so none of "29 at once" (3,811,252 // 131,072) runs: 0.
- vLLM ``_get_and_verify_max_len``: with rope_scaling yarn the derived max_model_len is 32,768 × 4 = 131,072.
- SGLang ``get_context_length``: the factor is dropped when original_max_position_embeddings is given, so the
  derived context_len stays 40,960; ``--context-length 131072`` needs SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1
  (``ModelConfig``: above the derived length it raises unless the env var is set).
- Both engines build YaRN's cos/sin cache over original × factor = 131,072 positions
  (``YaRNScalingRotaryEmbedding._compute_cos_sin_cache``) instead of 40,960: (131,072 − 40,960) × 128 rotary dims
  × 2 B (bf16) = 23,068,672 B more per GPU = 704 rows of 32,768 B (44 vLLM blocks of 16 tokens).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.admit import Request, admit

K = 1024
POOL = 3_811_252
ROPE_ROWS = (131_072 - 40_960) * 128 * 2 // 32_768  # 704


@pytest.fixture
def dep_file(tmp_path: Path) -> Path:
    p = tmp_path / "q.yaml"
    p.write_text("model: qwen3-32b\n")
    return p


def plan(path: Path, *sets: str) -> PoolPlan:
    dep = load_deployment(str(path), sets)
    return plan_pool(load_model(dep.model), dep)


def test_rejected_by_context_length_fits_none_at_once(dep_file: Path) -> None:
    p = plan(dep_file)
    assert (p.logged_tokens, p.context_len) == (POOL, 40_960)
    a = admit(p, Request(ctx_tokens=128 * K))
    assert not a.admitted and a.binding.name == "context length"
    assert a.max_concurrent == 0 and a.fewer_at_once is None  # was 29: 3,811,252 // 131,072
    r = CliRunner().invoke(app, ["admit", "-d", str(dep_file), "--ctx", "128K"])
    row = next(line for line in r.stdout.splitlines() if line.startswith("such requests at once"))
    assert row.split()[4] == "0" and "rejected: over the context length" in row
    # under the context length nothing changes: 3,811,252 // 32,768 = 116 requests of 32K at once
    assert admit(p, Request(ctx_tokens=32 * K)).max_concurrent == 116


def test_sglang_remedy_is_the_card_yarn_with_the_env_var(dep_file: Path) -> None:
    a = admit(plan(dep_file), Request(ctx_tokens=128 * K))
    (m,) = a.remedies
    assert m.sets == ("rope_scaling=yarn", "context_length=131072", "allow_long_context=true")
    assert "--json-model-override-args" in m.detail and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in m.detail
    assert '"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}' in m.detail
    assert "--context-length 131072" in m.detail
    assert m.pool_tokens == POOL - ROPE_ROWS  # 3,810,548: the YaRN cos/sin cache
    fixed = plan(dep_file, *m.sets)
    assert admit(fixed, Request(ctx_tokens=128 * K), remedies=False).admitted
    assert fixed.context_len == 131_072 and fixed.startup_error is None
    assert any("yarn × 4 covers 131,072 positions" in n for n in fixed.notes)


def test_sglang_derives_no_longer_context_from_yarn_alone(dep_file: Path) -> None:
    p = plan(dep_file, "rope_scaling=yarn")
    assert p.context_len == 40_960  # get_context_length drops the factor
    p = plan(dep_file, "rope_scaling=yarn", "context_length=128K")
    assert p.startup_error is not None and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in p.startup_error


def test_vllm_remedy_is_the_card_yarn(dep_file: Path) -> None:
    a = admit(plan(dep_file, "engine=vllm"), Request(ctx_tokens=128 * K))
    assert a.max_concurrent == 0
    (m,) = a.remedies
    assert m.sets == ("rope_scaling=yarn",)  # max_model_len derives 131,072 by itself
    assert "vLLM --hf-overrides" in m.detail and '"factor":4.0' in m.detail
    fixed = plan(dep_file, "engine=vllm", *m.sets)
    assert fixed.context_len == 131_072 and fixed.knob("context_length").origin.startswith("default: rope_scaling")
    assert admit(fixed, Request(ctx_tokens=128 * K), remedies=False).admitted
    # the same max_model_len without the scaling (the env var): the cos/sin cache of 40,960 positions, 704 rows more
    same_len = plan(dep_file, "engine=vllm", "context_length=128K", "allow_long_context=true")
    assert same_len.context_len == 131_072 and m.pool_tokens == same_len.logged_tokens - ROPE_ROWS


def test_past_the_documented_scaling_the_env_var_with_its_warning(dep_file: Path) -> None:
    a = admit(plan(dep_file), Request(ctx_tokens=256 * K))
    (m,) = a.remedies
    assert m.sets == ("context_length=262144", "allow_long_context=true")
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in m.detail and "quality is not guaranteed" in m.detail
    assert "131,072 its card's yarn covers" in m.detail
    assert m.pool_tokens == POOL  # no scaling: the pool is the one it was
    fixed = plan(dep_file, *m.sets)
    assert any("not guaranteed" in n for n in fixed.notes)


def test_a_model_without_documented_scaling(dep_file: Path) -> None:
    dep_file.write_text("model: llama-3.1-8b\n")
    a = admit(plan(dep_file), Request(ctx_tokens=256 * K))  # max_position_embeddings 131,072 (llama3 rope)
    assert all("rope_scaling" not in s for m in a.remedies for s in m.sets)
    assert any(m.sets == ("context_length=262144", "allow_long_context=true") for m in a.remedies)
    with pytest.raises(InputError, match=r"llama-3\.1-8b documents no yarn RoPE scaling"):
        plan(dep_file, "rope_scaling=yarn")
    r = CliRunner().invoke(app, ["admit", "-d", str(dep_file), "--ctx", "8K", "--set", "rope_scaling=linear"])
    assert r.exit_code == 2 and "rope_scaling" in r.stderr and "yarn" in r.stderr


def _config(tmp_path: Path, rope: dict[str, object]) -> Path:
    """Qwen3-32B's config.json with a rope_scaling added, the way the card's "modify config.json" option does."""
    src = Path(__file__).parents[1] / "data" / "hf" / "qwen3-32b" / "config.json"
    data = json.loads(src.read_text())
    data["rope_scaling"] = rope
    folder = tmp_path / "qwen3-32b-rope"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data))
    dep = tmp_path / "rope.yaml"
    dep.write_text(f"model: {folder / 'config.json'}\n")
    return dep


def test_a_config_that_ships_yarn(tmp_path: Path) -> None:
    dep = _config(tmp_path, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    v, s = plan(dep, "engine=vllm"), plan(dep)
    assert v.context_len == 131_072 and v.startup_error is None  # 32,768 × 4 (_get_and_verify_max_len)
    assert admit(v, Request(ctx_tokens=128 * K)).admitted
    assert s.context_len == 40_960  # get_context_length: the factor dropped beside original_max_position_embeddings
    assert s.logged_tokens == POOL - ROPE_ROWS  # the YaRN cos/sin cache of 131,072 positions
    a = admit(s, Request(ctx_tokens=128 * K))
    (m,) = a.remedies  # SGLang: the env var, which YaRN's own 131,072 positions cover
    assert m.sets == ("context_length=131072", "allow_long_context=true")
    assert "within the 131,072 the config's yarn covers" in m.detail and "not guaranteed" not in m.detail
    assert any("yarn × 4 covers 131,072 positions" in n for n in plan(dep, *m.sets).notes)


def test_a_config_that_ships_linear_scaling(tmp_path: Path) -> None:
    # both engines multiply max_position_embeddings by a linear factor: 40,960 × 2 = 81,920
    dep = _config(tmp_path, {"rope_type": "linear", "factor": 2.0})
    assert plan(dep, "engine=vllm").context_len == plan(dep).context_len == 81_920


def test_gate_promises_what_the_scaled_model_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # with no requirements the lock records the default contexts (128K, 1M) the model holds at all: up to the
    # positions the engine serves, 131,072 with vLLM's derived YaRN length (was 40,960, the config's)
    monkeypatch.chdir(tmp_path)
    Path("plain.yaml").write_text("model: qwen3-32b\nengine: vllm\n")
    Path("yarn.yaml").write_text("model: qwen3-32b\nengine: vllm\nrope_scaling: yarn\n")
    r = CliRunner().invoke(app, ["lock", "plain.yaml", "yarn.yaml"])
    assert r.exit_code == 0, r.stdout + r.stderr
    configs = json.loads(Path("kvplan.lock").read_text())["configs"]
    assert set(configs["plain.yaml"]["concurrency"]) == {"40960"}
    assert set(configs["yarn.yaml"]["concurrency"]) == {"131072"}
    assert configs["yarn.yaml"]["largest_admitted_ctx"] == 131_072
