"""One forward step's FLOPs and bytes per part on one GPU, and its time under the GPU's peaks and the coefficients.

A part's time is max(FLOPs / (peak × compute efficiency), bytes / (HBM × memory efficiency)): a roofline per part
(GEMMs by their quant mode's peak, attention at bf16), plus the tp all-reduce over the link and a fixed latency a
layer (its small kernels: ``Part`` "layers"). What each kind reads and multiplies, per layer and per (query, key) pair:
- GQA / sliding window: QK and PV, 2 × 2 × q_heads × head_dim FLOPs a pair; K and V of each cached token read;
  a window caps the keys at ``window`` (SGLang / vLLM sliding-window kernels skip the rest);
- MLA: decode absorbed (FlashMLA / SGLang ``forward_absorb``): 2 × q_heads × (2·kv_lora + rope) FLOPs a pair over
  the latent; prefill unabsorbed (``forward_normal``): 2 × q_heads × (qk_dim + v_dim) a pair; latent read once;
- DSA: the indexer scores every key on its layers (2 × index_heads × index_dim a pair, fp8 K + scale read:
  index_dim + 4 bytes a token), MLA then attends over min(ctx, index_topk) keys (SGLang ``nsa_backend``), and
  each indexer layer's small kernels cost a fixed ``indexer_us`` a step (``Part`` "indexer");
- linear state: its recurrent + conv state read and written once a request a step, a few FLOPs an element.
A tp group wider than a node all-reduces over each GPU's NIC at NCCL's latency (``nccl_allreduce_us``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import NamedTuple

from kvplan.models.arch import Split
from kvplan.perf.coeffs import Coefficients
from kvplan.perf.peaks import Peaks
from kvplan.perf.shape import (
    AttentionGroup,
    StepShape,
    attention_apart,
    attention_weight_bytes,
    weight_bytes_per_gpu,
)

KV_BYTES = 2
"""bf16 KV cache; an fp8 cache halves the reads (``kv_bytes``)."""


@dataclass(frozen=True, kw_only=True)
class Batch:
    """What one step runs (whole batch across the deployment): new prefill tokens and their (query, key) pairs,
    decode requests with the sum of their context lengths, and the tokens sampled (one per decode request and per
    finished prefill)."""

    prefill_tokens: int = 0
    prefill_pairs: int = 0
    decode_requests: int = 0
    decode_context: int = 0
    sampled: int = 0
    verify_tokens: int = 1
    """Tokens each decode request runs through the target model (speculative decoding: the verify width D)."""
    draft_tokens: int = 0
    """Tokens each decode request runs through the draft module (MTP / EAGLE: D), one layer and the LM head each."""
    repeat: int = 1
    """A run of this many decode steps of the same requests (kvplan.perf.engine), the j-th over decode_context +
    j × decode_requests: each request a token longer each step (no speculative decoding)."""

    def each(self) -> Iterator[Batch]:
        """The steps of a run one by one."""
        if self.repeat == 1:
            yield self
            return
        for j in range(self.repeat):
            yield replace(self, decode_context=self.decode_context + j * self.decode_requests, repeat=1)

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_requests * self.verify_tokens


def chunk_pairs(new_tokens: int, prefix_tokens: int) -> int:
    """Causal (query, key) pairs of a chunk of ``new_tokens`` after ``prefix_tokens`` cached: n·p + n(n+1)/2."""
    return new_tokens * prefix_tokens + new_tokens * (new_tokens + 1) // 2


@dataclass(frozen=True, kw_only=True)
class Part:
    name: str
    flops: int
    bytes: int
    dtype: str = "bf16"
    calls: int = 0
    """Collective calls (all-reduce): each pays the coefficients' latency."""
    prefill_ppm: int = 0
    """Share of the GEMM FLOPs that prefill tokens bring (ppm): priced at the prefill efficiency (large M)."""
    latency_ns: int = 0
    """A fixed latency the part pays whatever its size (NCCL's latency of its calls across nodes)."""


class _Terms(NamedTuple):
    """One group's attention over a batch (every GPU together) as a function of the decode requests' mean context
    m: FLOPs per key attended (min(m, ``cap``); ``cap`` 0: every key) and per key scored (m), bytes likewise, and
    what does not depend on m. A run of decode steps (``Batch.repeat``) is priced at each m from one of these."""

    flops_key: int
    flops_ctx: int
    flops_fixed: int
    read_key: int
    read_ctx: int
    read_fixed: int
    cap: int

    def at(self, m: int) -> tuple[int, int]:
        """(FLOPs, bytes) at mean context ``m``."""
        fk, fc, ff, rk, rc, rf, cap = self
        k = min(m, cap) if cap else m
        return fk * k + fc * m + ff, rk * k + rc * m + rf


