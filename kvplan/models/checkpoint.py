"""Weights per GPU from the checkpoint itself: safetensors headers, the shard index, and the engines' sharding.

A ``*.safetensors`` file starts with an 8-byte little-endian header length N, then N bytes of JSON: for every
tensor its ``dtype``, ``shape`` and ``data_offsets`` (and an optional ``__metadata__`` of strings). kvplan reads
only that header (never the tensor data), so a 700 GB snapshot is sized in milliseconds. Each tensor is placed by
the rule the engines' model files apply to its name (the sharding rules below); a name no rule knows is counted
whole on every rank (replicated), listed, and said as an assumption.

With only ``model.safetensors.index.json`` (the shards not downloaded), :func:`config_tensors` derives each
tensor's dtype and shape from ``config.json`` for the families kvplan models and :func:`reconcile` checks them
against the index's ``metadata.total_size`` to the byte, saying what is left unexplained.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from kvplan import limits
from kvplan.errors import ConfigError, InputError
from kvplan.models import hub_cache
from kvplan.models.arch import ParamGroup, Split
from kvplan.models.index_bounds import refuse_many_tensors
from kvplan.models.quant import resolve  # which quantization scheme each module is in

VOCAB_PADDING = 64
"""``DEFAULT_VOCAB_PADDING_SIZE`` of both engines' ``vocab_parallel_embedding.py``: rows padded to a multiple."""
FP8_BLOCK = 128
"""fp8 block quantization: one fp32 ``weight_scale_inv`` per 128 × 128 block of the weight."""

DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64,
    "F64": 64, "C64": 64,
}  # fmt: skip
"""Bits per element of each safetensors dtype (the format's ``Dtype`` enum)."""

CATEGORIES = (
    "embeddings", "attention", "indexer", "dense_mlp", "shared_experts", "routed_experts", "router", "norms",
    "mtp", "unrecognised",
)  # fmt: skip


# --------------------------------------------------------------------------- tensors and headers


@dataclass(frozen=True)
class Tensor:
    """One tensor of a checkpoint: its name, safetensors dtype and shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return -(-self.numel * DTYPE_BITS[self.dtype] // 8)


def _strict_json(text: str, where: str) -> Any:
    """JSON by kvplan's one strict reader (limits.strict_json), errors located by file and line."""
    try:
        return limits.strict_json(text)
    except limits.JsonError as e:
        at = f"{where}:{e.line}" if e.line is not None else where
        raise limits.JsonError(f"{at}: {e.problem}", line=e.line, key=e.key) from None


