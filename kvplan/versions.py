"""Engine versions as data: one table per engine, keyed by version ranges.

Each row holds the rules that changed between versions and the release, commit or source that changed them.
``sglang_rules`` / ``vllm_rules`` take any version string (``0.5.23``, ``v0.11.0``, ``0.4.6.post1``,
``0.33.0rc1``) and return the row in force then; a version outside every modelled range is an ``InputError``
naming the ranges kvplan models (never a silent fallback). A pre-release or dev build takes the rules of its
release (``0.33.0rc1`` -> the row holding 0.33.0: it carries that release's code). A post-release sorts after its
release, as PEP 440 orders them, so a row may start at one: SGLang's version string stays at the last release
between two releases, so ``0.5.8.post1`` names the post-release and every dev image built from main until 0.5.9
(``rocm/sgl-dev:v0.5.8.post1-rocm720-mi35x-20260219`` serves GLM-5); a row boundary at ``X.postN`` says so.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from typing import Any, Literal, TypeVar

from kvplan import record
from kvplan.errors import InputError

Version = tuple[int, ...]

_VERSION = re.compile(
    r"v?(?P<release>\d{1,6}(?:\.\d{1,6}){0,3})"
    r"(?:[-_.]?(?:a|b|rc|alpha|beta|pre|preview|c)[-_.]?\d{0,6})?"
    r"(?P<postpart>[-_.]?(?:post|rev|r)[-_.]?(?P<post>\d{0,6}))?"
    r"(?:[-_.]?dev[-_.]?\d{0,6})?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?",
    re.IGNORECASE | re.ASCII,  # ASCII digits only: '٠.٥.٢٣' is not 0.5.23
)
"""PEP 440-ish: an optional ``v``, up to four release numbers, then pre / post / dev parts and a local label."""


def parse_version(text: str) -> Version:
    """The release numbers of a version string, padded to three: ``v0.11`` -> (0, 11, 0).

    >>> parse_version("0.4.6.post1"), parse_version("v0.11.0"), parse_version("0.33.0rc1")
    ((0, 4, 6), (0, 11, 0), (0, 33, 0))
    """
    m = _VERSION.fullmatch(text)  # no stripping: the loaders strip; a stray newline is not a version
    if m is None or len(text) > 64:
        shown = text if len(text) <= 64 else text[:64] + "..."
        raise InputError(f"engine_version {shown!r} is not a version (expected e.g. 0.5.23, v0.11.0, 0.4.6.post1)")
    release = tuple(int(x) for x in m.group("release").split("."))
    return release + (0,) * (3 - len(release))


def post_release(text: str) -> int:
    """The post-release number of a version string, -1 for none (PEP 440: ``.post`` alone is post 0).

    >>> post_release("0.5.8.post1"), post_release("0.5.8"), post_release("0.5.8.post2.dev1")
    (1, -1, 2)
    """
    parse_version(text)  # refuses what is not a version, with the one-line error
    m = _VERSION.fullmatch(text)
    assert m is not None
    return -1 if m.group("postpart") is None else int(m.group("post") or 0)


def _pad4(v: Version) -> Version:
    return v + (0,) * (4 - len(v))


def _show(v: Version) -> str:
    return ".".join(str(x) for x in v)


@record(kw_only=True)
class _Range:
    engine: str
    since: Version
    """First version of the range (inclusive)."""
    until: Version
    """First version past the range (exclusive)."""
    since_post: int = -1
    """The range starts at ``since``'s post-release of this number (-1: at the release itself)."""
    until_post: int = -1
    """The range ends before ``until``'s post-release of this number (-1: before the release itself)."""
    label: str
    """How the range is named in the output, e.g. '0.5.10-0.5.23'."""
    reference: str
    """The version whose source kvplan read for this row."""
    cite: str
    """The release, commit or source that set these rules."""
    modelled: bool = True
    why_not: str = ""
    """For a recognised but unmodelled range: why, said in the error."""

    @property
    def start(self) -> tuple[Version, int]:
        """The first version of the range as it sorts: (release padded to four numbers, post-release)."""
        return _pad4(self.since), self.since_post

    @property
    def end(self) -> tuple[Version, int]:
        return _pad4(self.until), self.until_post

    def holds(self, v: Version, post: int = -1) -> bool:
        """Whether release ``v`` (its post-release ``post``, -1 for none) falls in the range."""
        return self.start <= (_pad4(v), post) < self.end

    def describe(self, version: str) -> str:
        """'SGLang 0.5.7 -> rules of 0.5.6-0.5.8 (...)'."""
        name = "SGLang" if self.engine == "sglang" else "vLLM"
        return f"{name} {version} -> rules of {self.label} ({self.cite})"


