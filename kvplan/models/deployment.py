"""A deployment YAML and --set knobs -> Deployment (and a requirements file -> Requirements): knob names and values
checked against the engine, the layout and the memory figures."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kvplan import limits
from kvplan.errors import ConfigError, InputError
from kvplan.models import validate
from kvplan.models.arch import ModelArch, Split
from kvplan.models.deploy import (
    AUTO_FIT,
    ENGINE_KNOBS,
    ENGINES,
    KNOBS,
    KV_CACHE_DTYPES,
    MODEL_DTYPES,
    QUANTIZATIONS,
    Deployment,
    Requirements,
)
from kvplan.models.engine_flags import knob_for_prefix, nearest_knob, spellings
from kvplan.models.formats import MlaLayout
from kvplan.models.gpus import GPU_SPEC_KNOBS, custom_gpu, find_gpu, gpu_key, gpu_of
from kvplan.models.pipeline import parse_layer_partition
from kvplan.models.presets import DEFAULT_DEPLOYMENT, SCHEMA_VERSION, check_schema, resolve_preset
from kvplan.models.reader import Doc, Reader, _show
from kvplan.models.rope import ROPE_TYPES
from kvplan.units import MiB, parse_concurrency, parse_percent_ppm
from kvplan.versions import rules_for

ALIASES = {
    "tensor_parallel_size": "tp", "tp_size": "tp", "dcp_size": "dcp",
    "decode_context_parallel_size": "dcp", "dp": "dp_attention", "dp_size": "dp_attention",
    "ep_size": "ep", "pp_size": "pp", "pipeline_parallel_size": "pp", "max_model_len": "context_length",
    "block_size": "page_size", "max_num_seqs": "max_running_requests", "kv_cache_memory_bytes": "kv_cache_memory",
    "num_speculative_tokens": "speculative_num_draft_tokens", "version": "engine_version",
    "enforce_eager": "disable_cuda_graph", "sglang_swa_eviction_interval": "swa_eviction_interval",
    "vllm_pp_layer_partition": "pp_layer_partition", "sglang_pp_layer_partition": "pp_layer_partition",
    "sglang_allow_overwrite_longer_context_len": "allow_long_context",
    "vllm_allow_long_max_model_len": "allow_long_context",
}  # fmt: skip
"""The engines' own spellings (SGLang and vLLM flags, with dashes or underscores) -> kvplan's knob names."""
_DEPLOY_META = {"schema_version", "name", "description", "requirements"}
GPU_COUNTS = ("gpus_per_node", "nodes", "tp", "dp_attention", "ep", "pp", "dcp")
TOKEN_KNOBS = ("page_size", "chunked_prefill_size", "context_length", "max_num_batched_tokens", "max_total_tokens")
MEMORY_KNOBS = ("kv_cache_memory", "weights_per_gpu", "pre_load_free", "runtime_overhead")
DEFAULT_ENGINE = "sglang"
DEFAULT_GPU = "h200"
DEFAULT_GPUS_PER_NODE = 8


def canonical_key(key: str, *, abbrev: bool = False) -> str:
    """A knob name as kvplan spells it: '--tensor-parallel-size' and 'max_model_len' are 'tp' and 'context_length';
    with ``abbrev`` (a command line's --set), an engine flag's unique prefix too, as argparse takes '--mem-frac'."""
    k = key.strip().lstrip("-").replace("-", "_").lower()
    if k in ALIASES or k in KNOBS or k in GPU_SPEC_KNOBS:
        return ALIASES.get(k, k)
    return spellings().get(k) or (knob_for_prefix(k) if abbrev else None) or k  # the engines' flags, any version


def _knobs_list() -> str:
    return ", ".join((*KNOBS, *GPU_SPEC_KNOBS))


def _knob_values(r: Reader, *, override: bool = False) -> Iterator[tuple[str, Any]]:
    """Each knob present in r, converted and checked."""
    for key in r.data:
        if key in _DEPLOY_META:
            if override:
                r.fail(key, f"{key} is not a deployment knob; --set changes knobs only ({_knobs_list()})")
            continue
        if r.data[key] is None:
            continue
        if key in GPU_COUNTS:
            yield key, r.get_int(key, maximum=limits.MAX_GPUS)
        elif key == "context_length" and str(r.data[key]).strip().lower() in ("-1", "auto"):
            yield key, AUTO_FIT  # vLLM --max-model-len -1 / auto: fitted to the KV cache memory
        elif key in TOKEN_KNOBS:
            yield key, r.get_tokens(key)
        elif key in ("max_running_requests", "cuda_graph_max_bs", "max_mamba_cache_size", "num_gpu_blocks_override"):
            yield key, r.get_int(key)
        elif key == "speculative_eagle_topk":
            yield key, r.get_int(key, maximum=limits.MAX_DIM)
        elif key in MEMORY_KNOBS:  # vLLM takes any positive --kv-cache-memory-bytes
            yield key, r.get_bytes(key, minimum=1 if key == "kv_cache_memory" else limits.MIN_MEMORY_KNOB_BYTES)
        elif key == "non_kv_other":
            yield key, r.get_bytes(key, minimum=0)
        elif key in ("mem_fraction_static", "gpu_memory_utilization", "swa_full_tokens_ratio"):
            yield key, r.get_fraction(key)
        elif key == "speculative_num_draft_tokens":
            yield key, r.get_int(key, minimum=0, maximum=limits.MAX_DIM)
        elif key in (
            "disable_cuda_graph",
            "disable_radix_cache",
            "async_scheduling",
            "flashinfer_sampler",
            "disable_hybrid_kv_cache_manager",
            "allow_long_context",
        ):
            yield key, r.get_bool(key)
        elif key == "swa_eviction_interval":
            yield key, r.get_int(key, maximum=limits.MAX_TOKENS)
        elif key == "dtype":
            yield key, r.get_choice(key, MODEL_DTYPES)
        elif key == "pp_layer_partition":
            yield key, r._get(key, parse_layer_partition, False, None)
        elif key == "rope_scaling":
            yield key, r.get_choice(key, ROPE_TYPES)
        elif key == "quantization":
            yield key, r.get_choice(key, QUANTIZATIONS)
        elif key == "engine":
            yield key, r.get_choice(key, tuple(ENGINES))
        elif key == "kv_cache_dtype":
            yield key, r.get_choice(key, KV_CACHE_DTYPES)
        elif key == "mla_layout":
            yield key, r.get_choice(key, tuple(m.value for m in MlaLayout))
        elif key == "gpu":
            if isinstance(r.data[key], dict):
                yield key, gpu_of(r.sub(key), "custom")
            else:
                value = r.data[key]
                name = str(value) if isinstance(value, int) and not isinstance(value, bool) else r.get_str(key)
                if gpu_key(name) == "custom":
                    yield key, "custom"  # with gpu_memory (and gpu_sm): custom_gpu
                    continue
                try:
                    yield key, find_gpu(name)
                except InputError as e:
                    r.fail(key, str(e))
        elif key == "gpu_memory":
            yield key, r.get_bytes(key, minimum=limits.MIN_GPU_BYTES)
        elif key == "gpu_sm":
            yield key, r.get_int(key, minimum=0, maximum=1000)
        elif key in ("model", "engine_version", "attention_backend"):
            value = r.data[key]
            if isinstance(value, int | float) and not isinstance(value, bool) and key == "engine_version":
                r.fail(key, f'write the version as a string, e.g. engine_version: "{value}" (YAML read {value!r})')
            yield key, str(r.get_str(key))
        else:
            r.fail(key, f"unknown key{nearest_knob(key, (*KNOBS, *GPU_SPEC_KNOBS))}; the knobs are: {_knobs_list()}")


def _normalized(doc: Doc) -> Doc:
    """The top-level keys under kvplan's knob names (engine spellings accepted), lines kept."""
    if not isinstance(doc.data, dict):
        return doc
    data: dict[str, Any] = {}
    origin: dict[str, str] = {}
    lines = dict(doc.lines)
    for key, value in doc.data.items():
        name = canonical_key(str(key)) if str(key) not in _DEPLOY_META else str(key)
        if name in data:
            raise ConfigError(
                f"given twice: as {origin[name]!r} (line {doc.line((origin[name],))}) and as {key!r}",
                source=doc.source,
                key=name,
                line=doc.line((key,)),
            )
        data[name] = value
        origin[name] = str(key)
        if name != key:
            for path, line in doc.lines.items():
                if path[:1] == (key,):
                    lines[(name, *path[1:])] = line
    return Doc(data, doc.source, lines, doc.strict)


def parse_set(items: list[str] | tuple[str, ...]) -> Doc:
    """`--set key=value` items as a Doc whose source is '--set'."""
    data: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise InputError(f"--set {_show(item)}: expected KEY=VALUE, e.g. --set dcp=8 (knobs: {_knobs_list()})")
        raw_key, value = (s.strip() for s in item.split("=", 1))
        key = canonical_key(raw_key, abbrev=True)
        if not value:
            raise InputError(f"--set {_show(item)}: empty value")
        if key in data:
            raise InputError(f"--set {key} given twice")
        try:
            data[key] = _scalar(value)
        except InputError as e:
            raise type(e)(f"--set: {key}: {e}") from None
    return Doc(data, "--set")


def _scalar(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "default"):
        return None
    if re.fullmatch(r"[+-]?\d+(?:_\d+)*", text):
        return limits.int_text(text, name="value")
    return text  # fractions, sizes and versions ('0.5.23', '0.1') stay text for the typed readers


def _engine_name(engine: str) -> str:
    return {"sglang": "SGLang", "vllm": "vLLM"}.get(engine, engine)


def _check_engine_knobs(values: dict[str, Any], engine: str, blame: Callable[..., Reader]) -> None:
    """A knob only the other engine reads is an error naming this engine's own knob (one table: ENGINE_KNOBS)."""
    for knob, (owner, instead) in ENGINE_KNOBS.items():
        if knob in values and owner != engine:
            own, other = _engine_name(owner), _engine_name(engine)
            article = "an" if own[0] in "SAEIOU" else "a"
            what = f"{other}'s is {instead}" if instead in KNOBS else f"{other} has none ({instead})"
            blame(knob).fail(knob, f"{knob} is {article} {own} knob; {what}")
    if values.get("context_length") == AUTO_FIT and engine != "vllm":
        blame("context_length").fail("context_length", "-1 (auto-fit to the KV cache memory) is vLLM's; give a length")


def load_deployment(ref: str | None, sets: list[str] | tuple[str, ...] = ()) -> Deployment:
    """A deployment preset or YAML file, with `--set` overrides applied on top.

    Only ``model`` is required; the rest is defaulted and the defaults are recorded on the Deployment
    (``defaulted``) so that the output says which values kvplan chose.
    """
    doc = _normalized(resolve_preset("deployments", ref if ref is not None else DEFAULT_DEPLOYMENT))
    r = Reader(doc)
    defaulted: list[tuple[str, str, str]] = []
    if not r.has("schema_version"):
        defaulted.append(("schema_version", str(SCHEMA_VERSION), "the current schema"))
    check_schema(r, required=False)
    values = dict(_knob_values(r))
    written_for = str(values.get("model", ""))
    override = Reader(parse_set(sets))
    overridden = dict(_knob_values(override, override=True))
    cleared = {k for k, v in override.data.items() if v is None}
    values.update(overridden)
    for k in cleared:
        values.pop(k, None)

    def blame(*keys: str) -> Reader:
        return override if any(k in override.data for k in keys) else r

    def default(knob: str, value: Any, shown: str, why: str) -> None:
        values[knob] = value
        defaulted.append((knob, shown, why))

    if "model" not in values:
        r.fail("model", "missing (required): the model served, a preset such as glm-5.3 or a model file")
    if "engine" not in values:
        default("engine", DEFAULT_ENGINE, DEFAULT_ENGINE, "kvplan's default engine")
    engine = values["engine"]
    if "engine" in overridden and "engine_version" not in overridden:
        values["engine_version"] = ENGINES[engine][0]  # switching engines takes the new engine's semantics
    if "engine_version" not in values:
        default("engine_version", ENGINES[engine][0], ENGINES[engine][0], "the newest version kvplan models")
    version = values["engine_version"]
    try:
        rules_for(engine, version)  # any version: the rules in force then
    except InputError as e:
        where = override if "engine_version" in overridden or "engine" in overridden else r
        where.fail("engine_version", str(e).removeprefix(f"engine_version {version}: "))
    _check_engine_knobs(values, engine, blame)
    custom_gpu(values, blame)
    if "gpu" not in values:
        default("gpu", find_gpu(DEFAULT_GPU), DEFAULT_GPU, "kvplan's default GPU")
    if "gpus_per_node" not in values:
        default("gpus_per_node", DEFAULT_GPUS_PER_NODE, str(DEFAULT_GPUS_PER_NODE), "one 8-GPU node")
    if "nodes" not in values:
        default("nodes", 1, "1", "one node")
    gpus = values["gpus_per_node"] * values["nodes"]
    if gpus > limits.MAX_GPUS:
        blame("nodes", "gpus_per_node").fail(
            "nodes", f"{values['nodes']:,} nodes × {values['gpus_per_node']:,} GPUs is past kvplan's limit of"
            f" {limits.MAX_GPUS:,} GPUs"
        )  # fmt: skip
    if "tp" not in values:
        tp = max(gpus // values.get("pp", 1), 1)
        default(
            "tp",
            tp,
            str(tp),
            f"all {gpus} GPUs / pp {values.get('pp', 1)} ({_engine_name(engine)}'s own default is 1, which no"
            " large model fits)",
        )
    switched = {"engine_version"} if "engine" in overridden else set()  # the new engine's version, not the file's
    dep = Deployment(
        name=r.get_str("name", default=Path(doc.source).stem) + (" (+ --set)" if sets else ""),
        source=doc.source,
        description=r.get_str("description", default=""),
        explicit=frozenset(values) - {"model", "engine", "gpu"} - {d[0] for d in defaulted},
        defaulted=tuple(defaulted),
        written_for=written_for,
        from_file=(frozenset(r.data) & frozenset(values)) - frozenset(override.data) - {"model"} - switched,
        **values,
    )
    _check_layout(dep, r, override)
    _check_memory(dep, blame)
    return dep


def _check_layout(d: Deployment, file: Reader, override: Reader) -> None:
    """Cross-knob rules, blamed on --set when --set gave one of the knobs involved, else on the file."""

    def blame(*keys: str) -> Reader:
        return override if any(k in override.data for k in keys) else file

    if d.tp % d.dcp:
        blame("dcp", "tp").fail("dcp", f"dcp {d.dcp} must divide tp {d.tp}")
    if d.tp % d.dp_attention:
        blame("dp_attention", "tp").fail("dp_attention", f"dp_attention {d.dp_attention} must divide tp {d.tp}")
    if d.pp_layer_partition is not None and len(d.pp_layer_partition) != d.pp:
        blame("pp_layer_partition", "pp").fail(
            "pp_layer_partition", f"{len(d.pp_layer_partition)} stages given for pp {d.pp} (one entry per stage)"
        )
    _check_gpu_count(d, blame)


def _check_gpu_count(d: Deployment, blame: Callable[..., Reader]) -> None:
    """The one GPU-count rule: the layout's ranks, max(tp, ep) × pp (dp-attention and dcp split tp), fit on
    nodes × gpus_per_node; if not, the message names the node count that would hold them."""
    width, knob = (d.ep, "ep") if d.ep > d.tp else (d.tp, "tp")
    needed = width * d.pp
    have = d.nodes * d.gpus_per_node
    if needed <= have:
        return
    nodes = -(-needed // d.gpus_per_node)
    blame(knob, "pp", "nodes", "gpus_per_node").fail(
        knob,
        f"{knob} {width} × pp {d.pp} needs {needed} GPUs, and {d.nodes} node(s) × {d.gpus_per_node} GPUs hold {have}:"
        f" add nodes={nodes} (--set nodes={nodes}) for {nodes} × {d.gpus_per_node} GPUs, or give gpus_per_node",
    )


def _check_memory(d: Deployment, blame: Callable[..., Reader]) -> None:
    """A GPU cannot hold more than its memory: every per-GPU byte knob is at most the GPU's NVML total."""
    total = d.gpu.nvml_total_bytes
    for knob in (*MEMORY_KNOBS, "non_kv_other"):
        value = getattr(d, knob)
        if value is not None and value > total:
            blame(knob, "gpu").fail(
                knob,
                f"{value:,} B is more than the whole GPU ({d.gpu.name}: {total:,} B = {total // MiB:,} MiB NVML total)",
            )


def load_requirements(ref: str) -> Requirements:
    """The `requirements:` section of a deployment file (empty when there is none)."""
    r = Reader(resolve_preset("deployments", ref))
    if not r.has("requirements"):
        return Requirements()
    q = r.sub("requirements")
    q.reject_unknown({"ctx", "concurrency", "max_capacity_drop"})
    concurrency: list[tuple[int, int]] = []
    if q.has("concurrency"):
        items = q.data["concurrency"]
        if not isinstance(items, list):
            items = [items]
        for i, item in enumerate(items):
            try:
                concurrency.append(parse_concurrency(str(item)))
            except InputError as e:
                q.fail(("concurrency", i), str(e))
    return Requirements(
        min_ctx_tokens=q.get_tokens("ctx"),
        concurrency=tuple(concurrency),
        max_capacity_drop_ppm=q._get("max_capacity_drop", lambda v: parse_percent_ppm(str(v)), False, None),
    )


def deployment_model_ref(d: Deployment) -> str:
    """The model reference of a deployment, relative paths taken from the deployment file's folder."""
    if d.source.endswith("(built-in)") or not any(c in d.model for c in "/\\"):
        return d.model
    path = Path(d.model)
    return str(path if path.is_absolute() else Path(d.source).parent / path)


def check_model_for_deployment(arch: ModelArch, dep: Deployment) -> None:
    """Rules that need both the model and the deployment, applied where a user's plan is loaded.

    - weights: a model with no parameter groups (a config.json without ``hidden_size``) and no measured point
      cannot be planned unless ``weights_per_gpu`` is given (kvplan would otherwise plan 0 B of weights);
    - ``weights_per_gpu`` under limits.MIN_WEIGHTS_PPM (1 %) of the model's own estimate is a unit slip.
    """
    validate.refuse_unplanned(arch, dep)  # before the weights: a layout kvplan cannot plan is the one line that matters
    split = Split.of(tp=dep.tp, dp_attention=dep.dp_attention, ep=dep.ep, pp=dep.pp)
    if dep.weights_per_gpu is None and arch.measured_weights_for(split) is not None:
        return  # a measured point: no estimate to check (a preset's tensors are then never laid out)
    estimate = arch.estimated_weights_per_gpu(split, with_mtp=dep.mtp)
    if dep.weights_per_gpu is not None:
        if estimate > 0 and dep.weights_per_gpu * 1_000_000 < estimate * limits.MIN_WEIGHTS_PPM:
            raise InputError(
                f"weights_per_gpu {dep.weights_per_gpu:,} B is under 1 % of the {estimate:,} B that {arch.name}'s"
                f" parameters take split {split}: a unit slip? (kvplan refuses weights below 1 % of its estimate)"
            )
        return
    if estimate <= 0:
        raise InputError(
            f"model {arch.name} ({arch.source}): no weights to plan with (the config has no hidden_size or leaves"
            " the MLP out, so kvplan cannot count the parameters): give --set weights_per_gpu=...GiB, e.g. from the"
            " engine log"
        )
