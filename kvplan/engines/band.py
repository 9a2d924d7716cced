"""The pool as a point and a band: which memory terms outside the pool are read, taken or estimated, and how far
each estimate has missed the engines' own logs (DESIGN §2.5.1).

Every term a plan subtracts before its pool is READ (the engine's own arithmetic), TAKEN (a figure the user set or
a measured point) or an ESTIMATE: weights from config.json (kvplan.models.weights_band), SGLang's pre-load free
memory (CUDA total less an assumed 1 GiB), vLLM's modelled non-KV memory (``non_kv_other``).

An estimate's band is its largest relative error on the config-alone corpus (tests/runbook/config_alone: public
start-up logs, each term's true value solved from the pool the log prints), keyed by engine family, version range
(VERSION_RANGES) and GPU class. A cell measured by fewer than MIN_SOURCES sources (one team's images and habits,
not the engine's) borrows from the next wider cell that has them: the same family and range on any GPU class, then
the family on any version and GPU (whatever it holds). The plan is evaluated at each estimate's low and high ends
and the shifts are added (the pool is monotone in each term): the engine's formula at the ends of its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

from kvplan import record
from kvplan.engines import plan_pool
from kvplan.engines.common import Knob, PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment, Gpu
from kvplan.models.weights_band import band_for
from kvplan.versions import parse_version, vllm_rules

Source = Literal["read", "taken", "estimate"]
PPM = 1_000_000


@record
class Fitted:
    """The largest |term error| of one (engine family, version range, GPU class) cell of the corpus."""

    ppm: int
    cases: int
    sources: int
    worst: str
    """The corpus row that set it."""


# Fitted on tests/runbook/config_alone (every case) by `python -m tests.runbook.config_alone --write`, which
# rewrites the block below, README's config-alone table and its leave-one-source-out figures and rows
# (tests/runbook/test_config_alone_band.py checks all three are the corpus' fit). The term's true value in each
# case is solved from the pool its log prints, with the log's own weights figure where the log prints one (so a
# weights miss is not charged to this term). Each cell names its widest case; README prints each case's held-out
# band (its own source left out of the fit) and whether it holds.
# BEGIN ERRORS (generated)
ERRORS: Mapping[tuple[str, str, str], Fitted] = {
    ("sglang", "*", "*"): Fitted(30255, 10, 8, "SGLang 0.4.3.post4, QwQ-32B bf16, L4 × 4, TP4: +3.0 %"),
    ("sglang", "*", "amd"): Fitted(26237, 2, 1, "SGLang 0.5.9 (ROCm), GLM-5-FP8, MI355X × 8, TP8, fp8 KV: −2.6 %"),
    ("sglang", "*", "ampere-ada"): Fitted(30255, 2, 2, "SGLang 0.4.3.post4, QwQ-32B bf16, L4 × 4, TP4: +3.0 %"),
    ("sglang", "*", "hopper-blackwell"): Fitted(
        15540, 6, 5, "SGLang (Jul 2025), Qwen3-235B-A22B-FP8, H100 × 4, TP4, mfs 0.93: −1.6 %"
    ),
    ("vllm-v0", "*", "*"): Fitted(3753819, 4, 3, "vLLM 0.8.1 (V0 with LoRA), Llama-2-7b fp16, H100 × 1, TP1: +375.4 %"),
    ("vllm-v0", "*", "consumer"): Fitted(
        142860, 2, 1, "vLLM 0.6.4 (V0), Llama-3.1-8B bf16, RTX 3090 × 1, TP1, max_model_len 20000: −14.3 %"
    ),
    ("vllm-v0", "*", "hopper-blackwell"): Fitted(
        3753819, 2, 2, "vLLM 0.8.1 (V0 with LoRA), Llama-2-7b fp16, H100 × 1, TP1: +375.4 %"
    ),
    ("vllm-v1", "*", "*"): Fitted(
        815178, 57, 11, "vLLM 0.24.0, Qwen3-8B bf16, RTX 4090 × 1, TP1 (no FlashInfer sampler): −81.5 %"
    ),
    ("vllm-v1", "0.17-0.20", "*"): Fitted(
        487704, 29, 3, "vLLM 0.20.0 (record), DeepSeek-R1-0528 fp8, H200 × 8, TP8, util 0.92: +48.8 %"
    ),
    ("vllm-v1", "0.17-0.20", "amd"): Fitted(
        226250, 2, 1, "vLLM 0.18.0+rhaiv.0 (record), Llama-3.3-70B-Instruct bf16, MI300X × 1, TP1, util 0.92: −22.6 %"
    ),
    ("vllm-v1", "0.17-0.20", "ampere-ada"): Fitted(
        60562, 1, 1, "vLLM 0.19.1, Qwen3-8B bf16, A100-SXM4-40GB × 1, TP1: +6.1 %"
    ),
    ("vllm-v1", "0.17-0.20", "hopper-blackwell"): Fitted(
        487704, 26, 2, "vLLM 0.20.0 (record), DeepSeek-R1-0528 fp8, H200 × 8, TP8, util 0.92: +48.8 %"
    ),
    ("vllm-v1", "0.21+", "*"): Fitted(
        815178, 4, 3, "vLLM 0.24.0, Qwen3-8B bf16, RTX 4090 × 1, TP1 (no FlashInfer sampler): −81.5 %"
    ),
    ("vllm-v1", "0.21+", "ampere-ada"): Fitted(536549, 2, 2, "vLLM 0.26.0, Llama-3.1-8B bf16, A40 × 1, TP1: −53.7 %"),
    ("vllm-v1", "0.21+", "consumer"): Fitted(
        815178, 2, 1, "vLLM 0.24.0, Qwen3-8B bf16, RTX 4090 × 1, TP1 (no FlashInfer sampler): −81.5 %"
    ),
    ("vllm-v1", "0.9-0.16", "*"): Fitted(
        678835, 24, 7, "vLLM (Oct 2025, V1; table), Qwen3-32B bf16, H100 × 2, TP2: +67.9 %"
    ),
    ("vllm-v1", "0.9-0.16", "amd"): Fitted(
        145192, 7, 1, "vLLM 0.11.2+rhai1 (record), Llama-3.3-70B-Instruct bf16, MI300X × 1, TP1, util 0.92: +14.5 %"
    ),
    ("vllm-v1", "0.9-0.16", "ampere-ada"): Fitted(
        81401, 3, 3, "vLLM 0.10.1.1, gpt-oss-120b mxfp4, A100 80GB × 4 (one a node), TP4, util 0.8: −8.1 %"
    ),
    ("vllm-v1", "0.9-0.16", "consumer"): Fitted(
        514010, 1, 1, "vLLM 0.13.0 (NGC 26.01), Qwen3-30B-A3B-FP8, GB10 × 1, TP1, util 0.3, fp8 KV: +51.4 %"
    ),
    ("vllm-v1", "0.9-0.16", "hopper-blackwell"): Fitted(
        678835, 13, 3, "vLLM (Oct 2025, V1; table), Qwen3-32B bf16, H100 × 2, TP2: +67.9 %"
    ),
}
# END ERRORS (generated)
"""(family, version range, GPU class) -> the term's error; '*' for any version range or GPU class."""

