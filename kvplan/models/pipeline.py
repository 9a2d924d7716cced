"""One pipeline stage's view of a model: its own decoder layers, and the weights its GPUs load (pure).

Both engines build only a stage's layers on its GPUs (vLLM ``model_executor/models/utils.py::make_layers`` and
SGLang ``srt/utils`` ``make_layers`` with ``get_pp_indices``: the other layers are ``PPMissingLayer``), so a
stage's KV cell counts its own layers and its weights are its share (what that share holds: above
``stage_arch``).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan import limits
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch, ParamGroup, PipelineStage, Split


def parse_layer_partition(value: object) -> tuple[int, ...]:
    """``pp_layer_partition``: a list of layer counts, or the engines' env form '41,39'; each a whole number >= 1.

    >>> parse_layer_partition("41,39"), parse_layer_partition([30, 31])
    ((41, 39), (30, 31))
    """
    items = value.split(",") if isinstance(value, str) else [value] if isinstance(value, int) else value
    if not isinstance(items, list | tuple) or not items:
        raise ValueError(f"expected layers per stage, e.g. [41, 39] or '41,39', got {value!r}")
    out = []
    for item in items:
        text = item.strip() if isinstance(item, str) else item
        if isinstance(text, str) and text.isdigit():
            text = int(text)
        if isinstance(text, bool) or not isinstance(text, int) or not 1 <= text <= limits.MAX_LAYERS:
            raise ValueError(f"each stage's layer count must be a whole number >= 1, got {item!r} in {value!r}")
        out.append(text)
    return tuple(out)


# What a stage's GPUs load:
#
# - the embedding on the first stage only, the final norm and LM head on the last (vLLM ``LlamaModel.__init__``:
#   ``embed_tokens`` when ``is_first_rank or (tie_word_embeddings and is_last_rank)``; ``lm_head`` on the last
#   rank; SGLang ``Qwen3ForCausalLM`` / ``LlamaForCausalLM``: ``embed_tokens`` on the first rank, a real
#   ``ParallelLMHead`` on the last, the tied weight sent to it at pp > 1): an untied checkpoint's ``embeddings``
#   group (embed + head, vocab × hidden each) is half on each end, a tied one whole on both;
# - a layer group (attention, MLP, experts, router) the share of its ``layer_span`` the stage owns: a MoE model's
#   first dense layers sit on the first stage;
# - what every process builds once (the rotary cos/sin cache) whole on every stage.
#
# Which layers a stage gets is the engine's rule (kvplan.engines.pipeline).
def stage_arch(arch: ModelArch, stage: PipelineStage) -> ModelArch:
    """The model as one stage holds it: ``num_layers`` and the indexer flags of its layers only.

    A hybrid's kinds per stage are not modelled (refused, exit 2, rather than planned over the wrong layers).
    """
    if arch.is_hybrid:
        raise InputError(
            f"kvplan does not plan pipeline parallelism (pp {stage.size}) for {arch.name}: its"
            f" {', '.join(arch.hybrid_kinds)} layers per stage are not modelled; plan it at pp 1"
        )
    return replace(
        arch,
        num_layers=stage.layers,
        indexer_full=arch.indexer_full[stage.start : stage.end],
        pp_stage=stage,
        layers=(),
    )


def _embedding_copies(arch: ModelArch, g: ParamGroup) -> int:
    """2 for an untied embed + LM head, 1 for a tied one (vocab × hidden parameters each)."""
    dims = arch.activation
    if dims is None or dims.vocab_size * dims.hidden_size == 0:
        return 2
    return 1 if g.params <= dims.vocab_size * dims.hidden_size else 2


def stage_group_bytes(arch: ModelArch, g: ParamGroup, whole: int, stage: PipelineStage) -> int:
    """Of ``whole`` (the group's bytes on one GPU of the same split with every layer), what the stage holds."""
    if g.name == "embeddings":
        ends = int(stage.first) + int(stage.last)
        return -(-whole * ends // _embedding_copies(arch, g))
    if g.name == "lm_head":  # an LM head apart from the embeddings (params_grok.SglangLmHead): the last stage's
        return whole if stage.last else 0
    if g.params == 0:  # a buffer each process builds once (rotary cache), the engine's additions
        return whole
    first, end = g.layers_owned(stage.model_layers)
    owned = max(min(end, stage.end) - max(first, stage.start), 0)
    return -(-whole * owned // max(end - first, 1))


def stage_weights(
    arch: ModelArch, split: Split, *, engine: str | None, with_mtp: bool, moe_backend: str | None = None
) -> int:
    """Bytes one GPU of ``arch.pp_stage`` loads: each group at the split without pp, then the stage's share."""
    stage = arch.pp_stage
    if stage is None:
        return arch.estimated_weights_per_gpu(split, with_mtp=with_mtp, engine=engine, moe_backend=moe_backend)
    flat = replace(split, pp=1)
    total = 0
    for g in arch.param_groups:
        if g.name == "mtp" and not with_mtp:
            continue
        g = g.for_stage(stage)
        total += stage_group_bytes(
            arch, g, g.bytes_on(flat, engine=engine, with_mtp=with_mtp, moe_backend=moe_backend), stage
        )
    return total