def _attention(g: AttentionGroup, b: Batch, kv_bytes: int) -> _Terms:
    """The terms of one group's layers over the whole batch (every GPU together)."""
    n, queries = b.decode_requests, b.decode_requests * b.verify_tokens  # each verified token attends; KV read once
    if g.kind == "linear":
        return _Terms(0, 0, 4 * g.state_bytes * b.tokens * g.layers // 2, 0, 0, 2 * g.state_bytes * (n + 1) * g.layers,
                      0)  # fmt: skip
    if g.kind in ("gqa", "swa"):
        pairs = min(b.prefill_pairs, b.prefill_tokens * g.window) if g.window else b.prefill_pairs
        per_pair = 2 * g.q_heads * (g.qk_dim + g.v_dim) * g.layers
        return _Terms(per_pair * queries, 0, per_pair * pairs, n * g.kv_heads * (g.qk_dim + g.v_dim) * kv_bytes
                      * g.layers, 0, 0, g.window)  # fmt: skip
    latent = g.kv_lora_rank + g.rope_dim
    pre_pairs = min(b.prefill_pairs, b.prefill_tokens * g.index_topk) if g.index_topk else b.prefill_pairs
    flops_key = 2 * g.q_heads * (2 * g.kv_lora_rank + g.rope_dim) * queries * g.layers
    fixed = 2 * g.q_heads * (g.qk_dim + g.v_dim) * pre_pairs * g.layers
    read_key = n * latent * kv_bytes * g.layers
    if not g.index_topk:
        return _Terms(flops_key, 0, fixed, read_key, 0, 0, 0)
    # the indexer scores all keys on its layers: the prefill's pairs and each decode query's context
    per_score = 2 * g.index_heads * g.index_dim * g.indexer_layers
    return _Terms(flops_key, per_score * queries, fixed + per_score * b.prefill_pairs, read_key,
                  n * (g.index_dim + 4) * g.indexer_layers, 0, g.index_topk)  # fmt: skip


