"""kvplan.engines.pipeline pinned at the boundaries its mutants move (mutation check, seed 20693).

Engine source read:
- vLLM ``vllm/distributed/utils.py::get_pp_indices``: ``num_hidden_layers // pp_size`` a stage, the remainder one each
  from the second-to-last stage backwards (``partitions[-i] += 1`` for i in 2 .. remainder + 1);
- SGLang ``python/sglang/srt/distributed/utils.py::get_pp_indices``: the last ``remainder`` stages one extra layer.
The test config (tests/data/hf/pattern/config.json) has 8 decoder layers.
"""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.models.from_hf import load_model
from tests.conftest import make_plan

SETS = {"kv_cache_dtype": "auto", "mla_layout": "default", "attention_backend": "default", "tp": 1}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_one_layer_a_stage_plans(engine: str) -> None:
    # 8 layers over pp 8: 8 // 8 = 1 a stage, remainder 0 on both engines -> a stage of exactly one layer, which
    # both engines build (the boundary of "a stage with no decoder layer")
    arch = load_model("tests/data/hf/pattern/config.json")
    p = make_plan(f"glm-5.3-8xh200-{engine}", model=arch, pp=8, speculative_num_draft_tokens=0, **SETS)
    assert [s.stage.layers for s in p.stages] == [1] * 8
    assert [(s.stage.start, s.stage.end) for s in p.stages] == [(i, i + 1) for i in range(8)]


@pytest.mark.parametrize(
    ("engine", "parts"),
    [
        # vLLM: 8 // 9 = 0 each, remainder 8 to partitions[-2] .. partitions[-9]: the last stage keeps 0
        ("vllm", "[1, 1, 1, 1, 1, 1, 1, 1, 0]"),
        # SGLang: base 0, remainder 8 to the last 8 stages: the first stage keeps 0
        ("sglang", "[0, 1, 1, 1, 1, 1, 1, 1, 1]"),
    ],
)
def test_a_stage_without_layers_is_refused(engine: str, parts: str) -> None:
    arch = load_model("tests/data/hf/pattern/config.json")
    with pytest.raises(InputError) as e:
        make_plan(f"glm-5.3-8xh200-{engine}", model=arch, pp=9, nodes=2, speculative_num_draft_tokens=0, **SETS)
    assert str(e.value) == (f"pp 9 over pattern's 8 layers ({parts}) leaves a stage with no decoder layer: lower pp")


@pytest.mark.parametrize(
    ("engine", "words"),
    [
        # DeepSeek-V3's 61 layers over pp 2: vLLM 30 each + the remainder to the second-to-last stage -> 31/30;
        # SGLang 30 each + the remainder to the last stage -> 30/31
        # and how each cuts every stage's pool to the smallest: SGLang all-reduces max_total_num_tokens with MIN
        # (model_runner), vLLM gives every worker the smallest num_blocks (get_kv_cache_configs)
        ("vllm", "pp 2: layers 31/30 (default: vLLM get_pp_indices); stage "),
        ("sglang", "pp 2: layers 30/31 (default: SGLang get_pp_indices); stage "),
    ],
)
def test_the_note_names_each_engines_rule(engine: str, words: str) -> None:
    p = make_plan(
        f"glm-5.3-8xh200-{engine}", model="deepseek-v3", tp=8, pp=2, nodes=2, speculative_num_draft_tokens=0,
        kv_cache_dtype="auto", mla_layout="default", attention_backend="default",
    )  # fmt: skip
    (note,) = (n for n in p.notes if n.startswith(words))
    rule = (
        "SGLang all_reduce(MIN) of max_total_num_tokens"
        if engine == "sglang"
        else "vLLM get_kv_cache_configs: every worker gets the smallest num_blocks"
    )
    assert note.endswith(f"every stage's pool is cut to it ({rule})"), note


def test_the_note_names_the_binding_stage() -> None:
    # Llama-3.1-70B at tp 4, pp 2 on vLLM: 80 // 2 = 40 a stage; the last stage alone runs the sampler in the
    # profiling run (GPUModelRunner.profile_run: _dummy_sampler_run if is_last_rank), so its budget is the
    # smaller and stage 1 binds (tests/models/test_pipeline_stages.py::test_vllm_last_stage_binds_on_the_sampler)
    p = make_plan(
        "glm-5.3-8xh200-vllm", model="llama-3.1-70b", engine="vllm", gpu="h100", tp=4, pp=2, kv_cache_dtype="auto",
        page_size="default", mla_layout="default", attention_backend="default", context_length="default",
    )  # fmt: skip
    assert any(n.startswith("pp 2: layers 40/40 (default: vLLM get_pp_indices); stage 1 binds") for n in p.notes)
