"""Pipeline parallelism: which layers each stage holds, each stage's pool, and the stage that binds (pure).

Each stage's GPUs build only that stage's layers and size their own pool from their own free memory; the
engine then gives every stage the smallest pool:

- vLLM: ``v1/core/kv_cache_utils.py::get_kv_cache_configs`` (step 5: "change the num_blocks of each worker to
  the smallest among all workers"); the layers from ``vllm/distributed/utils.py::get_pp_indices``;
- SGLang: ``_apply_token_constraints`` (``all_reduce(MIN)`` of ``max_total_num_tokens`` across ranks under
  PP); the layers from ``python/sglang/srt/distributed/utils.py::get_pp_indices``.

So the deployment's pool is the binding stage's plan, and ``PoolPlan.stages`` says what each stage holds.
Refused (exit 2): speculative decoding with pp > 1 (SGLang refuses it unless SGLANG_ENABLE_PP_SPEC=1; vLLM's
MTP drafter does not start under pp: ``_SPEC_UNDER_PP``), a hybrid's kinds per stage (kvplan.models.pipeline).
Assumed the same on every stage: each engine's per-GPU terms beyond the weights and the sampler (``_PER_GPU_TERMS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kvplan.engines.common import PoolPlan, StagePool
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch, PipelineStage
from kvplan.models.deploy import Deployment
from kvplan.models.pipeline import stage_arch


def vllm_partition(num_layers: int, pp: int) -> tuple[int, ...]:
    """vLLM ``get_pp_indices`` without ``VLLM_PP_LAYER_PARTITION``: ``num_layers // pp`` each, the remainder one
    each to the stages before the last, from the second-to-last backwards (``partitions[-i] += 1`` for i in
    2 .. remainder + 1): 61 over 2 -> (31, 30); 5 over 3 -> (2, 2, 1)."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def sglang_partition(num_layers: int, pp: int) -> tuple[int, ...]:
    """SGLang ``get_pp_indices`` without ``SGLANG_PP_LAYER_PARTITION``: the last ``remainder`` stages get one extra
    layer ("the last N partitions will have one extra layer"): 61 over 2 -> (30, 31); 5 over 3 -> (1, 2, 2)."""
    base, rem = divmod(num_layers, pp)
    return tuple(base + (1 if rank >= pp - rem else 0) for rank in range(pp))


def partition(arch: ModelArch, dep: Deployment) -> tuple[tuple[int, ...], str]:
    """(layers per stage, where it came from): ``pp_layer_partition`` (the engines' env override) when set."""
    env = "SGLANG_PP_LAYER_PARTITION" if dep.engine == "sglang" else "VLLM_PP_LAYER_PARTITION"
    if dep.pp_layer_partition is not None:
        parts = dep.pp_layer_partition
        if len(parts) != dep.pp or sum(parts) != arch.num_layers:
            # the engines raise the same at start-up: len(partitions) != pp_size, sum != num_hidden_layers
            raise InputError(
                f"pp_layer_partition {list(parts)} ({env}): {len(parts)} stages summing to {sum(parts)} layers;"
                f" pp {dep.pp} and {arch.name}'s {arch.num_layers} layers need {dep.pp} entries summing to"
                f" {arch.num_layers}"
            )
        return parts, f"set ({env})"
    rule = sglang_partition if dep.engine == "sglang" else vllm_partition
    parts = rule(arch.num_layers, dep.pp)
    return parts, f"default: {'SGLang' if dep.engine == 'sglang' else 'vLLM'} get_pp_indices"


def stages(arch: ModelArch, dep: Deployment) -> tuple[PipelineStage, ...]:
    parts, _ = partition(arch, dep)
    if min(parts) < 1:
        raise InputError(
            f"pp {dep.pp} over {arch.name}'s {arch.num_layers} layers ({list(parts)}) leaves a stage with no"
            " decoder layer: lower pp"
        )
    out, start = [], 0
    for rank, n in enumerate(parts):
        out.append(PipelineStage(rank=rank, size=dep.pp, start=start, end=start + n, model_layers=arch.num_layers))
        start += n
    return tuple(out)


def plan_stages(arch: ModelArch, dep: Deployment, plan_one: Callable[[ModelArch, Deployment], PoolPlan]) -> PoolPlan:
    """Every stage planned with its own layers and weights; the binding one (a stage that cannot start, else
    the fewest pool rows) is the deployment's plan, with ``stages`` listing them all."""
    if dep.pp <= 1:
        return plan_one(arch, dep)
    if dep.mtp:
        raise InputError(_SPEC_UNDER_PP[dep.engine].format(pp=dep.pp))
    plans = [plan_one(stage_arch(arch, s), dep) for s in stages(arch, dep)]
    bind = min(range(len(plans)), key=lambda i: (plans[i].startup_error is None, plans[i].rows, i))
    _, origin = partition(arch, dep)
    summary = tuple(
        StagePool(
            stage=_stage_of(p),
            weights_bytes=p.knob("weights_per_gpu").as_int(),
            cell_bytes=p.cell.total_bytes,
            main_layers=p.main_layers,
            indexer_layers=p.indexer_layers,
            available_bytes=p.available_bytes,
            rows=p.rows,
            logged_tokens=p.logged_tokens,
            startup_error=p.startup_error,
            binding=i == bind,
        )
        for i, p in enumerate(plans)
    )
    engine_min = (
        "SGLang all_reduce(MIN) of max_total_num_tokens"
        if dep.engine == "sglang"
        else "vLLM get_kv_cache_configs: every worker gets the smallest num_blocks"
    )
    notes = [
        f"pp {dep.pp}: layers {'/'.join(str(s.stage.layers) for s in summary)} ({origin}); stage {bind} binds and"
        f" every stage's pool is cut to it ({engine_min})",
        _PER_GPU_TERMS[dep.engine],
    ]
    if dep.weights_per_gpu is not None:
        notes.append("weights_per_gpu as set is taken for every stage (each stage really loads its own share)")
    return replace(plans[bind], stages=summary, notes=(*plans[bind].notes, *notes))


_SPEC_UNDER_PP = {
    "sglang": "speculative decoding with pp {pp}: SGLang's server_args refuses pp > 1 with a speculative algorithm"
    " unless SGLANG_ENABLE_PP_SPEC=1 (sglang PR #30775: the draft worker on the last stage only), which kvplan"
    " does not plan; plan it at pp 1",
    "vllm": "speculative decoding with pp {pp}: vLLM's MTP drafter does not start under pipeline parallelism"
    " (SpeculativeConfig._verify_args demands SupportsPP of the draft model, vllm-project/vllm#52069), and kvplan does"
    " not plan it; plan it at pp 1",
}
_PER_GPU_TERMS = {
    "sglang": "per stage: mem_fraction_static's reserve (its tp × pp term) is the same on every rank; the weights"
    " and the cell are the stage's own",
    "vllm": "per stage: the profiling run samples on the last stage only (profile_run: is_last_rank); non-torch"
    " growth and the CUDA-graph estimate ASSUMED the same on every stage",
}


def _stage_of(p: PoolPlan) -> PipelineStage:
    assert p.arch.pp_stage is not None
    return p.arch.pp_stage