def parts(
    shape: StepShape,
    b: Batch,
    split: Split,
    quant: str,
    moe_quant: str,
    *,
    kv_bytes: int = KV_BYTES,
    nodes: int = 1,
    attention_quant: str = "",
) -> tuple[Part, ...]:
    """FLOPs and bytes of each part on one GPU (tp GPUs share the work; DP attention splits the batch instead of the
    heads, the same share a GPU; latent MLA KV is read whole by each attention-tp rank). ``nodes``: the nodes the tp
    group spans (more than one: its all-reduce crosses the network). ``attention_quant``: the attention projections'
    format where the checkpoint keeps them at another than the other dense GEMMs' (``quant``): then they are a part
    of their own, "attention GEMMs", each part a roofline at its own format's peak."""
    tp = split.tp
    dense_w, routed_w = weight_bytes_per_gpu(shape, split, quant, moe_quant, attention_quant)
    apart, apart_w = (
        attention_apart(shape, quant, attention_quant),
        attention_weight_bytes(shape, split, quant, attention_quant),
    )
    share = b.prefill_tokens * 10**6 // b.tokens if b.tokens else 0
    flops = 2 * (b.tokens * (shape.dense_params - apart) + b.sampled * shape.lm_head_params) // tp
    out = [Part(name="dense GEMMs", flops=flops, bytes=dense_w - apart_w, dtype=quant, prefill_ppm=share)]
    if apart:
        out.append(Part(name="attention GEMMs", flops=2 * b.tokens * apart // tp, bytes=apart_w, dtype=attention_quant,
                        prefill_ppm=share))  # fmt: skip
    if shape.num_experts:
        k, e = shape.experts_per_token, shape.num_experts
        touched_ppm = 10**6 - int(10**6 * (1 - k / e) ** b.tokens)  # expected share of experts any token routes to
        flops = 2 * b.tokens * shape.routed_params * k // e // split.experts
        out.append(Part(name="expert GEMMs", flops=flops, bytes=routed_w * touched_ppm // 10**6, dtype=moe_quant,
                        prefill_ppm=share))  # fmt: skip
    out.append(attention_part(shape, b, split, kv_bytes))
    # every layer (and the draft module's one a pass) runs its chain of small kernels whatever the batch
    drafts = b.draft_tokens if b.decode_requests else 0
    out.append(Part(name="layers", flops=0, bytes=0, calls=shape.layers + drafts))
    # each DSA indexer layer runs its own chain of small kernels every step (SGLang nsa/nsa_indexer.py Indexer: q / k
    # projections and rotary, fp8 quantization, paged MQA logits, top-k): a fixed latency a layer at decode sizes
    indexers = sum(g.indexer_layers for g in shape.attention if g.index_topk)
    if indexers and b.tokens:
        out.append(Part(name="indexer", flops=0, bytes=0, calls=indexers))
    if b.draft_tokens and b.decode_requests:
        out.append(_draft(shape, b, split, dense_w, routed_w, quant))
    if tp > 1:  # two all-reduces a layer of tokens × hidden bf16, ring: 2(tp-1)/tp of it crosses each link
        size = 2 * shape.layers * b.tokens * shape.hidden * 2
        # across nodes the engines' intra-node custom all-reduce (SGLang custom_all_reduce, vLLM CustomAllreduce) is
        # off: NCCL runs it, one ring a NIC, at the nodes' NIC bandwidth (peaks.NET_BYTES_PER_S) and its own latency
        if nodes > 1 and split.attention == tp:  # DP attention: its all-reduce stays in the attention-tp group
            lat = 2 * shape.layers * round(nccl_allreduce_us(tp, nodes) * 1000)
            out.append(Part(name="all-reduce net", flops=0, bytes=size * 2 * (tp - 1) // tp, latency_ns=lat))
        else:
            out.append(Part(name="all-reduce", flops=0, bytes=size * 2 * (tp - 1) // tp, calls=2 * shape.layers))
    return tuple(out)


def attention_part(shape: StepShape, b: Batch, split: Split, kv_bytes: int = KV_BYTES) -> Part:
    """The attention of every layer on one GPU: the only part a step's context lengths and prefill pairs reach (the
    rest depends on its token counts alone, so a schedule's steps share it: ``rest_of``)."""
    m = b.decode_context // b.decode_requests if b.decode_requests else 0
    flops = read = 0
    for t, whole in _groups(shape, b, split, kv_bytes):
        f, r = t.at(m)
        flops += f // split.tp
        read += r * whole // split.tp
    return Part(name="attention", flops=flops, bytes=read)


def attention_each(
    shape: StepShape, b: Batch, split: Split, kv_bytes: int, means: range, rates: tuple[float, float], plus: float
) -> list[float]:
    """``plus`` + attention's roofline seconds (``attention_rates``) at each of ``b``'s decode requests' mean contexts
    ``means``: the steps of a run (``Batch.repeat``) differ in that alone. The same integers and the same float
    operations as ``attention_part`` and the roofline take for each step alone, in one pass (a heavy closed loop
    prices some 140,000 steps)."""
    compute, memory = rates
    tp = split.tp
    groups = _groups(shape, b, split, kv_bytes)
    if len(groups) == 1:
        (fk, fc, ff, rk, rc, rf, cap), w = groups[0]
        cap = cap or means.stop  # no cap: min(m, cap) is m all the run
        return [plus + max((fk * min(m, cap) + fc * m + ff) // tp / compute,
                           (rk * min(m, cap) + rc * m + rf) * w // tp / memory) for m in means]  # fmt: skip
    flops, read = [0] * len(means), [0] * len(means)
    for t, whole in groups:
        for i, m in enumerate(means):
            f, r = t.at(m)
            flops[i] += f // tp
            read[i] += r * whole // tp
    return [plus + max(f / compute, r / memory) for f, r in zip(flops, read, strict=True)]


def _groups(shape: StepShape, b: Batch, split: Split, kv_bytes: int) -> list[tuple[_Terms, int]]:
    """Each attention group's terms over ``b``, and how many GPUs' shares of its reads one GPU makes: the batch splits
    over tp / attention DP ranks, and a latent (MLA) is read whole by each attention-tp rank."""
    return [(_attention(g, b, kv_bytes), split.attention if g.kind in ("mla", "dsa") else 1) for g in shape.attention]


def rest_key(b: Batch) -> tuple[int, int, int, int, int]:
    """What the parts other than attention read of ``b``: its token counts (not prefill pairs or decode context)."""
    return b.prefill_tokens, b.decode_requests, b.sampled, b.verify_tokens, b.draft_tokens


def rest_of(b: Batch) -> Batch:
    """``b`` without what only its attention reads (``rest_key``)."""
    prefill, decode, sampled, verify, draft = rest_key(b)
    return Batch(prefill_tokens=prefill, decode_requests=decode, sampled=sampled, verify_tokens=verify,
                 draft_tokens=draft)  # fmt: skip


_NCCL_LL = {"base": {"tree": 6.8, "ring": 6.6}, "nvlink": {"tree": 0.6, "ring": 0.6}, "net": {"tree": 5.0, "ring": 2.7}}
"""NCCL's latency table (µs) for its LL protocol, the one it picks for the small messages of a decode step
(src/graph/tuning.cc: ``baseLat``, ``hwLat[NVLINK]``, ``hwLat[NET]``, Tree / Ring columns, LL row)."""


def nccl_allreduce_us(ranks: int, nodes: int) -> float:
    """NCCL's modelled latency of one all-reduce over ``ranks`` GPUs on ``nodes`` nodes, the smaller of its ring and
    tree (src/graph/tuning.cc ``ncclTopoTuneModel``): ring base + (2(n−1) − 2(nodes−1)) × intra + 2(nodes−1) ×
    inter; tree base + 2((n/nodes − 1) × intra + log2(nodes) × inter); the intra-node LL latency × 1.8 when it
    spans nodes."""
    t = _NCCL_LL
    intra = (t["nvlink"]["ring"] * 1.8) if nodes > 1 else t["nvlink"]["ring"]
    steps, inter = 2 * (ranks - 1), 2 * (nodes - 1)
    ring = t["base"]["ring"] + (steps - inter) * intra + inter * t["net"]["ring"]
    per_node = ranks // max(nodes, 1)
    tree = t["base"]["tree"] + 2 * ((per_node - 1) * intra + (nodes.bit_length() - 1) * t["net"]["tree"])
    return min(ring, tree)


def _draft(shape: StepShape, b: Batch, split: Split, dense_w: int, routed_w: int, quant: str) -> Part:
    """The draft module (an MTP layer, or an EAGLE head of one layer) run ``draft_tokens`` times a step over one
    token per decode request: one layer's share of the GEMMs (routed experts by their active share) and the LM head
    each pass; its weights and the LM head read each pass. Its attention (one layer) is left out."""
    n, passes, layers = b.decode_requests, b.draft_tokens, max(shape.layers, 1)
    k, e = shape.experts_per_token, max(shape.num_experts, 1)
    routed = shape.routed_params * k // e if shape.num_experts else 0
    flops = 2 * n * passes * ((shape.dense_params + routed) // layers + shape.lm_head_params) // split.tp
    touched_ppm = 10**6 - int(10**6 * (1 - k / e) ** n) if shape.num_experts else 0
    per_pass = (dense_w + routed_w * touched_ppm // 10**6) // layers + shape.lm_head_params * 2 // split.tp
    return Part(name="draft", flops=flops, bytes=per_pass * passes, dtype=quant)


def step_seconds(ps: tuple[Part, ...], peaks: Peaks, c: Coefficients) -> float:
    """Seconds of one step: the sum of its parts' (``part_seconds``)."""
    return sum((part_seconds(p, peaks, c) for p in ps), 0.0)


def part_seconds(p: Part, peaks: Peaks, c: Coefficients) -> float:
    """One part's seconds: a collective's bytes over its link plus its calls' latency, the layers' and the indexer's
    fixed latency a layer, else the roofline max of its FLOPs and its bytes at the coefficients' efficiencies."""
    if p.name == "all-reduce":
        return p.bytes / (peaks.link_bytes_per_s * c.link_eff) + p.calls * c.comm_us * 1e-6
    if p.name == "layers":
        return p.calls * c.layer_us * 1e-6
    if p.name == "indexer":
        return p.calls * c.indexer_us * 1e-6
    if p.name == "all-reduce net":
        return p.bytes / (peaks.net_bytes_per_s * c.link_eff) + p.latency_ns * 1e-9
    if p.name == "attention":
        return attention_roofline(peaks, c)(p.flops, p.bytes)
    # prefill rows (large M) and decode rows (small M) reach different shares of the peak
    peak = peaks.flops_per_s(p.dtype)
    pre = p.flops * p.prefill_ppm / 10**6
    compute = pre / (peak * c.prefill_eff) + (p.flops - pre) / (peak * c.gemm_eff)
    return max(compute, p.bytes / (peaks.hbm_bytes_per_s * c.mem_eff))


def attention_rates(peaks: Peaks, c: Coefficients) -> tuple[float, float]:
    """Attention's (FLOP/s, bytes/s) on one GPU: bf16 compute at the attention efficiency, HBM at the memory one."""
    return peaks.flops_per_s("bf16") * c.attention_eff, peaks.hbm_bytes_per_s * c.mem_eff


def attention_roofline(peaks: Peaks, c: Coefficients) -> Callable[[int, int], float]:
    """Seconds of attention's (FLOPs, bytes) on one GPU: the roofline max of ``attention_rates``."""
    compute, memory = attention_rates(peaks, c)
    return lambda flops, read: max(flops / compute, read / memory)