SglangMemFraction = Literal["by_tp", "by_tp_0.4.6", "by_tp_0.4.7", "gpu_class", "reserve_0.5.3", "reserve_0.5.23"]
"""The mem_fraction_static heuristics SGLang has had (``SglangRules.mem_fraction``): a typo is a mypy error."""
SglangCapacity = Literal["0.4.0", "0.4.7", "0.4.8", "0.5.3", "0.5.5", "0.5.10"]
"""The chunked_prefill_size / cuda_graph_max_bs tables by GPU memory SGLang has had (``SglangRules.capacity``)."""


@record(kw_only=True)
class SglangRules(_Range):
    mem_fraction: SglangMemFraction
    """Default mem_fraction_static heuristic (gpu_mem = the smallest GPU's nvidia-smi / amd-smi total in MiB):
    'by_tp' (0.4.0-0.4.5: 0.88 / 0.87 / 0.85 / 0.81 / 0.79 by tp);
    'by_tp_0.4.6' (the tp table up to 81,920 MiB, above it (gpu_mem − 13 GiB) / gpu_mem, unrounded);
    'by_tp_0.4.7' (the table by tp × pp up to 81,920 MiB, else 0.88; over 180,000 MiB on CUDA 0.79; over 96 GiB
    min(f + 48 GiB × (1 − f) / gpu_mem, (gpu_mem − 18 GiB) / gpu_mem), 20 GiB with EAGLE; else EAGLE × 0.95);
    'gpu_class' (0.4.8-0.5.2: reserve (2.8 + tp×pp/10) GiB under 35 GiB, (9.5 + tp×pp/2) GiB under 90 GiB,
    (12 + tp×pp/2) GiB under 160 GiB, else 32 GiB; + EAGLE, + 4 GiB with dp attention; rounded to 3);
    'reserve_0.5.3' (512 + max(chunk, 2048) × 1.5 + max_bs × 2 + tp × pp / 8 × 1024 MiB, dp-attention terms,
    at least 10 GiB above 60 GiB, + EAGLE; the decode-graph term whether or not graphs are on);
    'reserve_0.5.23' (+ the prefill CUDA graph, decode graph only when on)."""
    capacity: SglangCapacity = "0.5.10"
    """Default chunked_prefill_size (and cuda_graph_max_bs) by GPU memory: '0.4.0' (2048 under 25,000 MiB, else
    8192), '0.4.7' (16384 over 180,000 MiB), '0.4.8' (2048 under 35 GiB, 8192 under 160 GiB, else 16384),
    '0.5.3' (the memory table with max_bs 16 / 80 under 35 GiB), '0.5.5' (24 / 80 there), '0.5.10' (4096 and
    48 / 160 there)."""
    cell_raw_mla_row: bool = False
    """The budget charges (kv_lora_rank + rope) × kv_size per layer whatever row the pool allocates (0.5.3-0.5.9)."""
    indexer_all_layers: bool = False
    """The DSA indexer is allocated (and, with ``dsa_indexer_in_budget``, budgeted) on every layer (0.5.3-0.5.9),
    not on the full layers only."""
    dsa: bool = True
    """The version serves DSA (NSA) models at all."""
    dsa_archs: tuple[str, ...] = ()
    """The architectures ``is_deepseek_nsa`` accepts; empty: any DSA model kvplan knows."""
    dsa_indexer_in_budget: bool = True
    """The indexer K rows are in get_cell_size_per_token (from 0.5.4, sgl-project/sglang#11309); 0.5.3 allocated
    them outside the budget."""
    dsa_mem_fraction: float | None = None
    """0.5.3 set mem_fraction_static to this for any DeepSeek NSA model, over the user's value."""
    dsa_forces_dp_attention: bool = False
    """0.5.3-0.5.5 turned on DP attention with dp = tp for any NSA model on GPUs."""
    dsa_fp8_row_any_backend: bool = False
    """An fp8 NSA cache is the 656-B fp8_ds_mla row whatever the backend (0.5.3-0.5.8; 0.5.9 made trtllm raw)."""
    dcp: bool = True
    """Decode context parallel exists."""
    mtp_reserve_mib: int = 0
    """MiB the mem-fraction heuristic adds for EAGLE / MTP."""
    prefill_graph: bool = True
    """The heuristic reserves a prefill CUDA graph."""
    mha_trtllm_sm100: bool = True
    """A full-attention model's default backend on SM100 / SM103 is trtllm_mha (sgl-project/sglang#14291, merged
    2025-12-02, first in 0.5.6.post1); before, flashinfer, as on every CUDA GPU but Hopper (sglang_defaults.py)."""
    mha_sm12x_picks_trtllm: bool = False
    """#14291's Blackwell branch took SM12x in too: SGLang picked trtllm_mha there and refused it (sgl-project/sglang
    #14814; "fix: trtllm mha attention auto-selection on sm120", #14842, merged 2025-12-10, in 0.5.7). kvplan plans
    flashinfer there and says so (gpustack/gpustack#3839: 0.5.6.post1 fails on an RTX 5090)."""
    moe_quant_precheck: bool = False
    """``ModelRunner.check_quantized_moe_compatibility`` runs before the model is built (0.5.4-0.5.5: added by
    sgl-project/sglang#11442, fixed by #11702; #13876 moved it after ``initialize()``, where the layers' own
    checks refuse first): a MoE checkpoint with ``weight_block_size`` is refused with its message
    (kvplan.engines.load_checks)."""


