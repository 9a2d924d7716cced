"""Weights per GPU from the checkpoint's tensors: each tensor placed on the ranks by the rule the engines' model files
apply to its name; a name no rule knows is counted whole on every rank (replicated), listed, and said as an
assumption."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, NamedTuple

from kvplan.models.arch import ParamGroup, Split
from kvplan.models.safetensors import DTYPE_BITS, Tensor, expanded

VOCAB_PADDING = 64
"""``DEFAULT_VOCAB_PADDING_SIZE`` of both engines' ``vocab_parallel_embedding.py``: rows padded to a multiple."""

CATEGORIES = (
    "embeddings", "attention", "indexer", "dense_mlp", "shared_experts", "routed_experts", "router", "norms",
    "mtp", "unrecognised",
)  # fmt: skip


# Each tensor is placed by the rule the engines' model files apply to its name (SGLang 0.5.23
# ``srt/models/{llama,qwen2,qwen3,qwen3_moe,mixtral,deepseek_v2}.py``, vLLM 0.33 ``model_executor/models/`` of the
# same names; the linear layers in ``layers/linear.py`` and ``layers/vocab_parallel_embedding.py`` of both):
#
# - ``embed_tokens``, ``lm_head`` (and an MTP layer's ``shared_head.head``): ``VocabParallelEmbedding`` /
#   ``ParallelLMHead``, rows padded to a multiple of 64 (``DEFAULT_VOCAB_PADDING_SIZE``) and split tp ways; under
#   DP attention the embedding splits over the attention ranks only (SGLang ``VocabParallelEmbedding(...,
#   use_attn_tp_group=is_dp_attention_enabled())``) while the LM head keeps the full tp (``enable_dp_lm_head``
#   off by default);
# - ``q_proj``, ``q_b_proj``, ``kv_b_proj``: ``ColumnParallelLinear`` over the attention ranks (tp / dp_attention);
#   ``k_proj``/``v_proj``: ``QKVParallelLinear``, max(kv_heads / attention ranks, 1) heads a rank (kv heads are
#   replicated when there are fewer than ranks); ``o_proj``: ``RowParallelLinear`` (input dim split, bias whole);
# - MLA ``q_a_proj``, ``kv_a_proj_with_mqa`` (fused as ``fused_qkv_a_proj_with_mqa``): ``ReplicatedLinear``;
# - the DSA indexer ``wq_b``, ``wk``, ``weights_proj``, ``k_norm``: ``ReplicatedLinear`` / LayerNorm on every rank
#   (``Indexer`` in SGLang ``layers/attention/nsa/nsa_indexer.py``, vLLM ``models/deepseek_v2.py``);
# - dense MLP and shared experts: ``MergedColumnParallelLinear`` gate/up, ``RowParallelLinear`` down, tp ways;
# - routed experts: EP gives each rank whole experts (E / ep of them), and the remaining max(tp, ep) / ep ways
#   split each expert's intermediate dim (``FusedMoE``: ``moe_tp_size = tp / ep``);
# - routers (``mlp.gate``, ``e_score_correction_bias``), norms, an MTP layer's ``eh_proj``, ``enorm``, ``hnorm``:
#   replicated;
# - quantization tensors follow their weight: fp8 ``weight_scale_inv`` (one fp32 per 128×128 block) and NVFP4
#   ``weight_scale`` (one fp8 per 16 inputs) split on the same dim; per-tensor scalars (``weight_scale_2``,
#   ``input_scale``) are whole on every rank. GPTQ/AWQ ``qweight``/``qzeros``/``scales`` store [in, out]: the
#   output dim is the last one.
# - layers numbered ``num_hidden_layers`` and above are the MTP layers (DeepSeek, GLM): counted only when
#   speculative decoding loads them. vLLM's ``DeepSeekMTP`` loads the layer's own ``embed_tokens`` and
#   ``shared_head.head``; SGLang's ``DeepseekV3ForCausalLMNextN`` shares the target's (counted here as vLLM).

