"""Plans of a deployment with some knobs changed, and what a plan resolved each knob to."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import KV_CACHE_DTYPES, Deployment

# --------------------------------------------------------------------------- helpers


def _with(dep: Deployment, changes: dict[str, Any]) -> Deployment:
    if not changes:
        return dep
    explicit = dep.explicit | frozenset(k for k in changes if k not in ("engine", "engine_version"))
    return replace(dep, **changes, explicit=explicit)


def _plan(arch: ModelArch, dep: Deployment) -> PoolPlan | None:
    try:
        return plan_pool(arch, dep)
    except InputError:
        return None


def _family(p: PoolPlan) -> str:
    return "fp8" if p.is_fp8 else "bf16"


def _resolved(p: PoolPlan, knob: str) -> object:
    """A knob's effective value in a plan, for comparing the config with the log."""
    if knob == "kv_cache_dtype":
        return f"{_family(p)}/{p.kv_format}"
    if knob == "mla_layout":
        return p.kv_format
    if knob == "context_length":
        return p.context_len
    if knob == "dcp":
        return p.dcp
    if knob == "page_size":
        return p.page_tokens
    for k in p.knobs:
        if k.name == knob:
            return k.value
    return getattr(p.deployment, knob)


def _shown_config(p: PoolPlan, knob: str) -> tuple[object, str]:
    """The config's value of a knob as a person reads it, and its origin."""
    for k in p.knobs:
        if k.name == knob:
            value = k.value
            if knob == "kv_cache_dtype":
                value = f"{k.value} ({p.kv_format} rows)"
            return value, k.origin
    if knob == "page_size":
        return p.page_tokens, "set" if "page_size" in p.deployment.explicit else "default"
    value = _resolved(p, knob)
    return value, "set" if knob in p.deployment.explicit else "default"


def _kv_dtype(text: str, engine: str) -> str | None:
    t = text.strip().lower().removeprefix("torch.")
    if t in ("auto", "bfloat16", "bf16", "fp8_ds_mla"):
        return t
    if t.startswith("float8_e4m3") or t in ("fp8_e4m3", "fp8"):
        return "fp8_e4m3" if engine == "sglang" else ("fp8" if t == "fp8" else "fp8_e4m3")
    return t if t in KV_CACHE_DTYPES else None


def _backend(prefill: str, decode: str) -> str:
    if "trtllm" in (prefill, decode):
        return "trtllm"
    return prefill if prefill == decode else f"{prefill}/{decode}"


def _float(text: str) -> float:
    return float(text)