V0Budget = Literal["", "init_free", "torch_peak", "profiling"]
V0Mla = Literal["", "aligned", "latent"]


@record(kw_only=True)
class VllmRules(_Range):
    cudagraph_in_budget: bool
    """The profiled CUDA-graph estimate is subtracted from the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
    default on); before, graphs were captured after the pool, in the (1 − utilization) headroom."""
    default_utilization: float
    utilization_cite: str
    v0_budget: V0Budget = ""
    """V0 rows (kvplan/engines/vllm_v0.py): how worker.py determine_num_available_blocks takes the non-KV memory
    from total × gpu_memory_utilization: 'init_free' (0.6.0-0.6.3: free memory at init_device − free memory after
    the profile run, the allocator's cache of the run included), 'torch_peak' (0.6.4: torch allocated peak, weights
    included, + every non-torch byte on the GPU, the CUDA context included), 'profiling' (0.6.5-0.8.x:
    memory_profiling's weights + torch peak increase + non-torch increase since init_device). Empty: a V1 row."""
    v0_chunked_tokens: int = 0
    """V0 SchedulerConfig: max_num_batched_tokens when chunked prefill is on and not set (512 to 0.6.4, 2048 from
    0.6.5); without chunked prefill max(max_model_len, 2048)."""
    v0_mla: V0Mla = ""
    """V0 MLA cache rows: '' (kvplan has not read MLA in this range: refused), 'aligned' (0.7.3: kv_lora_rank + rope
    rounded up to 256 B, VLLM_CUDA_MEM_ALIGN_KV_CACHE default 1), 'latent' (0.8.x: kv_lora_rank + rope)."""
    v1_by_default: bool = False
    """vLLM starts the V1 engine by default (VLLM_USE_V1 defaults to 1 from 0.8.0); V0 only on fallback or with
    VLLM_USE_V1=0."""
    v0_flashmla_block64: bool = False
    """V0 MLA on Hopper (SM 9.x) with the default or FLASHMLA backend forces block_size 64 (platforms/cuda.py
    check_and_update_config, 0.8.0 on: 'Forcing kv cache block size to 64 for FlashMLA backend.')."""
    v0_moe_cache13: bool = False
    """V0 fused_moe shares one buffer for intermediate_cache1 and 3 (M × top_k × max(2·I, hidden), 0.8.0 on);
    before, three buffers: M × top_k × (2·I + I + hidden)."""