_SKIP = ("rotary_emb.inv_freq",)

_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(p), cat, how)
    for p, cat, how in (
        (r"(embed_tokens|wte)$", "embeddings", "vocab_attn"),
        (r"(lm_head|shared_head\.head|embed_out)$", "embeddings", "vocab"),
        (r"self_attn\.indexer\.(wq_b|wk|weights_proj|k_norm)$", "indexer", "replicated"),
        (r"self_attn\.(q_a_proj|kv_a_proj_with_mqa|fused_qkv_a_proj_with_mqa)$", "attention", "replicated"),
        (r"self_attn\.(q_a_layernorm|kv_a_layernorm|q_norm|k_norm)$", "norms", "replicated"),
        (r"self_attn\.(q_proj|q_b_proj|kv_b_proj|qkv_proj)$", "attention", "attn_col"),
        (r"self_attn\.(k_proj|v_proj)$", "attention", "kv"),
        (r"self_attn\.(o_proj|dense)$", "attention", "attn_row"),
        (r"\.experts\.(\d+|#)\.(gate_proj|up_proj|w1|w3)$", "routed_experts", "expert_col"),
        (r"\.experts\.(\d+|#)\.(down_proj|w2)$", "routed_experts", "expert_row"),
        (r"mlp\.shared_experts?\.(gate_proj|up_proj)$", "shared_experts", "col"),
        (r"mlp\.shared_experts?\.down_proj$", "shared_experts", "row"),
        (r"(mlp|block_sparse_moe)\.(gate|shared_expert_gate)$", "router", "replicated"),
        (r"mlp\.(gate_proj|up_proj)$", "dense_mlp", "col"),
        (r"mlp\.down_proj$", "dense_mlp", "row"),
        (r"(layernorm|_norm|^norm|\.norm|enorm|hnorm)$", "norms", "replicated"),
        (r"eh_proj$", "mtp", "replicated"),
    )
)

_PARAMS = (
    "weight", "bias", "weight_scale_inv", "weight_scale", "weight_scale_2", "input_scale", "e_score_correction_bias",
    "qweight", "qzeros", "scales", "g_idx", "weight_packed", "weight_zero_point", "weight_shape", "k_scale",
    "v_scale", "blocks",
)  # fmt: skip
_WHOLE = frozenset({"weight_shape", "weight_scale_2", "input_scale", "k_scale", "v_scale"})
"""Per-tensor scalars and shape records: whole on every rank whatever the weight's split."""
_OUT_LAST = frozenset({"qweight", "qzeros", "scales"})
"""GPTQ/AWQ store [in, out]: the output (column-parallel) dim is the last one."""


def _module(name: str) -> tuple[str, str]:
    module, _, param = name.rpartition(".")
    if param in _PARAMS and module:
        return module, param
    return name, ""


def rule_for(name: str) -> tuple[str, str] | None:
    """(category, how) of one tensor name, or None when kvplan has no rule for it."""
    return _rule(_module(name)[0])


@lru_cache(maxsize=4096)
def _rule(module: str) -> tuple[str, str] | None:
    for rx, cat, how in _RULES:
        if rx.search(module):
            return cat, how
    return None


def _indices(name: str) -> tuple[str, int, int]:
    """The name with every numeric part as '#' (rules are cached on it), its layer and expert index (-1: none).

    A numeric part is a dot-separated part of decimal digits after the first; the layer is the first
    ``layers.N.`` and the expert the first ``.experts.N.`` with N of at most 9 digits (string splitting, not
    regular expressions: a 119,000-tensor checkpoint is placed in a fraction of a second).
    """
    parts = name.split(".")
    layer = expert = -1
    last = len(parts) - 1
    for i in range(1, len(parts)):
        part = parts[i]
        if not part.isdecimal():
            continue
        if i < last and len(part) <= 9:
            prev = parts[i - 1]
            if layer < 0 and prev == "layers":
                layer = int(part)
            elif expert < 0 and prev == "experts" and i >= 2:
                expert = int(part)
        parts[i] = "#"
    return ".".join(parts), layer, expert


