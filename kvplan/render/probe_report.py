"""Reports for `kvplan probe` and `kvplan validate`, and the deployment YAML `probe --emit-deploy` writes."""

from __future__ import annotations

import json
from dataclasses import asdict

from kvplan.engines.common import PoolPlan
from kvplan.models.deploy import Deployment, Gpu
from kvplan.probes.nvml import GpuReading, match_catalog
from kvplan.probes.validate import Measured
from kvplan.render import Report, Section, count, size
from kvplan.render.plan_sections import title

_BYTE_KNOBS = {"kv_cache_memory", "weights_per_gpu", "pre_load_free", "runtime_overhead", "non_kv_other"}


def probe_report(readings: tuple[GpuReading, ...]) -> Report:
    sections = []
    for r in readings:
        cat = match_catalog(r)
        rows: list[tuple[str, str, str]] = [
            ("name / UUID", r.name, r.uuid),
            ("driver / CUDA / SM", f"{r.driver} / {r.cuda_version} / {r.sm}", ""),
            ("NVML total", size(r.total_bytes), f"memory API {r.memory_api}"),
            ("NVML reserved", size(r.reserved_bytes) if r.reserved_bytes is not None else "n/a", "driver/firmware"),
            ("NVML used / free", f"{size(r.used_bytes)} / {size(r.free_bytes)}", ""),
        ]
        if r.torch_total_bytes is not None and r.torch_free_bytes is not None:
            rows.append(("torch mem_get_info", f"{size(r.torch_free_bytes)} free", f"of {size(r.torch_total_bytes)}"))
        held = ", ".join(
            f"pid {p.pid}: {size(p.used_bytes) if p.used_bytes is not None else 'n/a'}" for p in r.processes
        )
        rows.append(("processes", count(len(r.processes)), held))
        if cat is None:
            rows.append(("catalog", "no match", "not in gpus.yaml: plan with --emit-deploy"))
        else:
            rows.append(
                ("catalog", cat.key, f"NVML total {size(cat.nvml_total_bytes)}, CUDA {size(cat.cuda_total_bytes)}")
            )
            rows.append(
                ("usable vs catalog", size(r.usable_bytes - cat.cuda_total_bytes), "measured − catalog CUDA total")
            )
            rows.append(("in use by others", size(r.used_bytes), "already taken before a server starts"))
        sections.append(Section(f"GPU {r.index}", tuple(rows), ("", "", "")))
    return Report(
        "probe",
        f"kvplan probe: {len(readings)} GPU(s)",
        tuple(sections),
        {
            "gpus": [
                {**asdict(r), "catalog": (match_catalog(r) or Gpu.__new__(Gpu)).__dict__.get("key")} for r in readings
            ]
        },
    )


def _yaml_value(name: str, v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if name in _BYTE_KNOBS and isinstance(v, int):
        return f"{v}B"
    return json.dumps(v) if isinstance(v, str) else str(v)


def deployment_yaml(dep: Deployment, gpu: Gpu, pre_load_free: int) -> str:
    """A deployment file whose GPU section is the measured one (plain YAML, written without a YAML library)."""
    lines = [
        "schema_version: 1",
        f"name: {json.dumps(dep.name.removesuffix(' (+ --set)') + '-probed')}",
        f"description: {json.dumps('written by kvplan probe --emit-deploy: ' + gpu.source)}",
        f"model: {json.dumps(dep.model)}",
        f"engine: {dep.engine}",
        f"engine_version: {json.dumps(dep.engine_version)}",
    ]
    for name in sorted(dep.explicit - {"gpu", "pre_load_free", "engine_version"}):
        v = getattr(dep, name)
        if v is not None:
            lines.append(f"{name}: {_yaml_value(name, v)}")
    lines += [
        "gpu:",
        f"  name: {json.dumps(gpu.name)}",
        f"  nvml_total: {gpu.nvml_total_bytes}B",
        f"  cuda_total: {gpu.cuda_total_bytes}B",
        f"  sm: {gpu.sm}",
        f"  hbm_bandwidth_per_s: {gpu.hbm_bandwidth_bytes_per_s}B",
        f"  source: {json.dumps(gpu.source)}",
        "# free memory now, less the CUDA context and NCCL buffers a server takes before its memory baseline",
        f"pre_load_free: {pre_load_free}B",
    ]
    return "\n".join(lines) + "\n"


def validate_report(plan: PoolPlan, results: tuple[Measured, ...], scaled_to: int | None) -> Report:
    rows = []
    for m in results:
        rows.append(
            (
                str(m.rank),
                m.device,
                count(m.tensors),
                size(m.predicted_bytes),
                size(m.nbytes) + (" ✓" if m.nbytes == m.predicted_bytes else " ✗"),
                size(m.reserved_delta) if m.reserved_delta is not None else "n/a",
                size(m.nvml_used_delta) if m.nvml_used_delta is not None else "n/a",
                size(m.workspace_bytes) + ("" if m.workspace_ok else " (failed)"),
                "held" if m.held else (m.error or "missed"),
            )
        )
    ok = all(m.held for m in results)
    missed = [m for m in results if not m.held]
    verdict = (
        "PREDICTION HELD: Σ nbytes equals the plan on every rank"
        if ok
        else "PREDICTION MISSED on rank(s) " + ", ".join(
            f"{m.rank} ({m.error or f'{m.nbytes - m.predicted_bytes:+,} B'})" for m in missed)
    )  # fmt: skip
    notes = [
        "allocator reserved − Σ nbytes is the caching allocator's rounding (2 MiB per large tensor);"
        " NVML's delta also holds the CUDA context, counted before the first tensor",
    ]
    if scaled_to:
        notes.append(f"scaled pool: --tokens {scaled_to:,} (same layer structure, context capped to the pool)")
    return Report(
        "validate",
        title("validate", plan, f"{plan.rows:,} rows per rank"),
        (
            Section(
                "Predicted vs allocated",
                tuple(rows),
                (
                    "rank",
                    "device",
                    "tensors",
                    "predicted",
                    "Σ nbytes",
                    "allocator reserved Δ",
                    "NVML used Δ",
                    "workspaces",
                    "",
                ),
            ),
        ),
        {"held": ok, "rows_per_rank": plan.rows, "scaled_to_tokens": scaled_to, "ranks": [asdict(m) for m in results]},
        verdict=verdict,
        verdict_ok=ok,
        notes=tuple(notes),
    )