def _dims(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > 8:
        raise InputError(f"{where}: expected a list of at most 8 dimensions")
    for d in value:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0 or d > limits.MAX_TOKENS:
            raise InputError(f"{where}: {ascii(d)[:40]} is not a dimension (0 .. {limits.MAX_TOKENS:,})")
    return tuple(value)


def read_safetensors_header(path: Path) -> tuple[Tensor, ...]:
    """Every tensor of one ``.safetensors`` file, from its header alone (the tensor data is never read).

    The header length is bounded by ``limits.MAX_SAFETENSORS_HEADER_BYTES``; each entry's ``data_offsets`` must
    span exactly its dtype × shape bytes inside the file, so a truncated or forged header is an error.
    """
    where = f"safetensors file {path}"
    st = limits.check_regular(path, "safetensors file")
    with limits.open_regular(path, "safetensors file") as f:
        head = f.read(8)
        n = header_length(head, st.st_size, where)
        raw = f.read(n)
    return parse_safetensors_header(raw, st.st_size, where)


def header_length(head: bytes, file_size: int, where: str) -> int:
    """The JSON header's length from a safetensors file's first 8 bytes, bounded by the file and kvplan's cap."""
    if len(head) < 8:
        raise InputError(f"{where}: shorter than the 8-byte header length; not a safetensors file")
    n = int.from_bytes(head[:8], "little")
    cap = limits.MAX_SAFETENSORS_HEADER_BYTES
    if n > cap:
        raise limits.LimitError(f"{where}: a {n:,}-byte header is over kvplan's limit of {cap:,} bytes")
    if n + 8 > file_size:
        raise InputError(f"{where}: the header claims {n:,} bytes but only {file_size - 8:,} follow its 8-byte length")
    return n


def parse_safetensors_header(raw: bytes, file_size: int, where: str) -> tuple[Tensor, ...]:
    """The tensors a safetensors JSON header (``raw``, after the 8-byte length) lists, checked against the size
    of the whole file: a local shard's, or the Hub's Content-Range total (kvplan.models.hub)."""
    n = len(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: the header is not valid UTF-8; not a safetensors file") from None
    doc = _strict_json(text, where)
    if not isinstance(doc, dict):
        raise InputError(f"{where}: the header is not a JSON object")
    data_bytes = file_size - 8 - n
    out = []
    for name, entry in doc.items():
        if name == "__metadata__":
            continue
        at = f"{where}: {name[:120]}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise InputError(f"{at}: expected dtype, shape and data_offsets")
        dtype = entry["dtype"]
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
            raise InputError(f"{at}.dtype: {str(dtype)[:20]!r} is not a safetensors dtype")
        t = Tensor(name, dtype, _dims(entry["shape"], f"{at}.shape"))
        offsets = _dims(entry["data_offsets"], f"{at}.data_offsets")
        begin, end = offsets if len(offsets) == 2 else (-1, -1)
        if not 0 <= begin <= end <= data_bytes or end - begin != t.nbytes:
            raise InputError(
                f"{at}.data_offsets: {entry['data_offsets']!r} does not hold {t.nbytes:,} bytes of {dtype}"
                f" {list(t.shape)} inside the file's {data_bytes:,} data bytes"
            )
        out.append(t)
    return tuple(out)


def snapshot_shards(folder: Path) -> tuple[Path, ...]:
    """The ``*.safetensors`` files of a snapshot folder, sorted (what the engines load)."""
    try:
        return tuple(sorted(p for p in folder.glob("*.safetensors") if p.is_file()))
    except OSError as e:
        raise InputError(f"snapshot {folder}: cannot list: {e.strerror or e}") from None


def _shard_tensors(folder: Path) -> Iterator[tuple[Path, tuple[Tensor, ...]]]:
    """Each shard with its tensors: the files' headers, or the headers kvplan fetched from the Hub (hub_cache)."""
    if not (folder / hub_cache.HEADERS_NAME).is_file():
        yield from ((shard, read_safetensors_header(shard)) for shard in snapshot_shards(folder))
        return
    for name, size, raw in hub_cache.cached_headers(folder):
        where = f"safetensors header {folder / hub_cache.HEADERS_DIR / name}"
        n = header_length(raw, size, where)
        if len(raw) != 8 + n:
            raise InputError(f"{where}: {len(raw) - 8:,} header bytes cached, {n:,} expected; remove it to fetch again")
        yield Path(name), parse_safetensors_header(raw[8:], size, where)


def has_shards(folder: Path) -> bool:
    """Whether ``folder`` has safetensors shards, or the headers of a Hub model's shards (hub_cache)."""
    return bool(snapshot_shards(folder)) or (folder / hub_cache.HEADERS_NAME).is_file()


def snapshot_tensors(folder: Path) -> tuple[Tensor, ...]:
    """Every tensor of every ``*.safetensors`` file in a snapshot folder (a name twice is an error)."""
    seen: dict[str, Path] = {}
    out: list[Tensor] = []
    for shard, tensors in _shard_tensors(folder):
        for t in tensors:
            if t.name in seen:
                raise InputError(
                    f"snapshot {folder}: tensor {t.name[:120]} is in both {seen[t.name].name} and {shard.name}"
                )
            seen[t.name] = shard
            out.append(t)
    return tuple(out)


# --------------------------------------------------------------------------- sharding rules

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
_LAYER = re.compile(r"(?:^|\.)layers\.(\d{1,9})\.")
"""Buffers some checkpoints carry that no engine loads."""

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

    @property
    def nbytes(self) -> int:
        return -(-math.prod(self.shape) * self.bits // 8)


def place(tensors: Iterable[Tensor], *, num_layers: int) -> tuple[Placed, ...]:
    """Each tensor with its category and sharding rule (see the module docstring)."""
    out = []
    for t in tensors:
        norm, layer, expert = _indices(t.name)
        module, param = _module(norm)
        rule = _rule(module)
        cat, how = rule if rule is not None else ("unrecognised", "replicated")
        if param in _WHOLE:
            how = "replicated"
        out_dim, in_dim = (-1, 0) if param in _OUT_LAST else (0, 1)
        out.append(
            Placed(
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
            )
        )
    return tuple(out)


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
    for p in placed:
        key = (p.category, p.how, p.bits, p.shape, p.out_dim, p.in_dim, p.mtp, p.known, p.skip, p.expert < experts_here)
        entry = kinds.get(key)
        if entry is None:
            kinds[key] = [p, 1]
        else:
            entry[1] += 1
    return [(p, n) for p, n in kinds.values()]


def _experts(placed: Iterable[Placed]) -> int:
    return 1 + max((p.expert for p in placed), default=-1)


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


_SCALES = ("weight_scale_inv", "weight_scale", "weight_scale_2", "input_scale", "k_scale", "v_scale", "scales",
           "qzeros", "g_idx", "weight_zero_point", "weight_shape")  # fmt: skip


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
        elems = sum(math.prod(p.shape) for p in group if not _is_scale(p.name)) or 1
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
            )
        )
    return tuple(out)


# --------------------------------------------------------------------------- index.json and the config


@dataclass(frozen=True)
class CheckpointIndex:
    """``model.safetensors.index.json``: the total size of the shards and every tensor name."""

    source: str
    total_size: int
    names: tuple[str, ...]


def read_index(path: Path) -> CheckpointIndex:
    where = f"checkpoint index {path}"
    text = limits.read_text(path, limits.CHECKPOINT_INDEX, "checkpoint index")
    refuse_many_tensors(path, text.count('.safetensors"'))  # each entry names its shard: counted before the parse
    doc = _strict_json(text, where)
    del text
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    wmap = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wmap, dict) or not set(map(type, wmap.values())) <= {str}:
        raise ConfigError("expected an object of tensor name -> shard file", source=str(path), key="weight_map")
    refuse_many_tensors(path, len(wmap))  # shard files not named *.safetensors
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, float) and total.is_integer():
        total = int(total)  # some exporters write 1.5e10
    if isinstance(total, bool) or not isinstance(total, int):
        raise ConfigError("expected the shards' total size in bytes", source=str(path), key="metadata.total_size")
    limits.bounded_int(total, name=f"{where}: metadata.total_size", low=0, high=limits.MAX_GPU_BYTES)
    return CheckpointIndex(str(path), total, tuple(wmap))