MIN_SOURCES = 2
"""A cell measured by fewer sources borrows from a wider one (see the module docstring)."""

VERSION_RANGES: Mapping[str, tuple[tuple[tuple[int, ...], str], ...]] = {
    "vllm-v1": (((0, 0, 0), "0.9-0.16"), ((0, 17, 0), "0.17-0.20"), ((0, 21, 0), "0.21+")),
}
"""Where the modelled term changes shape within a family (vLLM V1: kvplan.engines.vllm_profile
TRITON_TOPK_TOPP_SINCE; versions.py's 0.21 row puts the CUDA-graph estimate in the budget); '*' elsewhere."""

FAMILY_TERM = {"sglang": "pre_load_free", "vllm-v1": "non_kv_other", "vllm-v0": "non_kv_other"}
"""The one modelled term outside the pool of each engine family (the knob that carries it)."""

TERM_LABEL = {
    "pre_load_free": "pre-load free memory (catalog total − assumed CUDA context + NCCL)",
    "non_kv_other": "non-KV memory (profile-run model, fitted non-torch growth, CUDA-graph estimate)",
}
TERM_SHORT = {"pre_load_free": "pre-load free", "non_kv_other": "non-KV memory", "weights_per_gpu": "weights"}
FAMILY_LABEL = {"sglang": "SGLang", "vllm-v1": "vLLM V1", "vllm-v0": "vLLM V0"}
CLASS_LABEL = {"hopper-blackwell": "Hopper/Blackwell", "ampere-ada": "Ampere/Ada", "consumer": "RTX", "amd": "AMD"}


@record
class TermBand:
    """One term of the memory outside the pool, where its figure came from, and its relative error."""

    knob: str
    source: Source
    value: int
    ppm: int
    """The relative error the band puts on ``value`` (0 where read or taken)."""
    why: str

    @property
    def label(self) -> str:
        return TERM_SHORT.get(self.knob, self.knob)

    @property
    def percent(self) -> str:
        return f"±{self.ppm / 10_000:.1f} %"


