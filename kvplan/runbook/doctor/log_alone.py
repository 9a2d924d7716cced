"""The log alone: presets ranked by the log's bytes, a proposed deployment, GPU candidates."""

from __future__ import annotations

import json
from dataclasses import replace

from kvplan.engines.common import weights_knob
from kvplan.engines.model_dtype import with_model_dtype
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import gpu_catalog
from kvplan.models.presets import preset_names
from kvplan.runbook.doctor.causes import _index_outside_kv_size
from kvplan.runbook.doctor.plans import _plan, _with
from kvplan.runbook.doctor.results import CANNOT_TELL, MISMATCH, Diagnosis, Headline, ModelCheck, StartupCheck
from kvplan.runbook.evidence import Candidate, Evidence, gather, rank_candidates
from kvplan.runbook.parse import ParsedLog, Run
from kvplan.units import GiB
from kvplan.versions import rules_for

# --------------------------------------------------------------------------- the log alone


def rank_presets(run: Run, evidence: Evidence, extra: tuple[ModelArch, ...] = ()) -> tuple[Candidate, ...]:
    """kvplan's model presets (and ``extra``, e.g. ``--model``) ranked by how close the bytes of one of their pool
    rows, as the log's engine and split allocate them, are to the bytes the log's figures give (item 3)."""
    if not evidence.has_bytes or not evidence.per_row_low or run.engine is None:
        return ()  # no range, or only an upper bound (the free-memory drop): every smaller model would 'fit'
    if evidence.hybrid is not None:
        return ()  # a hybrid's row is its full-attention layers' (or a shared block pool): a uniform preset's is not
    assert evidence.per_row_low is not None and evidence.per_row_high is not None

    sets = [f"engine={run.engine}"]
    if run.version is not None:
        try:
            rules_for(run.engine, run.version.value.lstrip("v"))
            sets.append(f"engine_version={run.version.value.lstrip('v')}")
        except InputError:
            pass
    for src in (run.args, run.cli_args):
        dtype = src.value.text("kv_cache_dtype") if src is not None else None
        if dtype and dtype != "auto":
            sets.append(f"kv_cache_dtype={dtype}")  # the K/V element size is the log's
            break
    tp = None
    if run.args is not None:
        tp = run.args.value.integer("tp_size") or run.args.value.integer("tensor_parallel_size")
    if run.cli_args is not None and tp is None:
        tp = run.cli_args.value.integer("tensor_parallel_size")
    sizes: dict[str, int] = {}
    likeness: dict[str, tuple[int, int]] = {}
    archs: list[tuple[str, ModelArch]] = [(a.name, a) for a in extra]
    for name in preset_names("models"):
        try:
            archs.append((name, load_model(name)))
        except InputError:
            continue
    # the log's own multiplier: vLLM's 'Multiplying the GPU KV cache size by the dcp_world_size
    # N' means each logged token is 1/N of a rank's row (kv_cache_utils.py), and tp is a multiple of N
    # (vllm/config/parallel.py: "decode_context_parallel_size must be <= tensor_parallel_size")
    dcp = run.dcp_multiplier.value if run.dcp_multiplier is not None and run.dcp_multiplier.value > 1 else 1
    splits = (
        (tp,) if tp else (dcp,) if dcp > 1 else (1, 2, 4, 8)
    )  # the log prints no tp: a K/V row depends on it, so each split is a candidate
    for (name, arch), split in ((a, t) for a in archs for t in splits):
        label = name if tp or (split == 1 and arch.is_mla) else f"{name} at tp {split}"
        if dcp > 1:
            label = f"{name} at dcp {dcp}"
        elif not tp and arch.is_mla and split > 1:
            continue  # an MLA latent is not split by tp
        try:
            dt_sets = () if any(x.startswith("kv_cache_dtype=") for x in sets) else ("kv_cache_dtype=auto",)
            dep = load_deployment(None, (*sets, f"model={name}", f"tp={split}", *dt_sets,
                                         "page_size=default", "mla_layout=default", f"dcp={dcp}"))  # fmt: skip
        except InputError:
            continue
        # the bytes of a row do not depend on the memory: plan with room for 10,000 rows whatever the weights
        rows = 10_000
        if run.engine == "sglang":
            big = {"pre_load_free": 64 * GiB + rows * 400_000, "weights_per_gpu": 1, "mem_fraction_static": 0.9,
                   "max_total_tokens": rows}  # fmt: skip
        else:
            big = {"kv_cache_memory": 64 * GiB}
        p = _plan(arch, _with(dep, big))
        if p is None:
            continue
        likeness[label] = _likeness(run, evidence, arch, dep)
        if evidence.per_row_unit == "B per block":
            sizes[label] = p.extras.get("bytes_per_block", p.cell.total_bytes * p.page_tokens)
        elif p.engine == "sglang":
            sizes[label] = (p.allocated_bytes - _index_outside_kv_size(p, p.rows)) // max(p.rows + p.page_tokens, 1)
        else:  # per logged token: a rank's block holds page_tokens × dcp logged tokens
            sizes[label] = p.extras.get("bytes_per_block", 0) // max(p.page_tokens * p.dcp, 1) or p.cell.total_bytes
    return rank_candidates(evidence.per_row_low, evidence.per_row_high, sizes, likeness)[:5]


