"""kvplan/engines/context.py pinned (mutation check, seed 7 of the run in README: 10 survivors of 29): YaRN's
cos/sin cache on a model whose rotary cache is a buffer of its own, and each engine's long-context words.

- Both engines build YaRN's cos/sin cache over original_max_position_embeddings × factor positions
  (``YaRNScalingRotaryEmbedding._compute_cos_sin_cache``; vLLM model_executor/layers/rotary_embedding, SGLang
  srt/layers/rotary_embedding.py), where the default rotary builds it over max_position_embeddings.
- Qwen3.6-27B (tests/data/hf/qwen3.6-27b/config.json): max_position_embeddings 262,144, rope_type default; kvplan
  holds its cos/sin cache as a buffer of 33,554,432 B. With a rope_scaling yarn × 4 over 262,144 written into the
  config (the way a model card's "modify config.json" option does), the cache covers 1,048,576 positions:
  4 × 33,554,432 = 134,217,728 B; vLLM derives max_model_len 262,144 × 4 = 1,048,576 (``_get_and_verify_max_len``),
  SGLang keeps 262,144 (``get_context_length`` drops the factor beside original_max_position_embeddings).
"""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.context import with_rope_scaling
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.weights import BufferGroup

DATA = Path(__file__).parents[1] / "data" / "hf" / "qwen3.6-27b" / "config.json"
NATIVE = 262_144
CACHE = 33_554_432


def _qwen36(tmp_path: Path, rope: dict[str, object] | None) -> str:
    data = json.loads(DATA.read_text())
    if rope is not None:
        data["text_config"]["rope_scaling"] = rope
    folder = tmp_path / "qwen3.6-27b-yarn"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(data))
    return str(folder / "config.json")


def _plan(model: str, *sets: str) -> PoolPlan:
    dep = load_deployment("glm-5.3-8xh200-sglang", (f"model={model}", *sets))
    return plan_pool(load_model(dep.model), dep)


def _rotary(p: PoolPlan) -> int:
    arch = with_rope_scaling(p.arch, p.deployment)
    (g,) = [g for g in arch.param_groups if isinstance(g, BufferGroup) and g.name == "rotary_cache"]
    return g.buffer_bytes


def test_a_shipped_yarn_widens_the_rotary_buffer_to_its_positions(tmp_path: Path) -> None:
    plain = _plan(_qwen36(tmp_path / "a", None))
    assert _rotary(plain) == CACHE  # the premise: the default rotary over 262,144 positions
    yarn_model = _qwen36(
        tmp_path / "b", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": NATIVE}
    )
    for engine, derived in (("sglang", NATIVE), ("vllm", 4 * NATIVE)):
        p = _plan(yarn_model, f"engine={engine}")
        assert _rotary(p) == 4 * CACHE  # 134,217,728 B: the cache over 1,048,576 positions
        assert with_rope_scaling(p.arch, p.deployment).max_position_embeddings == derived


def test_a_yarn_that_covers_the_native_positions_changes_nothing(tmp_path: Path) -> None:
    # original 65,536 × 4 = 262,144 = max_position_embeddings: the cache is the one the default builds
    model = _qwen36(tmp_path, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 65_536})
    assert _rotary(_plan(model, "engine=vllm")) == CACHE


def test_each_engine_names_its_own_variable_above_the_derived_length() -> None:
    # Llama-3.1-8B derives 131,072 on both engines; 256K starts only with the engine's env var
    for engine, var in (
        ("sglang", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"),
        ("vllm", "VLLM_ALLOW_LONG_MAX_MODEL_LEN"),
    ):
        p = _plan("llama-3.1-8b", f"engine={engine}", "context_length=256K", "allow_long_context=true")
        said = [n for n in p.notes if "is above the derived 131,072" in n]
        assert said and f"the engine starts only with {var}=1" in said[0], (engine, p.notes)
