"""`kvplan presets deployments` and `knobs`' reports: the deployment list, one deployment, the knob table."""

from __future__ import annotations

from dataclasses import MISSING, fields

from kvplan.engines.common import PoolPlan
from kvplan.models.deploy import ENGINE_KNOBS, ENGINES, KNOBS, KV_CACHE_DTYPES, Deployment
from kvplan.models.deployment import ALIASES, DEFAULT_ENGINE, DEFAULT_GPU, GPU_COUNTS, MEMORY_KNOBS, TOKEN_KNOBS
from kvplan.models.formats import MlaLayout
from kvplan.render import Report, Section, count, first_screen, size, startup_line
from kvplan.render.applies import for_model
from kvplan.render.pipeline_report import stages_section
from kvplan.render.plan_sections import (
    cell_section,
    chain_section,
    deployment_label,
    knobs_section,
    memory_bar,
    plan_data,
)
from kvplan.versions import modelled_ranges


def deployments_list_report(plans: list[PoolPlan]) -> Report:
    """The presets, each with the pool its engine would build (or that it would not start)."""
    rows = tuple(
        (
            d.name,
            f"{d.engine} {d.engine_version}",
            f"tp {d.tp}, dcp {d.dcp}",
            d.kv_cache_dtype,
            "does not start" if p.startup_error else count(p.logged_tokens),
        )
        for p in plans
        for d in (p.deployment,)
    )
    data = {
        "deployments": [
            {
                "name": d.name,
                "model": d.model,
                "engine": d.engine,
                "engine_version": d.engine_version,
                "gpu": d.gpu.key,
                "tp": d.tp,
                "dcp": d.dcp,
                "kv_cache_dtype": d.kv_cache_dtype,
                "pool_tokens": p.logged_tokens,
                "startup_error": p.startup_error,
            }
            for p in plans
            for d in (p.deployment,)
        ]
    }
    return Report(
        "deployments",
        "Deployment presets",
        (Section("", rows, ("name", "engine", "parallel", "kv dtype", "pool tokens")),),
        data,
        notes=tuple(f"{p.deployment.name}: {startup_line(p.startup_error)}" for p in plans if p.startup_error),
    )


def deployment_report(p: PoolPlan) -> Report:
    d = p.deployment
    head = (
        ("model", d.model),
        ("engine", f"{d.engine} {d.engine_version}"),
        ("GPU", f"{d.gpu.name}: {size(d.gpu.nvml_total_bytes)} NVML, {size(d.gpu.cuda_total_bytes)} CUDA"),
        (
            "layout",
            f"{d.nodes} node(s) × {d.gpus_per_node} GPUs, tp {d.tp}, dp-attention {d.dp_attention}, "
            f"ep {d.ep}, pp {d.pp}, dcp {d.dcp}",
        ),
        ("source", d.source),
    )
    return Report(
        "deployments show",
        f"Deployment {deployment_label(p)}, {p.semantics}",
        (
            Section("", head, ("", "")),
            first_screen.engine_section(p),
            knobs_section(p),
            cell_section(p),
            chain_section(p),
            *filter(None, (stages_section(p),)),
        ),
        for_model(p.arch, {"plan": plan_data(p)}),
        bar=memory_bar(p),
        notes=p.notes,
        startup_error=p.startup_error,
    )


def _knob_unit(name: str) -> str:
    """What a knob's value is, from the loader's own tables of how it parses each knob."""
    if name in GPU_COUNTS:
        return "count (GPUs)"
    if name in TOKEN_KNOBS:
        return "tokens (1M, 128K)"
    if name in (*MEMORY_KNOBS, "non_kv_other"):
        return "bytes (80GiB, 141GB)"
    units = {
        "mem_fraction_static": "fraction (0, 1]",
        "gpu_memory_utilization": "fraction (0, 1]",
        "max_running_requests": "count (requests)",
        "cuda_graph_max_bs": "count (batch size)",
        "swa_full_tokens_ratio": "fraction (0, 1]",
        "max_mamba_cache_size": "count (state slots)",
        "speculative_num_draft_tokens": "count (draft tokens)",
        "speculative_eagle_topk": "count",
        "disable_cuda_graph": "true or false",
        "disable_radix_cache": "true or false",
        "swa_eviction_interval": "count (tokens)",
        "allow_long_context": "true or false",
        "rope_scaling": "yarn (the model card's)",
        "quantization": "fp8 (online, on a bf16 checkpoint)",
        "engine": " | ".join(ENGINES),
        "engine_version": "any version in " + "; ".join(modelled_ranges(e) for e in ENGINES),
        "kv_cache_dtype": " | ".join(KV_CACHE_DTYPES),
        "mla_layout": " | ".join(m.value for m in MlaLayout),
        "gpu": "gpus.yaml name or a mapping",
        "attention_backend": "backend name",
        "model": "preset name or path",
        "pp_layer_partition": "layers per stage ([41, 39] or 41,39)",
    }
    return units.get(name, "value")


def _knob_default(name: str) -> str:

    if name == "engine":
        return DEFAULT_ENGINE
    if name == "engine_version":
        return ", ".join(f"{e} {v[0]}" for e, v in ENGINES.items())
    if name == "gpu":
        return DEFAULT_GPU
    if name == "rope_scaling":
        return "off (config.json's own)"
    if name == "quantization":
        return "the checkpoint's own"
    field = next(f for f in fields(Deployment) if f.name == name)
    if field.default is MISSING:
        return "required"
    if field.default is None:
        return "engine's"
    return str(field.default).lower() if isinstance(field.default, bool) else str(field.default)


def knobs_report() -> Report:
    """Every deployment knob (kvplan.models.deploy.KNOBS): which engine reads it, its unit and its default."""
    rows = []
    data = []
    for name in KNOBS:
        only = ENGINE_KNOBS.get(name)
        engines = only[0] if only else "sglang, vllm"
        aliases = sorted(a for a, k in ALIASES.items() if k == name)
        rows.append((name, engines, _knob_unit(name), _knob_default(name)))
        data.append(
            {
                "name": name,
                "engines": engines.split(", "),
                "unit": _knob_unit(name),
                "default": _knob_default(name),
                "aliases": aliases,
                "other_engine": only[1] if only else None,
            }
        )
    notes = (
        "engine's: left out, the knob takes the engine's own default, computed as the engine does "
        "(kvplan deployments show marks each one)",
        "gpu: a name `kvplan gpus` lists (any case, aliases, the name nvidia-smi prints), or gpu=custom with"
        " gpu_memory=96GiB (its NVML total) and optionally gpu_sm=90",
        *(f"{n} ({engine} only), instead: {other}" for n, (engine, other) in ENGINE_KNOBS.items()),
    )
    return Report(
        "knobs",
        "Deployment knobs (YAML keys and --set KNOB=VALUE; engine flag spellings are accepted too)",
        (Section("", tuple(rows), ("knob", "engines", "unit", "default")),),
        {"knobs": data},
        notes=notes,
    )