@record
class PoolBand:
    """The pool the engine logs (``logged_tokens``) as a point and the band its estimates span."""

    point: int
    low: int
    high: int
    terms: tuple[TermBand, ...]

    @property
    def exact(self) -> bool:
        return self.low == self.point == self.high

    @property
    def estimates(self) -> tuple[TermBand, ...]:
        return tuple(t for t in self.terms if t.source == "estimate")

    def holds(self, tokens: int) -> bool:
        return self.low <= tokens <= self.high

    def phrase(self) -> str:
        """'band 975,000 – 1,031,000: weights estimated ±0.8 %, SGLang pre-load free ±2.1 %'; '' when exact."""
        if self.exact:
            return ""
        why = ", ".join(f"{t.label} estimated {t.percent}" for t in self.estimates)
        return f"band {self.low:,} – {self.high:,}: {why}"

    def data(self) -> dict[str, object]:
        """JSON: raw integers; ``basis`` names every term and where it came from."""
        return {
            "low": self.low,
            "high": self.high,
            "basis": [
                {"term": t.knob, "source": t.source, "bytes": t.value, "error_ppm": t.ppm, "why": t.why}
                for t in self.terms
            ],
        }


def family(dep: Deployment) -> str:
    if dep.engine == "sglang":
        return "sglang"
    return "vllm-v0" if vllm_rules(dep.engine_version).v0_budget else "vllm-v1"


def version_range(fam: str, version: str) -> str:
    """The family's version range that ``version`` falls in ('*' for a family with one)."""
    ranges = VERSION_RANGES.get(fam)
    if not ranges:
        return "*"
    v = parse_version(version)
    return [label for since, label in ranges if v >= since][-1]


def gpu_class(gpu: Gpu) -> str:
    """Datacenter Hopper/Blackwell, datacenter Ampere/Ada, an RTX card (GeForce or workstation), AMD."""
    if gpu.vendor == "amd":
        return "amd"
    if gpu.key.startswith("rtx") or "geforce" in gpu.name.lower() or gpu.sm in (120, 121):
        return "consumer"
    return "hopper-blackwell" if gpu.sm >= 90 else "ampere-ada"


def fitted(fam: str, rng: str, cls: str, table: Mapping[tuple[str, str, str], Fitted]) -> tuple[Fitted | None, str]:
    """The cell's error where MIN_SOURCES sources measured it, else the next wider cell's (module docstring)."""
    ladder = ((fam, rng, cls), (fam, rng, "*"), (fam, "*", "*"))
    found = [(key, table[key]) for key in dict.fromkeys(ladder) if key in table]
    if not found:
        return None, f"no {FAMILY_LABEL[fam]} case in the corpus"
    key, fit = next(((k, f) for k, f in found if f.sources >= MIN_SOURCES), found[-1])
    return fit, f"{_cell_label(key)}: {fit.cases} case(s), {fit.sources} source(s)"


def _cell_label(key: tuple[str, str, str]) -> str:
    fam, rng, cls = key
    where = "any GPU" if cls == "*" else CLASS_LABEL[cls]
    return f"{FAMILY_LABEL[fam]}{'' if rng == '*' else ' ' + rng} on {where}"


def _knob(plan: PoolPlan, name: str) -> Knob | None:
    try:
        return plan.knob(name)
    except KeyError:
        return None


def _weights_term(plan: PoolPlan) -> TermBand | None:
    k = _knob(plan, "weights_per_gpu")
    if k is None:
        return None
    wb = band_for(plan.arch, k.origin)
    if wb is None:
        source: Source = "taken" if k.origin == "set" or "measured" in k.origin else "read"
        return TermBand(k.name, source, k.as_int(), 0, k.origin)
    return TermBand(k.name, "estimate", k.as_int(), wb.ppm, f"{wb.path}; worst {wb.worst}")


def _outside_term(plan: PoolPlan, table: Mapping[tuple[str, str, str], Fitted]) -> TermBand | None:
    dep = plan.deployment
    name = FAMILY_TERM[family(dep)]
    k = _knob(plan, name)
    if k is None:
        return None
    if not k.defaulted or (name == "pre_load_free" and "runtime_overhead" in dep.explicit):
        return TermBand(name, "taken", k.as_int(), 0, "set")
    fam = family(dep)
    fit, why = fitted(fam, version_range(fam, dep.engine_version), gpu_class(dep.gpu), table)
    if fit is None:
        return TermBand(name, "estimate", k.as_int(), 0, why)
    return TermBand(name, "estimate", k.as_int(), fit.ppm, f"{TERM_LABEL[name]}; {why}; worst {fit.worst}")


