"""kvplan/plan/context_remedy.py pinned at its boundaries (mutation check, seed 3889: 6 survivors of 19).

Qwen3-32B (tests/data/hf/qwen3-32b/config.json, the minimal deployment ``model: qwen3-32b`` on 8 × H200, tp 8):
max_position_embeddings 40,960; its card documents YaRN × 4 over 32,768 -> 131,072 (test_admit_context.py).
- vLLM ``ModelConfig._get_and_verify_max_len`` (vllm/config/model.py): a ``max_model_len`` up to the derived
  length needs no override; above it, ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``; with ``--hf-overrides`` carrying
  the rope_scaling, the derived length is original × factor = 131,072.
- vLLM ``check_enough_kv_cache_memory`` (v1/core/kv_cache_utils.py): the pool must hold one request of
  max_model_len, else the engine refuses to start, so a pool under 131,072 tokens needs ``--max-model-len`` cut.
- SGLang ``ModelConfig`` (srt/configs/model_config.py): ``--context-length`` above the derived length needs
  ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.admit import Request, admit

K = 1024
CARD = 32_768 * 4  # 131,072: the card's YaRN


@pytest.fixture
def dep_file(tmp_path: Path) -> Path:
    p = tmp_path / "q.yaml"
    p.write_text("model: qwen3-32b\n")
    return p


def plan(path: Path, *sets: str) -> PoolPlan:
    dep = load_deployment(str(path), sets)
    return plan_pool(load_model(dep.model), dep)


def test_a_pool_under_the_yarn_length_gets_max_model_len_cut_to_the_request(dep_file: Path) -> None:
    # gpu_memory_utilization 0.12 leaves a pool between the request (100K = 102,400) and 131,072: the YaRN
    # override alone derives max_model_len 131,072, which the pool cannot start with; with --max-model-len
    # 102,400 beside it, it starts
    p = plan(dep_file, "engine=vllm", "gpu_memory_utilization=0.12")
    assert 100 * K <= p.logged_tokens < CARD  # the premise: 103,376 tokens
    (m,) = admit(p, Request(ctx_tokens=100 * K)).remedies
    assert m.sets == ("rope_scaling=yarn", "context_length=102400")
    assert m.detail.startswith("vLLM --hf-overrides '") and "}}' --max-model-len 102400: " in m.detail


def test_a_pool_that_holds_the_yarn_length_needs_no_max_model_len(dep_file: Path) -> None:
    (m,) = admit(plan(dep_file, "engine=vllm"), Request(ctx_tokens=128 * K)).remedies
    assert m.sets == ("rope_scaling=yarn",) and "--max-model-len" not in m.detail


def test_the_env_var_and_the_flag_are_the_engines_own(dep_file: Path) -> None:
    # 256K: past the card's 131,072, so the env var of each engine, with that engine's length flag
    (s,) = admit(plan(dep_file), Request(ctx_tokens=256 * K)).remedies
    assert s.detail.startswith("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 --context-length 262144: past the 40,960")
    (v,) = admit(plan(dep_file, "engine=vllm"), Request(ctx_tokens=256 * K)).remedies
    assert v.detail.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 --max-model-len 262144: past the 40,960")
    assert v.sets == ("context_length=262144", "allow_long_context=true")


def test_a_request_of_exactly_the_derived_length_needs_only_the_context_length(dep_file: Path) -> None:
    # 40,960 = max_position_embeddings: max_model_len 40,960 is within what vLLM derives, so neither the
    # YaRN override nor the env var is offered
    p = plan(dep_file, "engine=vllm", "context_length=32768")
    remedies = admit(p, Request(ctx_tokens=40_960)).remedies
    assert [m.sets for m in remedies] == [("context_length=40960",)]
    # one past it, the card's YaRN (vLLM derives 131,072 with it)
    remedies = admit(p, Request(ctx_tokens=40_961)).remedies
    assert ("rope_scaling=yarn",) in [m.sets[:1] for m in remedies]