@dataclass(frozen=True, kw_only=True)
class Reconciliation:
    """The config-derived tensors checked against an index's ``metadata.total_size``, to the byte."""

    total_size: int
    explained_bytes: int
    """Bytes of the config-derived tensors whose names the index lists."""
    unknown_names: tuple[str, ...]
    """In the index, not derived from the config (their bytes are the unexplained part)."""
    missing_names: tuple[str, ...]
    """Derived from the config, absent from the index (not counted)."""

    @property
    def unexplained_bytes(self) -> int:
        return self.total_size - self.explained_bytes

    @property
    def unexplained_ppm(self) -> int:
        """Unexplained bytes in parts per million of total_size (rounded toward zero)."""
        return self.unexplained_bytes * 1_000_000 // self.total_size if self.total_size else 0


def reconcile(index: CheckpointIndex, tensors: Iterable[Tensor]) -> Reconciliation:
    derived = {t.name: t for t in tensors}
    listed = set(index.names)
    return Reconciliation(
        total_size=index.total_size,
        explained_bytes=sum(t.nbytes for n, t in derived.items() if n in listed),
        unknown_names=tuple(n for n in index.names if n not in derived),
        missing_names=tuple(n for n in derived if n not in listed),
    )


LAID_OUT = frozenset({
    "LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM", "Glm4MoeForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM",
})  # fmt: skip
"""Architectures :func:`config_tensors` lays out per tensor (any other: None, the parameter groups stand)."""

_DT = {"bfloat16": "BF16", "bf16": "BF16", "float16": "F16", "fp16": "F16", "half": "F16", "float32": "F32"}


def config_int(config: Mapping[str, Any], key: str, default: int = 0) -> int:
    """An integer field of a config.json (0 .. MAX_DIM; a missing or null key is ``default``), else a ConfigError."""
    v = config.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= limits.MAX_DIM:
        raise ConfigError(f"expected an integer 0 .. {limits.MAX_DIM:,}, got {str(v)[:40]}", key=key)
    return v


def _expert_modules(config: Mapping[str, Any], layers: int) -> int:
    """About how many linear modules a per-tensor layout of this config lists: 3 a (routed or shared) expert and
    a dense MLP per layer, MTP layers included. Kimi-K2, the largest real one kvplan reads, lists ~71,000."""
    experts = max(config_int(config, k) for k in ("n_routed_experts", "num_local_experts", "num_experts"))
    shared = max(config_int(config, k) for k in ("n_shared_experts", "num_shared_experts"))
    mtp = config_int(config, "num_nextn_predict_layers")
    return (layers + mtp) * (experts + shared + 1) * 3