RESERVE = {"sglang": ("slack (non-KV reserve)", "mem_fraction_static"), "vllm": ("requested", "gpu_memory_utilization")}
"""The chain term the engine's own memory knob sets, and the knob: read from the engine's source (SGLang's reserve
heuristic, vLLM's default utilization) or taken from the user; exact given the terms above it."""


def _reserve_term(plan: PoolPlan) -> TermBand | None:
    label, knob = RESERVE[plan.engine]
    term = next((t for t in plan.chain if t.label == label and t.bytes is not None), None)
    k = _knob(plan, knob)
    if term is None or term.bytes is None or k is None:
        return None
    return TermBand(label, "taken" if not k.defaulted else "read", term.bytes, 0, f"{knob} {k.value}: {k.origin}")


def terms_of(plan: PoolPlan, table: Mapping[tuple[str, str, str], Fitted] | None = None) -> tuple[TermBand, ...]:
    """Weights, the modelled memory outside the pool and the engine's reserve, each with its source and error."""
    found = (_weights_term(plan), _outside_term(plan, ERRORS if table is None else table), _reserve_term(plan))
    return tuple(t for t in found if t is not None)


def plan_at(arch: ModelArch, plan: PoolPlan, knob: str, value: int) -> PoolPlan:
    """The same deployment with one memory term set to ``value``: the engine's formula at that input."""
    dep = plan.deployment
    fields: dict[str, object] = {knob: max(value, 0), "explicit": dep.explicit | {knob}}
    return plan_pool(arch, replace(dep, **fields))  # type: ignore[arg-type]  # one int knob, named at run time


def pool_band(
    plan: PoolPlan, arch: ModelArch | None = None, table: Mapping[tuple[str, str, str], Fitted] | None = None
) -> PoolBand:
    """The pool at each estimate's low and high ends, the shifts added; ``low == high == point`` when nothing
    is estimated. Under pipeline parallelism without the whole model's ``arch``, the binding stage's pool is
    scaled by its KV budget (the pool is that budget over a fixed cell)."""
    terms = terms_of(plan, table)
    point = plan.logged_tokens
    down = up = 0
    for t in terms:
        if t.source != "estimate" or t.ppm == 0:
            continue
        delta = t.value * t.ppm // PPM
        low_end = max(t.value - delta, 0)  # a memory term never goes below 0 B (plan_at clips the same way)
        ends = (_pool_at(plan, arch, t.knob, low_end), _pool_at(plan, arch, t.knob, t.value + delta))
        down += point - min(point, *ends)
        up += max(point, *ends) - point
    return PoolBand(point, max(point - down, 0), point + up, terms)


def _pool_at(plan: PoolPlan, arch: ModelArch | None, knob: str, value: int) -> int:
    if arch is None and plan.arch.pp_stage is None:
        arch = plan.arch
    if arch is not None:
        return plan_at(arch, plan, knob, value).logged_tokens
    shift = _knob(plan, knob)
    old = shift.as_int() if shift is not None else value
    sign = 1 if knob == "pre_load_free" else -1  # more pre-load free memory, a larger pool; more of the rest, smaller
    budget = plan.available_bytes
    if budget <= 0:
        return 0
    scale = 1.0 if knob != "pre_load_free" else float(plan.knob("mem_fraction_static").as_float())
    moved = budget + sign * int((value - old) * scale)
    return max(plan.logged_tokens * max(moved, 0) // budget, 0)


RAISES_POOL = frozenset({"pre_load_free"})
"""Terms whose larger value gives a larger pool; more weights or more non-KV memory give a smaller one."""


def end_plans(
    plan: PoolPlan, arch: ModelArch | None = None, table: Mapping[tuple[str, str, str], Fitted] | None = None
) -> tuple[PoolPlan, PoolPlan] | None:
    """The plan with every estimate at its adverse end together, and at its favourable end: what a verdict is
    re-judged on. None where nothing is estimated, or under pp without the whole model's ``arch``."""
    arch = arch if arch is not None else (plan.arch if plan.arch.pp_stage is None else None)
    moved = [t for t in terms_of(plan, table) if t.source == "estimate" and t.ppm]
    if arch is None or not moved:
        return None
    ends = []
    for sign in (-1, 1):  # -1: the low end of the pool
        fields: dict[str, object] = {"explicit": plan.deployment.explicit | {t.knob for t in moved}}
        for t in moved:
            up = sign if t.knob in RAISES_POOL else -sign
            fields[t.knob] = max(t.value + up * (t.value * t.ppm // PPM), 0)
        ends.append(plan_pool(arch, replace(plan.deployment, **fields)))  # type: ignore[arg-type]
    return ends[0], ends[1]