_DEEPSEEK_NSA = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN")
"""``configs/model_config.is_deepseek_nsa`` of 0.5.3-0.5.8 (with ``index_topk`` set); GlmMoeDsa came in 0.5.9."""

_NSA_0_5_3 = (
    "NSA (DeepSeek-V3.2-Exp) from sgl-project/sglang#11061 (v0.5.3): NSATokenToKVPool with the index K on every "
    "layer, fp8 rows of a hard-coded 656 B on any backend, page 64, dp attention = tp"
)

_R = TypeVar("_R", SglangRules, VllmRules)


def _after(previous: _R, *, since: Version, until: Version, label: str, reference: str, cite: str, **diff: Any) -> _R:
    """The next version's row: ``previous`` with its range and what changed (post-releases reset to -1 unless
    given), so each row reads as its diff from the one before, as the engine's releases did."""
    return replace(
        previous,
        since=since,
        until=until,
        label=label,
        reference=reference,
        cite=cite,
        since_post=diff.pop("since_post", -1),
        until_post=diff.pop("until_post", -1),
        **diff,
    )


_S040 = SglangRules(
    engine="sglang",
    since=(0, 4, 0),
    until=(0, 4, 6),
    label="0.4.0-0.4.5",
    reference="0.4.5",
    cite="ServerArgs.__post_init__ in the sglang 0.4.0, 0.4.1, 0.4.3.post4, 0.4.4 and 0.4.5 wheels: "
    "mem_fraction_static by tp_size (0.88 / 0.87 / 0.85 / 0.81 / 0.79), whatever the GPU; chunked_prefill_size "
    "2048 under 25,000 MiB, else 8192 (sgl-project/sglang#2268)",
    mem_fraction="by_tp",
    capacity="0.4.0",
    dsa=False,
    dcp=False,
    prefill_graph=False,
    mha_trtllm_sm100=False,
)
_S046 = _after(
    _S040,
    since=(0, 4, 6),
    until=(0, 4, 7),
    label="0.4.6",
    reference="0.4.6",
    cite="sglang 0.4.6 wheel, ServerArgs.__post_init__: the tp table only up to 81,920 MiB; above it "
    "(gpu_mem − 1024 × 13) / gpu_mem (replaced by sgl-project/sglang#5893, 'reserve at least 18GB for H200')",
    mem_fraction="by_tp_0.4.6",
)
_S047 = _after(
    _S046,
    since=(0, 4, 7),
    until=(0, 4, 8),
    label="0.4.7",
    reference="0.4.7",
    cite="sglang 0.4.7 wheel, ServerArgs.__post_init__: sgl-project/sglang#5893 (over 96 GiB: min(f + 48 GiB × "
    "(1 − f) / gpu_mem, (gpu_mem − 18 GiB) / gpu_mem)) and #6718 (over 180,000 MiB on CUDA: 0.79, chunk 16384)",
    mem_fraction="by_tp_0.4.7",
    capacity="0.4.7",
)
_S048 = _after(
    _S047,
    since=(0, 4, 8),
    until=(0, 5, 3),
    label="0.4.8-0.5.2",
    reference="0.4.8",
    cite="sgl-project/sglang#7054 'Simplify the heuristics for setting --mem-fraction-static' (v0.4.8): "
    "reserved memory by GPU class, read in the 0.4.8, 0.4.9, 0.4.10, 0.5.1 and 0.5.2 wheels; 0.4.9 on scales "
    "multimodal models down (#6881; not modelled: kvplan plans text models)",
    mem_fraction="gpu_class",
    capacity="0.4.8",
    mtp_reserve_mib=2048,
)
_S053 = _after(
    _S048,
    since=(0, 5, 3),
    until=(0, 5, 4),
    label="0.5.3",
    reference="0.5.3",
    cite="sgl-project/sglang#10975 (v0.5.3): reserved = 512 + chunk × 1.5 + max_bs × 2 + tp × pp / 8 GiB; "
    + _NSA_0_5_3
    + "; the budget leaves the index K out and mem_fraction_static is forced to 0.8 for NSA",
    mem_fraction="reserve_0.5.3",
    capacity="0.5.3",
    cell_raw_mla_row=True,
    indexer_all_layers=True,
    dsa=True,
    dsa_archs=_DEEPSEEK_NSA,
    dsa_indexer_in_budget=False,
    dsa_mem_fraction=0.8,
    dsa_forces_dp_attention=True,
    dsa_fp8_row_any_backend=True,
)
_S054 = _after(
    _S053,
    since=(0, 5, 4),
    until=(0, 5, 5),
    label="0.5.4",
    reference="0.5.4",
    cite="sgl-project/sglang#11309 (v0.5.4): the index K on every layer is in profile_max_num_token's cell and "
    "the forced 0.8 is gone; NSA still forces dp attention = tp (0.5.4 wheel); sgl-project/sglang#11442 and "
    "#11702: ModelRunner.check_quantized_moe_compatibility before the model is built",
    moe_quant_precheck=True,
    dsa_indexer_in_budget=True,
    dsa_mem_fraction=None,
)
_S055 = _after(
    _S054,
    since=(0, 5, 5),
    until=(0, 5, 6),
    label="0.5.5",
    reference="0.5.5",
    cite="sglang 0.5.5 wheel: cuda_graph_max_bs 24 (was 16) at tp < 4 under 35 GiB; NSA fp8 rows through "
    "override_kv_cache_dim (still 656 B on every backend); dp attention still forced for NSA",
    capacity="0.5.5",
)
_S056 = _after(
    _S055,
    since=(0, 5, 6),
    until=(0, 5, 6),
    until_post=1,
    label="0.5.6",
    reference="0.5.6",
    cite="sglang 0.5.6 wheel: NSA in TP mode allowed (dp attention no longer forced); the reserve heuristic and "
    "cell of 0.5.4 (piecewise CUDA-graph terms only with enable_piecewise_cuda_graph, off by default); "
    "sgl-project/sglang#13876 (after 2025-11-25) runs the MoE pre-check after initialize()",
    moe_quant_precheck=False,
    dsa_forces_dp_attention=False,
)
_S056P1 = _after(
    _S056,
    since=(0, 5, 6),
    since_post=1,
    until=(0, 5, 7),
    label="0.5.6.post1-0.5.6.post2",
    reference="",  # the 0.5.6 rules with sgl-project/sglang#14291; the post-release wheels not read
    cite="the rules of 0.5.6; sgl-project/sglang#14291 (merged 2025-12-02; in the 0.5.6.post1 that "
    "gpustack/gpustack#3839 saw fail on an RTX 5090) makes trtllm_mha the full-attention default on Blackwell, "
    "SM12x included until #14842",
    mha_trtllm_sm100=True,
    mha_sm12x_picks_trtllm=True,
)
_S057 = _after(
    _S056P1,
    since=(0, 5, 7),
    until=(0, 5, 8),
    until_post=1,
    label="0.5.7-0.5.8",
    reference="0.5.8",
    cite="sglang 0.5.7, 0.5.8 wheels: the rules of 0.5.6; trtllm_mha the full-attention default on SM100 only "
    "(sgl-project/sglang#14291, #14842); sgl-project/sglang#13876 (after 2025-11-25) runs the MoE pre-check "
    "after initialize()",
    mha_sm12x_picks_trtllm=False,
)
_S058P1 = _after(
    _S057,
    since=(0, 5, 8),
    since_post=1,
    until=(0, 5, 10),
    label="0.5.8.post1-0.5.9",
    reference="0.5.9",
    cite="sglang==0.5.9 wheel, shared/reference/sglang-0.5.23.md §10: get_cell_size_per_token charges "
    "(kv_lora_rank + rope) × kv_size and the indexer on every layer; no dcp; +2 GiB EAGLE reserve; GLM DSA "
    "(GlmMoeDsa) and raw fp8 rows under trtllm arrive. From 0.5.8.post1: the dated images built from main "
    "after it carry that version string and this code (rocm/sgl-dev:v0.5.8.post1-rocm720-mi35x-20260219 serves "
    "GLM-5 FP8 on MI355X, SemiAnalysisAI/InferenceX#1015; GLM-5 CI on MI300X/MI325X/MI35x, "
    "sgl-project/sglang#18911)",
    dsa_archs=(),
    dsa_fp8_row_any_backend=False,
)
_S0510 = _after(
    _S058P1,
    since=(0, 5, 10),
    until=(0, 5, 24),
    label="0.5.10-0.5.23",
    reference="0.5.23",
    cite="sglang==0.5.23 wheel, shared/reference/sglang-0.5.23.md §2: indexer on full layers only, cell "
    "from the allocated row, dcp, memory_hook.reserve_for_graph_mb",
    mem_fraction="reserve_0.5.23",
    capacity="0.5.10",
    cell_raw_mla_row=False,
    indexer_all_layers=False,
    dcp=True,
    mtp_reserve_mib=0,
    prefill_graph=True,
)