def _shard(shape: tuple[int, ...], dim: int, ways: int) -> int:
    """Elements on the largest shard when ``dim`` is split ``ways`` ways (a missing dim is not split)."""
    if ways <= 1 or not shape or dim >= len(shape) or dim < -len(shape):
        return math.prod(shape)
    dims = list(shape)
    dims[dim] = -(-dims[dim] // ways)
    return math.prod(dims)


@dataclass(frozen=True, kw_only=True)
class Sharding:
    """What one rank loads of a checkpoint, by the engines' rules per tensor name."""

    split: Split
    ep: int
    with_mtp: bool
    bytes: int
    """Checkpoint bytes on the most loaded rank (rank 0)."""
    total_bytes: int
    """The whole checkpoint, every tensor once (``metadata.total_size`` when it is the full set of shards)."""
    by_category: tuple[tuple[str, int], ...]
    """Per-rank bytes by category, in CATEGORIES order, categories with no bytes left out."""
    mtp_bytes: int
    """Per-rank bytes of the MTP layers (in ``bytes`` only when ``with_mtp``)."""
    unrecognised: tuple[str, ...] = ()
    """Names no rule knows: counted whole on every rank (an assumption)."""
    unrecognised_bytes: int = 0
    assumptions: tuple[str, ...] = field(default=())

    def category(self, name: str) -> int:
        return dict(self.by_category).get(name, 0)


class Placed(NamedTuple):
    """One tensor with its rule resolved once (names are matched once, then any split is arithmetic)."""

    name: str
    category: str
    how: str
    bits: int
    shape: tuple[int, ...]
    out_dim: int
    in_dim: int
    expert: int
    """The expert index of a routed-expert tensor, else -1."""
    mtp: bool
    """A layer at or past num_hidden_layers: an MTP layer."""
    known: bool
    skip: bool = False
    """A buffer no engine loads (``rotary_emb.inv_freq``)."""
    dtype: str = ""
    """The safetensors dtype ('BF16', 'F8_E4M3', 'I32', ...)."""
    alike: int = 1
    """Experts ``expert`` .. ``expert + alike − 1``, alike (a config's run, ``Tensor.count``); 1: one tensor."""

    @property
    def nbytes(self) -> int:
        return -(-math.prod(self.shape) * self.bits // 8) * self.alike


def place(tensors: Iterable[Tensor], *, num_layers: int) -> tuple[Placed, ...]:
    """Each tensor with its category and sharding rule (see the module docstring); a run of experts
    (``Tensor.count``) stays one entry when its rule places whole experts, else each of its tensors is placed."""
    out: list[Placed] = []
    for t in tensors:
        p = _place(t, num_layers)
        if t.count > 1 and p.expert < 0:
            out.extend(_place(u, num_layers) for u in expanded((t,)))
        else:
            out.append(p)
    return tuple(out)


def _place(t: Tensor, num_layers: int) -> Placed:
    norm, layer, expert = _indices(t.name)
    module, param = _module(norm)
    rule = _rule(module)
    cat, how = rule if rule is not None else ("unrecognised", "replicated")
    if param in _WHOLE:
        how = "replicated"
    out_dim, in_dim = (-1, 0) if param in _OUT_LAST else (0, 1)
    return Placed(
        name=t.name,
        category=cat,
        how=how,
        bits=DTYPE_BITS[t.dtype],
        shape=t.shape,
        out_dim=out_dim,
        in_dim=in_dim,
        expert=expert if how.startswith("expert") else -1,
        mtp=layer >= num_layers,
        known=rule is not None,
        skip=module.endswith(_SKIP),
        dtype=t.dtype,
        alike=t.count,
    )


def rank_bytes(p: Placed, split: Split, *, moe_tp: int, experts_here: int, num_kv_heads: int) -> int:
    """Bytes of one tensor on rank 0 of ``split`` (``moe_tp``: ways each expert is sliced; ``experts_here``:
    how many whole experts rank 0 holds under EP, or a number past the last expert without EP)."""
    if p.skip or 0 <= experts_here <= p.expert:
        return 0  # not loaded, or a whole expert that lives on another EP rank
    shape, how = p.shape, p.how
    if how in ("vocab", "vocab_attn") and shape:
        ways = split.tp if how == "vocab" else split.attention
        elems = _shard((-(-shape[0] // VOCAB_PADDING) * VOCAB_PADDING, *shape[1:]), 0, ways)
    elif how == "kv" and num_kv_heads and shape:
        ways = split.attention
        heads_here = max(num_kv_heads // ways, 1) if ways <= num_kv_heads else 1
        dims = list(shape)
        dims[p.out_dim] = dims[p.out_dim] * heads_here // num_kv_heads
        elems = math.prod(dims)
    elif how in ("col", "attn_col", "expert_col", "kv"):
        ways = {"col": split.tp, "attn_col": split.attention, "expert_col": moe_tp, "kv": split.attention}[how]
        elems = _shard(shape, p.out_dim, ways)
    elif how in ("row", "attn_row", "expert_row"):
        ways = {"row": split.tp, "attn_row": split.attention, "expert_row": moe_tp}[how]
        elems = _shard(shape, p.in_dim, ways) if len(shape) >= 2 else math.prod(shape)
    else:
        elems = math.prod(shape)
    return -(-elems * p.bits // 8)


def _unique(placed: Iterable[Placed], experts_here: int) -> list[tuple[Placed, int]]:
    """Tensors that land alike (same rule, dtype, shape, MTP or not, on rank 0's experts or not) counted once:
    a 119,000-tensor checkpoint has a few hundred such kinds."""
    kinds: dict[tuple[Any, ...], list[Any]] = {}
    for run in placed:
        for p, n in _on_rank0(run, experts_here):
            key = (p.category, p.how, p.bits, p.shape, p.out_dim, p.in_dim, p.mtp, p.known, p.skip,
                   p.expert < experts_here)  # fmt: skip
            entry = kinds.get(key)
            if entry is None:
                kinds[key] = [p, n]
            else:
                entry[1] += n
    return [(p, n) for p, n in kinds.values()]


def _on_rank0(p: Placed, experts_here: int) -> tuple[tuple[Placed, int], ...]:
    """A run of experts as (a tensor of it, how many) for those rank 0 holds and those it does not (either may be
    none; ``rank_bytes`` prices one tensor whatever its ``alike``); a tensor alone as itself, once."""
    if p.alike == 1:
        return ((p, 1),)
    held = min(max(experts_here - p.expert, 0), p.alike)
    return (p, held), (p._replace(expert=p.expert + held), p.alike - held)


def _experts(placed: Iterable[Placed]) -> int:
    return 1 + max((p.expert + p.alike - 1 for p in placed if p.expert >= 0), default=-1)


def shard(
    tensors: Iterable[Tensor],
    split: Split,
    *,
    num_layers: int,
    num_kv_heads: int = 0,
    ep: int = 1,
    with_mtp: bool = False,
) -> Sharding:
    """Bytes on rank 0 of ``split`` (ep: how many of ``split.experts`` ways split whole experts).

    ``num_layers``: the config's ``num_hidden_layers`` (layers at or past it are MTP layers);
    ``num_kv_heads``: ``num_key_value_heads`` for GQA (0: k/v split like q). Pipeline stages are not applied
    here (rank 0 of one stage holds every layer it is given; :class:`TensorGroup` divides by ``pp``).
    """
    placed = place(tensors, num_layers=num_layers)
    ep = max(1, min(ep, split.experts))
    moe_tp = max(split.experts // ep, 1)
    n_experts = _experts(placed)
    experts_here = -(-n_experts // ep)
    acc: dict[str, int] = {}
    unknown_bytes = mtp = 0
    for p, count in _unique(placed, experts_here):
        nbytes = count * rank_bytes(p, split, moe_tp=moe_tp, experts_here=experts_here, num_kv_heads=num_kv_heads)
        cat = p.category
        if p.mtp:
            mtp += nbytes
            if not with_mtp:
                continue
            cat = "mtp"
        if not p.known:
            unknown_bytes += nbytes
        acc[cat] = acc.get(cat, 0) + nbytes
    unknown = [p.name for p in placed if not p.known and (with_mtp or not p.mtp)]
    notes: list[str] = []
    if unknown:
        shown = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        notes.append(f"assumed replicated: {len(unknown)} tensors kvplan has no sharding rule for ({shown})")
    return Sharding(
        split=split,
        ep=ep,
        with_mtp=with_mtp,
        bytes=sum(acc.values()),
        total_bytes=sum(p.nbytes for p in placed),
        by_category=tuple((c, acc[c]) for c in CATEGORIES if acc.get(c)),
        mtp_bytes=mtp,
        unrecognised=tuple(unknown),
        unrecognised_bytes=unknown_bytes,
        assumptions=tuple(notes),
    )


_LAYER = re.compile(r"layers\.(\d+)\.")


@dataclass(frozen=True, kw_only=True)
class TensorGroup(ParamGroup):
    """A parameter group made of real tensors: bytes per GPU by the per-tensor rules for any split.

    ``ModelArch.estimated_weights_per_gpu`` sums these like any ParamGroup (the group named 'mtp' counts only
    with speculative decoding). Experts are sliced ``split.experts`` ways (a Split does not say how much of it
    is EP; whole experts differ only by how block scales round). Layer groups divide over ``split.pp`` stages.
    """

    placed: tuple[Placed, ...] = field(default=(), repr=False)
    num_kv_heads: int = 0
    n_experts: int = 0
    _memo: dict[Split, int] = field(default_factory=dict, compare=False, hash=False, repr=False)
    _kinds: dict[int, list[tuple[Placed, int]]] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def bytes_per_gpu(self, split: Split) -> int:
        if split not in self._memo:
            kw = {"moe_tp": split.experts, "experts_here": self.n_experts, "num_kv_heads": self.num_kv_heads}
            kinds = self._memo_kinds()
            total = sum(n * rank_bytes(p, split, **kw) for p, n in kinds)
            stages = 1 if self.name == "embeddings" else split.pp
            self._memo[split] = -(-total // stages)
        return self._memo[split]

    def _memo_kinds(self) -> list[tuple[Placed, int]]:
        kinds = self._kinds.get(0)
        if kinds is None:
            kinds = self._kinds[0] = _unique(self.placed, self.n_experts)
        return kinds

    def in_dtype(self, stored: int, loaded: int) -> TensorGroup:
        """Float tensors in the checkpoint's torch_dtype cast to the model dtype (the engine builds its parameters
        in it and copies the checkpoint in); quantized tensors, their scales and tensors the checkpoint keeps in
        another dtype on purpose (DeepSeek's fp32 ``e_score_correction_bias`` in a bf16 checkpoint) keep theirs."""
        cast = tuple(
            p._replace(bits=loaded * 8) if p.bits == stored * 8 and p.dtype in _FLOAT and not _is_scale(p.name) else p
            for p in self.placed
        )
        if cast == self.placed:
            return self
        nbytes = sum(p.nbytes for p in cast)
        return replace(self, placed=cast, bytes_per_param_num=nbytes, _memo={}, _kinds={})

    def layers_owned(self, model_layers: int) -> tuple[int, int]:
        """Its ``layer_span``, else the decoder layers its tensor names hold (``layers.N.``), else every layer."""
        if self.layer_span is not None:
            return self.layer_span
        ids = [int(m.group(1)) for p in self.placed if (m := _LAYER.search(p.name)) and int(m.group(1)) < model_layers]
        if ids:
            return min(ids), max(ids) + 1
        return 0, model_layers


_SCALES = ("weight_scale_inv", "weight_scale", "weight_scale_2", "input_scale", "k_scale", "v_scale", "scales",
           "qzeros", "g_idx", "weight_zero_point", "weight_shape")  # fmt: skip


_FLOAT = ("F16", "BF16", "F32")
"""Safetensors dtypes of unquantized parameters (fp8, fp4 and the integer packings are quantized storage)."""


def _weight_kind(p: Placed) -> str | None:
    """A weight tensor's GEMM format: 'int4' for an integer packing (compressed-tensors ``weight_packed``, AWQ / GPTQ
    ``qweight``: 4-bit as the engines load them), 'fp4' for packed U8 weights (NVFP4, MXFP4 blocks), 'fp8' for F8
    weights, '' unquantized; None for a tensor that is no weight (a bias, a scale)."""
    leaf = p.name.rpartition(".")[2]
    if leaf in ("weight_packed", "qweight"):
        return "int4"
    if leaf in ("weight", "blocks") or leaf.endswith("_blocks"):
        return "fp4" if p.dtype == "U8" else "fp8" if p.dtype.startswith("F8") else ""
    return None


def _gemm_of(group: list[Placed]) -> str:
    """The GEMM format of a group's quantized weights where they agree (ParamGroup.gemm; ``_weight_kind``), else ''
    (unquantized or mixed)."""
    kinds = {k for k in map(_weight_kind, group) if k is not None}
    return kinds.pop() if len(kinds) == 1 else ""


def _values(p: Placed) -> int:
    """The values a tensor's elements hold: two a U8 byte of packed 4-bit weights, eight an I32 of an integer packing
    (``_weight_kind``), else one an element."""
    kind = _weight_kind(p)
    per = 8 if kind == "int4" and p.dtype == "I32" else 2 if kind == "fp4" else 1
    return math.prod(p.shape) * p.alike * per


def _is_scale(name: str) -> bool:
    return name.rpartition(".")[2] in _SCALES


def param_groups_from_tensors(
    tensors: Iterable[Tensor], *, num_layers: int, num_kv_heads: int = 0
) -> tuple[TensorGroup, ...]:
    """One TensorGroup per category (MTP layers in one group named 'mtp'), in CATEGORIES order."""
    placed = place(tensors, num_layers=num_layers)
    n_experts = _experts(placed)
    by: dict[str, list[Placed]] = {}
    for p in placed:
        by.setdefault("mtp" if p.mtp else p.category, []).append(p)
    split_of = {"attention": "attn", "indexer": "none", "routed_experts": "experts", "router": "none",
                "norms": "none", "unrecognised": "none", "mtp": "experts"}  # fmt: skip
    out = []
    for cat in CATEGORIES:
        group = by.get(cat)
        if not group:
            continue
        # parameters: every tensor but the quantization scales (their bytes still count)
        elems = sum(math.prod(p.shape) * p.alike for p in group if not _is_scale(p.name)) or 1
        values = sum(_values(p) for p in group if not _is_scale(p.name))
        nbytes = sum(p.nbytes for p in group)
        out.append(
            TensorGroup(
                name=cat,
                params=elems,
                bytes_per_param_num=nbytes,
                bytes_per_param_den=elems,
                split=split_of.get(cat, "tp"),
                placed=tuple(group),
                num_kv_heads=num_kv_heads,
                n_experts=n_experts,
                gemm=_gemm_of(group),
                values=values if values != elems else 0,
            )
        )
    return tuple(out)