def config_tensors(config: Mapping[str, Any], source: str = "config.json") -> tuple[Tensor, ...] | None:
    """Every tensor a checkpoint of this config holds, with dtype and shape; None for a family or a
    quantization scheme kvplan cannot lay out per tensor (the caller falls back to parameter groups).

    Families: GQA dense (Llama, Mistral, Qwen2 with q/k/v biases, Qwen3 with q/k norms), GQA MoE (Qwen3-MoE,
    Mixtral), MLA/DSA MoE (DeepSeek-V2/V3/R1, Kimi-K2, GLM-5.x: MTP layers and the indexer included).
    Linear weights in the checkpoint's scheme (quant.resolve): plain dtype, fp8 128×128 blocks
    (``weight_scale_inv`` fp32), fp8 per tensor (``weight_scale`` fp32 scalar), NVFP4 (packed U8 ``weight``,
    fp8 ``weight_scale`` per 16, fp32 ``weight_scale_2`` and ``input_scale``).
    """
    quant = resolve(config, source)
    plain = _DT.get(str(config.get("torch_dtype", config.get("dtype", "bfloat16"))).removeprefix("torch."), "BF16")
    out: list[Tensor] = []
    failed = False

    def add(name: str, *shape: int, dtype: str | None = None) -> None:
        out.append(Tensor(name, dtype or plain, tuple(shape)))

    def linear(module: str, n_out: int, n_in: int, *, bias: bool = False) -> None:
        nonlocal failed
        s = quant.scheme_for(module)
        vps, wb = s.values_per_scale, s.weight_bits
        if wb in (16, 32) and not vps:
            add(f"{module}.weight", n_out, n_in, dtype={16: plain if plain != "F32" else "BF16", 32: "F32"}[wb])
        elif wb == 8 and vps == FP8_BLOCK * FP8_BLOCK:
            add(f"{module}.weight", n_out, n_in, dtype="F8_E4M3")
            add(f"{module}.weight_scale_inv", -(-n_out // FP8_BLOCK), -(-n_in // FP8_BLOCK), dtype="F32")
        elif wb == 8 and not vps:
            add(f"{module}.weight", n_out, n_in, dtype="F8_E4M3")
            row_bits = getattr(s, "row_bits", 0)  # per-channel: one scale an output row (vLLM keeps it fp32)
            if row_bits:
                add(f"{module}.weight_scale", n_out, 1, dtype="F32" if row_bits == 32 else plain)
            else:
                add(f"{module}.weight_scale", dtype="F32")
        elif wb == 4 and vps and s.scale_bits == 8 and "NVFP4" in s.name:
            add(f"{module}.weight", n_out, n_in // 2, dtype="U8")
            add(f"{module}.weight_scale", n_out, -(-n_in // vps), dtype="F8_E4M3")
            add(f"{module}.weight_scale_2", dtype="F32")
            add(f"{module}.input_scale", dtype="F32")
        else:
            failed = True
        if bias:
            add(f"{module}.bias", n_out)

    h = config_int(config, "hidden_size")
    layers = config_int(config, "num_hidden_layers")
    vocab = config_int(config, "vocab_size")
    archs = config.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs else archs
    if not h or not layers or not vocab or (arch is not None and arch not in LAID_OUT):
        return None
    if _expert_modules(config, layers) > limits.MAX_CONFIG_MODULES:  # bounded work: parameter groups instead
        return None
    heads = config_int(config, "num_attention_heads")
    tied = bool(config.get("tie_word_embeddings", False))
    add("model.embed_tokens.weight", vocab, h)
    if config.get("kv_lora_rank") is not None:
        _mla(config, add, linear, h, layers, heads, vocab)
    else:
        if not _gqa(config, add, linear, h, layers, heads):
            return None
    add("model.norm.weight", h)
    if not tied:
        add("lm_head.weight", vocab, h)
    return None if failed else tuple(out)


def _gqa(config: Mapping[str, Any], add: Any, linear: Any, h: int, layers: int, heads: int) -> bool:
    kv = config_int(config, "num_key_value_heads", heads)
    hd = config_int(config, "head_dim") or (h // heads if heads else 0)
    inter = config_int(config, "intermediate_size")
    mt = str(config.get("model_type", ""))
    qkv_bias = mt == "qwen2" or bool(config.get("attention_bias", False))
    qk_norm = mt.startswith("qwen3") or bool(config.get("use_qk_norm", False))
    mixtral = config_int(config, "num_local_experts")
    glm = config_int(config, "n_routed_experts")  # GLM-4.5: dense first layers, shared experts, MTP layers
    experts = mixtral or config_int(config, "num_experts") or glm
    moe_inter = inter if mixtral else config_int(config, "moe_intermediate_size")
    step = config_int(config, "decoder_sparse_step", 1) or 1
    only = set(config.get("mlp_only_layers") or ())
    dense = config_int(config, "first_k_dense_replace") if glm else 0
    shared = config_int(config, "n_shared_experts") if glm else 0
    mtp = config_int(config, "num_nextn_predict_layers") if glm else 0
    if not heads or not hd:
        return False
    for i in range(layers + mtp):
        p = f"model.layers.{i}."
        linear(f"{p}self_attn.q_proj", heads * hd, h, bias=qkv_bias)
        linear(f"{p}self_attn.k_proj", kv * hd, h, bias=qkv_bias)
        linear(f"{p}self_attn.v_proj", kv * hd, h, bias=qkv_bias)
        linear(f"{p}self_attn.o_proj", h, heads * hd)
        if qk_norm:
            add(f"{p}self_attn.q_norm.weight", hd)
            add(f"{p}self_attn.k_norm.weight", hd)
        add(f"{p}input_layernorm.weight", h)
        add(f"{p}post_attention_layernorm.weight", h)
        if experts and i >= dense and i not in only and (i + 1) % step == 0:
            moe = "block_sparse_moe" if mixtral else "mlp"
            add(f"{p}{moe}.gate.weight", experts, h)
            if glm:
                add(f"{p}mlp.gate.e_score_correction_bias", experts, dtype="F32")
            names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
            for e in range(experts):
                q = f"{p}{moe}.experts.{e}."
                linear(q + names[0], moe_inter, h)
                linear(q + names[1], moe_inter, h)
                linear(q + names[2], h, moe_inter)
            if shared:
                linear(f"{p}mlp.shared_experts.gate_proj", moe_inter * shared, h)
                linear(f"{p}mlp.shared_experts.up_proj", moe_inter * shared, h)
                linear(f"{p}mlp.shared_experts.down_proj", h, moe_inter * shared)
        else:
            linear(f"{p}mlp.gate_proj", inter, h)
            linear(f"{p}mlp.up_proj", inter, h)
            linear(f"{p}mlp.down_proj", h, inter)
        if i >= layers:  # GLM-4.5's MTP layer: no embed/head copy of its own (mtp_ships_embed_head)
            add(p + "enorm.weight", h)
            add(p + "hnorm.weight", h)
            add(p + "eh_proj.weight", h, 2 * h)
            add(p + "shared_head.norm.weight", h)
    return True


def mtp_ships_embed_head(config: Mapping[str, Any]) -> bool:
    """Whether each MTP layer of the checkpoint carries its own ``embed_tokens`` and ``shared_head.head``:
    DeepSeek-V3/R1/V3.2 and Kimi-K2 do; GLM-4.5 and GLM-5.x do not (GLM-5-FP8's ``modules_to_not_convert`` names
    every bf16 module of layer 78, eh_proj, enorm, hnorm and shared_head.norm, and no embed or head there; the
    9.96 B-parameter MTP layer of reference section B)."""
    return not str(config.get("model_type", "")).startswith("glm")


def _mla(config: Mapping[str, Any], add: Any, linear: Any, h: int, layers: int, heads: int, vocab: int) -> None:
    q_lora = config_int(config, "q_lora_rank")
    kv_lora = config_int(config, "kv_lora_rank")
    nope = config_int(config, "qk_nope_head_dim", 128)
    rope = config_int(config, "qk_rope_head_dim")
    v = config_int(config, "v_head_dim", 128)
    idx_heads = config_int(config, "index_n_heads")
    idx_dim = config_int(config, "index_head_dim", 128 if config.get("index_topk") else 0)
    dense = config_int(config, "first_k_dense_replace")
    inter = config_int(config, "intermediate_size")
    experts = config_int(config, "n_routed_experts")
    shared = config_int(config, "n_shared_experts")
    moe_inter = config_int(config, "moe_intermediate_size")
    mtp = config_int(config, "num_nextn_predict_layers")
    for i in range(layers + mtp):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        if q_lora:
            linear(a + "q_a_proj", q_lora, h)
            add(a + "q_a_layernorm.weight", q_lora)
            linear(a + "q_b_proj", heads * (nope + rope), q_lora)
        else:
            linear(a + "q_proj", heads * (nope + rope), h)
        linear(a + "kv_a_proj_with_mqa", kv_lora + rope, h)
        add(a + "kv_a_layernorm.weight", kv_lora)
        linear(a + "kv_b_proj", heads * (nope + v), kv_lora)
        linear(a + "o_proj", h, heads * v)
        if idx_heads and idx_dim:
            linear(a + "indexer.wq_b", idx_heads * idx_dim, q_lora or h)
            linear(a + "indexer.wk", idx_dim, h)
            add(a + "indexer.k_norm.weight", idx_dim)
            add(a + "indexer.k_norm.bias", idx_dim)
            add(a + "indexer.weights_proj.weight", idx_heads, h)
        add(p + "input_layernorm.weight", h)
        add(p + "post_attention_layernorm.weight", h)
        if i < dense:
            linear(p + "mlp.gate_proj", inter, h)
            linear(p + "mlp.up_proj", inter, h)
            linear(p + "mlp.down_proj", h, inter)
        else:
            add(p + "mlp.gate.weight", experts, h)
            if config.get("topk_method") == "noaux_tc" or experts:
                add(p + "mlp.gate.e_score_correction_bias", experts, dtype="F32")
            for e in range(experts):
                q = f"{p}mlp.experts.{e}."
                linear(q + "gate_proj", moe_inter, h)
                linear(q + "up_proj", moe_inter, h)
                linear(q + "down_proj", h, moe_inter)
            if shared:
                linear(p + "mlp.shared_experts.gate_proj", moe_inter * shared, h)
                linear(p + "mlp.shared_experts.up_proj", moe_inter * shared, h)
                linear(p + "mlp.shared_experts.down_proj", h, moe_inter * shared)
        if i >= layers:  # the MTP layer's own modules (DeepSeek-V3 checkpoint layout)
            add(p + "enorm.weight", h)
            add(p + "hnorm.weight", h)
            add(p + "eh_proj.weight", h, 2 * h)
            add(p + "shared_head.norm.weight", h)
            if mtp_ships_embed_head(config):
                add(p + "embed_tokens.weight", vocab, h)
                add(p + "shared_head.head.weight", vocab, h)


# --------------------------------------------------------------------------- the local Hugging Face cache

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def hf_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The hub cache as huggingface_hub finds it: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def resolve_repo_id(ref: str, env: Mapping[str, str] | None = None) -> Path | None:
    """The snapshot folder of a repo id (``ORG/NAME``) in the local Hugging Face cache, or None.

    Never touches the network: ``models--ORG--NAME/refs/main`` names the revision when present, else the only
    snapshot (several snapshots and no ``refs/main`` is ambiguous: an error naming them).
    """
    if not _REPO_ID.match(ref) or ".." in ref:
        return None
    org, name = ref.split("/")
    repo = hf_cache_dir(env) / f"models--{org}--{name}"
    snaps = repo / "snapshots"
    try:
        if not snaps.is_dir():
            return None
        ref_file = repo / "refs" / "main"
        if ref_file.is_file():
            rev = limits.read_text(ref_file, limits.CONFIG, "Hugging Face cache ref").strip()
            if re.fullmatch(r"[0-9a-f]{40}", rev) and (snaps / rev).is_dir():
                return snaps / rev
        revs = sorted(p for p in snaps.iterdir() if p.is_dir())
    except OSError as e:
        raise InputError(f"Hugging Face cache {repo}: cannot read: {e.strerror or e}") from None
    if len(revs) == 1:
        return revs[0]
    if len(revs) > 1:
        shown = ", ".join(p.name[:12] for p in revs[:4])
        raise InputError(
            f"Hugging Face cache {repo}: {len(revs)} snapshots ({shown}) and no refs/main; give the snapshot folder"
        )
    return None


# --------------------------------------------------------------------------- a snapshot's shard index

INDEX_NAME = "model.safetensors.index.json"


def indexer_layers_shipped(tensors: Iterable[Tensor], num_layers: int) -> int:
    """Decoder layers (MTP excluded) with indexer weights among ``tensors``."""
    layers = set()
    for t in tensors:
        if ".indexer." in t.name:
            m = _LAYER.search(t.name)
            if m and int(m.group(1)) < num_layers:
                layers.add(int(m.group(1)))
    return len(layers)
