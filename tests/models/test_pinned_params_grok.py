"""kvplan.models.params_grok pinned: a tied Grok config's LM head, engine by engine (mutation check, issue 26).

Grok-2's preset (kvplan/configs/models/grok-2.yaml: vocab 131,072, hidden 8,192, bf16) with
``tie_word_embeddings: true``: the checkpoint holds one vocab × h matrix, 131,072 × 8,192 = 1,073,741,824
parameters, 2,147,483,648 B, vocab parallel: 268,435,456 B a GPU at tp 8.
- vLLM ``model_executor/models/grok1.py`` ``Grok1ForCausalLM.__init__``: ``if self.config.tie_word_embeddings:
  self.lm_head.weight = self.model.embed_tokens.weight`` (and ``load_weights`` skips "lm_head"): one copy;
- SGLang 0.5.23 ``models/grok.py`` ``Grok1ForCausalLM.__init__``: ``self.lm_head = ParallelLMHead(config.vocab_size,
  config.hidden_size, ...)`` whatever ``tie_word_embeddings`` says: two copies on the GPU, as untied.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model

PRESET = Path(__file__).resolve().parents[2] / "kvplan" / "configs" / "models" / "grok-2.yaml"
HEAD_PER_GPU = 131_072 * 8_192 * 2 // 8  # 268,435,456 B


def _grok2(tmp_path: Path, tied: bool):  # type: ignore[no-untyped-def]
    doc = yaml.safe_load(PRESET.read_text(encoding="utf-8"))
    doc["config"]["tie_word_embeddings"] = tied
    path = tmp_path / f"grok-2-{'tied' if tied else 'untied'}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return load_model(str(path))


def test_a_tied_grok_counts_one_vocab_matrix_on_vllm_and_two_on_sglang(tmp_path: Path) -> None:
    tied, untied = _grok2(tmp_path, True), _grok2(tmp_path, False)
    split = Split.of(tp=8)
    assert untied.total_params - tied.total_params == 131_072 * 8_192  # the checkpoint's one matrix fewer
    for_vllm = untied.estimated_weights_per_gpu(split, engine="vllm") - tied.estimated_weights_per_gpu(
        split, engine="vllm"
    )
    for_sglang = untied.estimated_weights_per_gpu(split, engine="sglang") - tied.estimated_weights_per_gpu(
        split, engine="sglang"
    )
    assert (for_vllm, for_sglang) == (HEAD_PER_GPU, 0)
    # without an engine: the checkpoint's bytes, one matrix
    assert untied.estimated_weights_per_gpu(split) - tied.estimated_weights_per_gpu(split) == HEAD_PER_GPU


def test_the_sglang_lm_head_sits_on_the_last_pipeline_stage_only(tmp_path: Path) -> None:
    # the LM head is built on the last stage (PipelineStage: "the last the final norm and the LM head"); at pp 2
    # the first stage of a tied Grok-2 holds no SGLang head, the last one 268,435,456 B of it at tp 8
    from dataclasses import replace

    from kvplan.models.arch import PipelineStage
    from kvplan.models.pipeline import stage_group_bytes

    tied = _grok2(tmp_path, True)
    (head,) = [g for g in tied.param_groups if g.name == "lm_head"]
    whole = head.bytes_on(Split.of(tp=8), engine="sglang", with_mtp=False)
    assert whole == HEAD_PER_GPU
    first, last = (PipelineStage(rank=r, size=2, start=32 * r, end=32 * (r + 1), model_layers=64) for r in (0, 1))
    assert [stage_group_bytes(tied, head, whole, s) for s in (first, last)] == [0, HEAD_PER_GPU]
    assert replace(head).bytes_per_gpu(Split.of(tp=8)) == 0  # no checkpoint bytes: the engine's allocation only
