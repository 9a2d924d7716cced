"""`kvplan presets models`' reports: the model list and one model's card."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from kvplan.models.cache import describe_kinds
from kvplan.models.preset_repos import aliases_of
from kvplan.render import Report, Section, count, size

if TYPE_CHECKING:  # the command loads it (kvplan admit stays light: benchmarks/cli_latency.py)
    from kvplan.models.arch import ModelArch


def models_list_report(models: list[ModelArch]) -> Report:
    rows = tuple(
        (
            m.name + (f" (also {', '.join(aliases_of(m.name))})" if aliases_of(m.name) else ""),
            m.architecture,
            str(m.num_layers),
            m.kind_label,
            f"{m.full_indexer_layers}/{m.num_layers}" if m.has_indexer else "—",
            count(m.max_position_embeddings),
            m.description,
        )
        for m in models
    )
    data = {
        "models": [
            {
                "name": m.name,
                "aliases": list(aliases_of(m.name)),
                "architecture": m.architecture,
                "num_layers": m.num_layers,
                "max_position_embeddings": m.max_position_embeddings,
                **({"full_indexer_layers": m.full_indexer_layers} if m.has_indexer else {}),
            }
            for m in models
        ]
    }
    return Report(
        "models",
        "Model presets",
        (Section("", rows, ("name", "architecture", "layers", "attention", "indexer layers", "positions", "")),),
        data,
    )


def model_report(m: ModelArch) -> Report:
    rows = (
        ("architecture", m.architecture),
        ("layers (+ MTP)", f"{m.num_layers} (+ {m.num_mtp_layers})"),
        *(("cache" if i == 0 else "", line) for i, line in enumerate(describe_kinds(m.layers, 8))),
        *(
            (
                (
                    "indexer",
                    f"{m.index_n_heads} heads × {m.index_head_dim}, top-k {m.index_topk}, kpool {m.index_kpool}",
                ),
                (
                    "full indexer layers",
                    f"{m.full_indexer_layers} of {m.num_layers} ({m.indexer_rule.value}): "
                    + ", ".join(map(str, m.full_layer_ids)),
                ),
            )
            if m.is_dsa
            else ()  # a model without a DSA indexer: nothing to say about one
        ),
        ("max positions", count(m.max_position_embeddings)),
        ("parameters", count(m.total_params)),
        *((f"weights at tp {w.tp}", f"{size(w.bytes)} measured: {w.source}") for w in m.measured_weights),
        ("source", m.source),
    )
    groups = tuple((g.name, count(g.params), g.split) for g in m.param_groups)
    data = {
        "model": {
            "name": m.name,
            "architecture": m.architecture,
            "num_layers": m.num_layers,
            "num_mtp_layers": m.num_mtp_layers,
            "attention": m.kind_label,
            "cache_kinds_at_tp8": list(describe_kinds(m.layers, 8)),
            "num_attention_heads": m.num_attention_heads,
            "num_kv_heads": m.num_kv_heads,
            "head_dim": m.head_dim,
            "v_head_dim": m.v_head_dim,
            "kv_lora_rank": m.kv_lora_rank,
            "qk_rope_head_dim": m.qk_rope_head_dim,
            **(
                {
                    "index_head_dim": m.index_head_dim,
                    "index_n_heads": m.index_n_heads,
                    "index_topk": m.index_topk,
                    "index_kpool": m.index_kpool,
                    "full_indexer_layer_ids": list(m.full_layer_ids),
                    "indexer_rule": m.indexer_rule.value,
                }
                if m.is_dsa
                else {}
            ),
            "max_position_embeddings": m.max_position_embeddings,
            "total_params": m.total_params,
            "param_groups": {g.name: g.params for g in m.param_groups},
            "measured_weights": [asdict(w) for w in m.measured_weights],
        }
    }
    return Report(
        "models show",
        f"Model {m.name}",
        (Section("", rows, ("", "")), Section("Parameter groups", groups, ("group", "params", "split"))),
        data,
    )