SGLANG: tuple[SglangRules, ...] = (
    _S040,
    _S046,
    _S047,
    _S048,
    _S053,
    _S054,
    _S055,
    _S056,
    _S056P1,
    _S057,
    _S058P1,
    _S0510,
)
"""SGLang rows in version order."""

_V060 = VllmRules(
    engine="vllm",
    since=(0, 6, 0),
    until=(0, 6, 4),
    label="0.6.0-0.6.3 (V0)",
    reference="0.6.3",
    cite="vllm 0.6.0, 0.6.2, 0.6.3 wheels, worker/worker.py determine_num_available_blocks: peak = init free − "
    "free after profile_run (no empty_cache in between); num_gpu_blocks = (total × util − peak) // block",
    cudagraph_in_budget=False,
    default_utilization=0.9,
    utilization_cite="EngineArgs default 0.9 (vllm 0.6.x wheels)",
    v0_budget="init_free",
    v0_chunked_tokens=512,
)
_V064 = _after(
    _V060,
    since=(0, 6, 4),
    until=(0, 6, 5),
    label="0.6.4 (V0)",
    reference="0.6.4",
    cite="vllm 0.6.4 wheel (vllm-project/vllm#9352): peak = torch allocated_bytes.all.peak + non-torch "
    "(total − free − torch allocated, after empty_cache); the 'Memory profiling results' line",
    utilization_cite="EngineArgs default 0.9 (vllm 0.6.4 wheel)",
    v0_budget="torch_peak",
)
_V065 = _after(
    _V064,
    since=(0, 6, 5),
    until=(0, 7, 3),
    label="0.6.5-0.7.2 (V0)",
    reference="0.7.0",
    cite="vllm 0.6.5, 0.6.6, 0.7.0 wheels (vllm-project/vllm#10511): utils.memory_profiling, non-KV = weights + "
    "torch peak increase + non-torch increase since init_device; chunked-prefill default 2048 tokens",
    utilization_cite="EngineArgs default 0.9 (vllm 0.6.5-0.7.0 wheels)",
    v0_budget="profiling",
    v0_chunked_tokens=2048,
)
_V073 = _after(
    _V065,
    since=(0, 7, 3),
    until=(0, 8, 0),
    label="0.7.3 (V0)",
    reference="0.7.3",
    cite="vllm 0.7.3 wheel: memory_profiling as 0.7.0; MLA (DeepSeek) caches one kv_lora_rank + rope latent "
    "per layer, aligned to 256 B (worker/cache_engine.py _align_cache, VLLM_CUDA_MEM_ALIGN_KV_CACHE=1)",
    utilization_cite="EngineArgs default 0.9 (vllm 0.7.3 wheel)",
    v0_mla="aligned",
)
_V080 = _after(
    _V073,
    since=(0, 8, 0),
    until=(0, 9, 0),
    label="0.8.x (V0 arithmetic; V1 is vLLM's default here)",
    reference="0.8.5",
    cite="vllm 0.8.0 and 0.8.5 wheels: V0 worker.py as 0.7.x, MLA latent unaligned; envs.VLLM_USE_V1 defaults to "
    "1 from 0.8.0 (V0 only on fallback, e.g. LoRA before 0.8.3, or VLLM_USE_V1=0): kvplan plans 0.8.x with "
    "V0's arithmetic ('# cuda blocks' logs); a V1 start of 0.8.x is planned with engine_version 0.9.0",
    utilization_cite="EngineArgs default 0.9 (vllm 0.8.x wheels)",
    v0_mla="latent",
    v1_by_default=True,
    v0_flashmla_block64=True,
    v0_moe_cache13=True,
)
_V090 = _after(
    _V080,
    since=(0, 9, 0),
    until=(0, 21, 0),
    label="0.9-0.20 (V1, CUDA graphs outside the budget)",
    reference="",  # the 0.33.0 rules less the CUDA-graph estimate; the profile run read in 0.16.0 and 0.19.0
    cite="the 0.21.0 log line 'CUDA graph memory profiling is enabled (default since v0.21.0)' "
    "(v1/worker/gpu_worker.py, shared/reference/vllm-0.33.0.md §4); vLLM 0.19.0 logs: 'Total non KV cache "
    "memory' = weights + torch peak + non-torch, no graph term (tests/data/logs/field); the torch peak and "
    "non-torch growth from the profile run of the 0.16.0 / 0.19.0 wheels (kvplan/engines/vllm_profile.py: the "
    "sampler sorts the logits before 0.17, Triton top-k/top-p from 0.17)",
    utilization_cite="EngineArgs default 0.9 (docs.vllm.ai v0.6.4 engine args, vllm-project/vllm#2162); 0.92 "
    "by 0.33.0, the release that changed it not pinned: set gpu_memory_utilization from the log's args",
    # the V1 engine: none of the V0 worker's fields apply
    v0_budget="",
    v0_chunked_tokens=0,
    v0_mla="",
    v1_by_default=False,
    v0_flashmla_block64=False,
    v0_moe_cache13=False,
)
_V021 = _after(
    _V090,
    since=(0, 21, 0),
    until=(0, 34, 0),
    label="0.21-0.33 (V1, CUDA-graph estimate in the budget)",
    reference="0.33.0",
    cite="vllm 0.33.0 wheel, shared/reference/vllm-0.33.0.md §4: available = ceil(total × util) − non_kv − "
    "cudagraph_estimate (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default on since v0.21.0); the profile "
    "run's torch peak ASSUMED as 0.19.0's (kvplan/engines/vllm_profile.py)",
    cudagraph_in_budget=True,
    default_utilization=0.92,
    utilization_cite="vLLM 0.33.0 default",  # config/cache.py:215
)