def _likeness(run: Run, evidence: Evidence, arch: ModelArch, dep: Deployment) -> tuple[int, int]:
    """How unlike the log a candidate is beyond its rows: not the class the log prints ('Load weight end.
    type=…'), and how far its weights a GPU at the split are from the log's weights figure (0 without one). Never a
    filter: a log's GPU may hold only part of the weights (KTransformers keeps the experts on the CPU)."""
    weights = next((f for f in evidence.facts if f.name.startswith("weights (") and f.low and f.high), None)
    far = 0
    if weights is not None and weights.low is not None and weights.high is not None:
        value = weights_knob(with_model_dtype(arch, dep), dep, with_mtp=False).value  # as the engine builds it
        far = abs((value if isinstance(value, int) else 0) - (weights.low + weights.high) // 2)
    return (int(run.model_class is not None and arch.architecture != run.model_class), far)


def examine(log: ParsedLog, *, why: str, arch_class: str = "", extra: tuple[ModelArch, ...] = ()) -> Diagnosis:
    """The doctor without a config: what the log says on its own (the evidence table, what is derived, the models
    whose rows fit), and what to add to tell more. ``why`` says why no config was compared."""
    run = log.chosen
    evidence = gather(run)
    evidence = replace(evidence, candidates=rank_presets(run, evidence, extra))
    model = ModelCheck(kind="unknown" if run.model_class is None else "class_differs", log_class=run.model_class,
                       arch_class=arch_class, model_path=run.model_path)  # fmt: skip
    startup = None
    if evidence.refused is not None:
        startup = StartupCheck(message=evidence.refused, line=evidence.refused_line or run.last_line,
                               max_model_len=None, needed=None, available=None, estimated_max_len=None,
                               predicted=False, planned_needed_bytes=None, planned_estimate_low=None,
                               planned_estimate_high=None)  # fmt: skip
    what = run.model_path or run.model_class or "the model the server ran"
    missing = (f"--model for {what} (a preset, a kvplan model YAML, or its config.json)",
               "--deploy for its deployment (or --emit-deploy FILE to write the one the log implies)")  # fmt: skip
    headline = Headline(kind="refused" if startup is not None else "cannot_tell", missing=missing)
    return Diagnosis(
        log=log,
        run=run,
        status=MISMATCH if startup is not None else CANNOT_TELL,
        problems=("startup",) if startup is not None else (),
        notes=(why,),
        model=model,
        startup=startup,
        headline=headline,
        evidence=evidence,
    )


def proposed_deployment(d: Diagnosis) -> tuple[tuple[str, str, str], ...]:
    """The deployment the log implies, as (key, YAML value, comment) rows for ``--emit-deploy`` (item 5): what the
    log prints, the best-fitting model preset where the log's rows fit one, and a comment for what it leaves out."""
    run = d.run
    rows: list[tuple[str, str, str]] = [("schema_version", "1", "")]
    slug = (run.model_path or run.model_class or "").replace("/", "-").replace(" ", "-")[:80]
    rows.append(("name", _yaml_str(f"{slug}-from-log" if slug else "from-log"),
                 f"proposed by kvplan doctor from {d.log.source}"))  # fmt: skip
    e = d.evidence
    fit = next((c for c in e.candidates if c.fits), None) if e is not None else None
    if d.best is not None:
        rows.append(("model", _yaml_str(d.best.arch.name), "the model the doctor compared the log with"))
    elif fit is not None:
        preset, _, split = fit.name.partition(" at tp ")
        preset = preset.partition(" at dcp ")[0]
        rows.append(("model", _yaml_str(preset), f"the preset whose rows fit the log's ({fit.bytes_per_row:,} B); "
                     f"the log names {run.model_path or run.model_class or 'no model'}"))  # fmt: skip
        if split:
            rows.append(("tp", split, "the split at which the preset's rows fit the log's (the log prints no tp)"))
    else:
        rows.append(("model", _yaml_str(run.model_path or "SET-ME"),
                     "the log's model: give a preset, a kvplan model YAML or a config.json path"))  # fmt: skip
    dcp_at = run.dcp_multiplier
    if dcp_at is not None and dcp_at.value > 1:
        rows.append(("dcp", str(dcp_at.value), f"the log's dcp_world_size, line {dcp_at.line}"))
        if not any(r[0] == "tp" for r in rows) and not _printed_tp(run):
            rows.append(("tp", str(dcp_at.value), "at least the dcp: vLLM needs tp a multiple of dcp (the log "
                         "prints no tp)"))  # fmt: skip
    if run.engine is not None:
        rows.append(("engine", _yaml_str(run.engine), ""))
    if run.version is not None:
        rows.append(("engine_version", _yaml_str(run.version.value.lstrip("v")), f"line {run.version.line}"))
    a = run.args.value if run.args is not None else None
    cli = run.cli_args.value if run.cli_args is not None else None
    for key, names in (
        ("tp", ("tp_size", "tensor_parallel_size")),
        ("pp", ("pp_size", "pipeline_parallel_size")),
        ("context_length", ("context_length", "max_model_len", "max_seq_len")),
        ("page_size", ("page_size", "block_size")),
        ("max_total_tokens", ("max_total_tokens",)),
    ):
        for src in (a, cli):
            v = next((src.integer(n) for n in names if src is not None and src.integer(n)), None)
            if v:
                rows.append((key, str(v), "from the log's configuration line"))
                break
    seen = {r[0] for r in rows}
    if "tp" not in seen:
        tps = {r for r in run.ranks if r.startswith("TP") or " TP" in r or "_TP" in r}
        count = len(tps) or 1
        rows.append(("tp", str(count), f"inferred: {count} tensor-parallel rank(s) print in the log; it prints no tp"))
        seen.add("tp")
    for src in (a, cli):
        if src is None:
            continue
        for n in ("mem_fraction_static", "gpu_memory_utilization"):
            if n not in seen and (num := src.number(n)) is not None:
                rows.append((n, num, "from the log's configuration line"))
                seen.add(n)
        if "kv_cache_dtype" not in seen and (dt := src.text("kv_cache_dtype")) is not None:
            rows.append(("kv_cache_dtype", _yaml_str(dt), "from the log's configuration line"))
            seen.add("kv_cache_dtype")
    if run.engine == "sglang" and a is not None and a.flag("enable_dp_attention") and (dp := a.integer("dp_size")):
        rows.append(("dp_attention", str(dp), "enable_dp_attention with dp_size"))
    gpus, figure = gpu_candidates(run)
    if len(gpus) == 1:
        rows.append(("gpu", _yaml_str(gpus[0]), f"the only catalog GPU whose CUDA total fits the log's {figure}"))
    elif gpus:
        rows.append(("# gpu", "", f"one of {', '.join(gpus)} (their CUDA totals fit the log's {figure}): set it"))
    else:
        rows.append(("# gpu", "", "not in the log: add 'gpu: <name from kvplan gpus>' (the default is the preset's)"))
    return tuple(rows)


def _printed_tp(run: Run) -> bool:
    srcs = (run.args, run.cli_args)
    return any(a is not None and (a.value.integer("tp_size") or a.value.integer("tensor_parallel_size")) for a in srcs)


def gpu_candidates(run: Run) -> tuple[tuple[str, ...], str]:
    """Catalog GPUs whose CUDA total fits the log's memory: V0's total_gpu_memory (torch's total: within its
    rounding and 0.1 GiB), or SGLang's free memory before the weights (the total less a CUDA context of 0.2-3 GiB)."""
    catalog = gpu_catalog()
    if run.v0_memory is not None and run.v0_memory.value.total is not None:
        g = run.v0_memory.value.total
        lo, hi, figure = g.low_bytes - GiB // 10, g.high_bytes + GiB // 10, f"total_gpu_memory {g.text} GiB"
    elif run.load_begin:
        g = max((b.value for b in run.load_begin), key=lambda x: x.bytes)
        lo, hi, figure = g.low_bytes + GiB // 5, g.high_bytes + 3 * GiB, f"free memory before the weights {g.text} GiB"
    else:
        return (), ""
    return tuple(k for k, gpu in catalog.items() if lo <= gpu.cuda_total_bytes <= hi), figure


def _yaml_str(text: str) -> str:
    return json.dumps(text)
