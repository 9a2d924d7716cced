"""A model's weights from its checkpoint: the safetensors headers, the index's total, or the config laid out per
tensor (kvplan.models.safetensors, config_tensors, sharding), plus the engine's load-time additions
(kvplan.models.additions)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kvplan.models.arch import ModelArch
from kvplan.models.weights import as_parameter_groups


def with_checkpoint(arch: ModelArch, source: str, config: Mapping[str, Any], *, snapshot: bool = True) -> ModelArch:
    """``arch`` with its weights taken from the checkpoint beside ``source`` (a snapshot's config.json).

    ``*.safetensors`` present: every tensor from their headers. Only ``model.safetensors.index.json``: the
    config-derived tensors, reconciled to its ``metadata.total_size``; bytes the config does not explain are
    kept as one replicated 'unrecognised' block and said. Neither: the config-derived tensors alone (the same
    figure tests/models/test_weights_published.py checks against published load lines). A config kvplan cannot
    lay out per tensor: ``arch`` unchanged, the parameter-group estimate stands. Every per-tensor path adds the
    engine's load-time additions (kvplan.models.additions.AdditionsGroup: 0 B unless the planner names the
    engine). ``snapshot=False`` (a preset's config section) or a JSON not named config.json: the config alone.
    """
    # The per-tensor readers (13 record classes, ~10 ms) load when weights are first laid out: a preset's plan
    # defers that (kvplan.models.preset_weights.DeferredGroups) and one with a measured point never does it.
    from kvplan.models.additions import additions_group
    from kvplan.models.config_tensors import config_int, config_tensors
    from kvplan.models.safetensors import (
        INDEX_NAME,
        Tensor,
        has_shards,
        indexer_layers_shipped,
        listed_only,
        read_index,
        reconcile,
        snapshot_tensors,
    )
    from kvplan.models.sharding import param_groups_from_tensors

    src = Path(source)
    folder = src.parent if snapshot and src.name == "config.json" else None
    num_kv_heads = config_int(config, "num_key_value_heads")
    notes: list[str] = []
    if folder is not None and has_shards(folder):
        tensors = snapshot_tensors(folder)
        total = sum(t.nbytes for t in tensors)
        summary = f"per tensor from the safetensors headers ({len(tensors):,} tensors, {total:,} B)"
    elif folder is not None and (folder / INDEX_NAME).is_file():
        index = read_index(folder / INDEX_NAME)
        derived = config_tensors(config, source, runs=True)
        if derived is None:
            return replace(
                arch,
                weights_assumptions=(
                    *arch.weights_assumptions,
                    f"{INDEX_NAME} not used: kvplan cannot lay this config out per tensor (parameter groups)",
                ),
            )
        r = reconcile(index, derived)
        tensors = listed_only(derived, set(index.names))
        summary = f"per tensor from config.json, reconciled to {INDEX_NAME} total_size {index.total_size:,} B"
        if r.unexplained_bytes > 0:
            tensors = (*tensors, Tensor("unexplained", "U8", (r.unexplained_bytes,)))
            shown = ", ".join(r.unknown_names[:3]) + (" …" if len(r.unknown_names) > 3 else "")
            notes.append(
                f"assumed replicated: {r.unexplained_bytes:,} B ({r.unexplained_ppm / 10_000:.3f} % of total_size)"
                f" the config does not explain; {len(r.unknown_names)} unknown tensor names ({shown})"
            )
        elif r.unexplained_bytes < 0:
            notes.append(f"the config derives {-r.unexplained_bytes:,} B more than {INDEX_NAME}'s total_size")
    else:
        derived = config_tensors(config, source, runs=True)  # no names to match: each layer's experts as runs
        if derived is None:  # a family or scheme kvplan cannot lay out per tensor: the parameter groups stand
            return as_parameter_groups(arch)
        tensors = derived
        total = sum(t.nbytes for t in tensors)
        summary = f"per tensor from config.json ({sum(t.count for t in tensors):,} tensors, {total:,} B)"
    groups = param_groups_from_tensors(tensors, num_layers=arch.num_layers, num_kv_heads=num_kv_heads)
    unknown = [p.name for g in groups if g.name == "unrecognised" for p in g.placed if p.name != "unexplained"]
    if unknown:
        shown = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        notes.append(f"assumed replicated: {len(unknown)} tensors kvplan has no sharding rule for ({shown})")
    summary += "; + the engine's load-time additions (kvplan.models.additions)"
    shipped = indexer_layers_shipped(tensors, arch.num_layers) if "index_topk" in config else None
    return replace(
        arch,
        param_groups=(*groups, additions_group(config, indexer_layers_shipped=shipped)),
        weights_summary=f"{arch.weights_summary}; {summary}" if arch.weights_summary else summary,
        weights_assumptions=(*arch.weights_assumptions, *notes),
    )