VLLM: tuple[VllmRules, ...] = (_V060, _V064, _V065, _V073, _V080, _V090, _V021)
"""vLLM rows in version order."""


def _lookup(rows: tuple[SglangRules, ...] | tuple[VllmRules, ...], engine: str, version: str) -> _Range:
    v, post = parse_version(version), post_release(version)
    for row in rows:
        if row.holds(v, post):
            if not row.modelled:
                raise InputError(
                    f"engine_version {version}: {engine} {version} is not modelled: {_name(engine)} {row.label} "
                    f"is recognised, but {row.why_not} (kvplan models {modelled_ranges(engine)})"
                )
            return row
    raise InputError(
        f"engine_version {version}: {engine} {version} is not modelled: {_show(v)} is outside every range "
        f"kvplan models ({modelled_ranges(engine)})"
    )


def _name(engine: str) -> str:
    return "SGLang" if engine == "sglang" else "vLLM"


def modelled_ranges(engine: str) -> str:
    """'SGLang 0.4.0-0.4.5, 0.4.6, ..., 0.5.10-0.5.23; source read: 0.4.5, ..., 0.5.23' for the error messages."""
    rows = SGLANG if engine == "sglang" else VLLM
    read = ", ".join(r.reference for r in rows if r.modelled and r.reference[:1].isdigit())
    return f"{_name(engine)} " + ", ".join(r.label for r in rows if r.modelled) + f"; source read: {read}"


@cache  # a plan asks about 100 times (every stage of both engines' chains): a version string is parsed once
def sglang_rules(version: str) -> SglangRules:
    row = _lookup(SGLANG, "sglang", version)
    assert isinstance(row, SglangRules)
    return row


@cache
def vllm_rules(version: str) -> VllmRules:
    row = _lookup(VLLM, "vllm", version)
    assert isinstance(row, VllmRules)
    return row


def rules_for(engine: str, version: str) -> SglangRules | VllmRules:
    """The row in force for ``version`` of ``engine`` (an InputError outside the modelled ranges)."""
    return sglang_rules(version) if engine == "sglang" else vllm_rules(version)


def rules_note(engine: str, version: str) -> str | None:
    """What the output says when ``version`` is not the row's own reference version; None when it is."""
    row = rules_for(engine, version)
    return None if version == row.reference else row.describe(version)


BLOCK_SIZE_CHECKED_SINCE = (0, 18, 0)
"""vLLM 0.18.0 checks a given --block-size against the attention backend: ``get_attn_backend`` passes it when
``cache_config.user_specified_block_size`` (``v1/attention/selector.py``), ``validate_configuration`` adds 'block_size
not supported' unless it is a multiple of one of ``get_supported_kernel_block_sizes`` (``AttentionBackend.
supports_block_size``), and ``CudaPlatform.get_attn_backend_cls`` raises for a selected backend or passes over the
default for a lower-priority one ("--block-size %d precluded higher-priority backend(s)"). Wheels 0.16.0, 0.17.0 and
0.17.1 read: the selector drops the block size (``attn_selector_config._replace(block_size=None)``) and
``check_and_update_config`` forces the MLA backends' own ("Forcing kv cache block size to 64 for FlashMLA
backend."); 0.18.0, 0.21.0 and 0.33.0: the check above, ``Platform.update_block_size_for_backend``."""

TOKENS_FROM_CONCURRENCY_SINCE = (0, 20, 1)
"""vLLM 0.20.1 logs 'GPU KV cache size' = int(max_concurrency × max_model_len); 0.20.0 and before
``_report_kv_cache_config`` logged num_blocks // len(groups) × min(block sizes) (wheels 0.19.0, 0.20.0 read)."""
