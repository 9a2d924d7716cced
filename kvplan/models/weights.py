"""Parameter groups of an MLA/DSA MoE model, for a weights-per-GPU estimate.

Counts follow the module shapes of DeepSeek-V3-style checkpoints (GLM-5.x reuses them):
- MLA attention per layer: q_a (h×q_lora) + q_b (q_lora × heads × (nope+rope)) [or q_proj h × heads ×
  (nope+rope) without q_lora] + kv_a (h × (kv_lora+rope)) + kv_b (kv_lora × heads × (nope+v)) +
  o (heads × v × h); the indexer adds wq_b (q_lora × index_heads × index_dim) + wk (h × index_dim) +
  weights_proj (h × index_heads) on every layer (checkpoints ship indexer weights for all layers).
- dense MLP on the first ``first_k_dense_replace`` layers: 3 × h × intermediate;
- routed experts: 3 × h × moe_intermediate each; shared experts the same; router: n_routed × h;
- embeddings and LM head: vocab × h each (one copy when tied);
- each MTP layer: one MoE decoder layer plus eh_proj (2h × h); it shares the embeddings and head.
Norm vectors are left out (under 0.01 % of the total).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvplan import record
from kvplan.errors import ConfigError
from kvplan.limits import MAX_LAYERS, MAX_PATTERN_LAYERS
from kvplan.models.arch import ModelArch, ParamGroup, Split
from kvplan.models.quant import Fields, resolve

if TYPE_CHECKING:  # the quantization reader is imported where a config is read (presets do not need it)
    from fractions import Fraction  # loaded where weights are first laid out: a preset's plan never does

    from kvplan.models.quant import Fail, Fields, Quantization, Scheme

FP8_BLOCK_ELEMS = 128 * 128
"""fp8 block quantization: one fp32 scale per 128×128 block."""


@record(kw_only=True)
class MoeShape:
    hidden_size: int
    num_layers: int
    num_mtp_layers: int
    num_attention_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    index_n_heads: int
    index_head_dim: int
    first_k_dense_replace: int
    intermediate_size: int
    n_routed_experts: int
    n_shared_experts: int
    moe_intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool

    def attention_modules(self) -> tuple[tuple[str, int, int], ...]:
        """(module under ``self_attn.``, output features, input features) of one layer's attention and indexer."""
        h, heads = self.hidden_size, self.num_attention_heads
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        q_lora = self.q_lora_rank
        q = (("q_a_proj", q_lora, h), ("q_b_proj", heads * qk, q_lora)) if q_lora else (("q_proj", heads * qk, h),)
        kv = (
            ("kv_a_proj_with_mqa", self.kv_lora_rank + self.qk_rope_head_dim, h),
            ("kv_b_proj", heads * (self.qk_nope_head_dim + self.v_head_dim), self.kv_lora_rank),
        )
        o = (("o_proj", h, heads * self.v_head_dim),)
        indexer: tuple[tuple[str, int, int], ...] = ()
        if self.index_n_heads and self.index_head_dim:
            q_in = self.q_lora_rank or h
            indexer = (
                ("indexer.wq_b", self.index_n_heads * self.index_head_dim, q_in),
                ("indexer.wk", self.index_head_dim, h),
                ("indexer.weights_proj", self.index_n_heads, h),
            )
        return (*q, *kv, *o, *indexer)

    def attention_params(self) -> int:
        return sum(rows * cols for _, rows, cols in self.attention_modules())

    def expert_params(self) -> int:
        return 3 * self.hidden_size * self.moe_intermediate_size


def param_groups(shape: MoeShape, *, checkpoint_dtype: str) -> tuple[ParamGroup, ...]:
    """Parameter groups with their checkpoint bytes per parameter and how they are split."""
    if checkpoint_dtype == "fp8":
        lin_num, lin_den = FP8_BLOCK_ELEMS + 4, FP8_BLOCK_ELEMS  # 1 B + 4 B per 128×128 block
    elif checkpoint_dtype == "nvfp4":
        lin_num, lin_den = 9, 16  # 4 bits + one fp8 scale per 16 values = 0.5 + 1/16 B
    elif checkpoint_dtype in ("bf16", "fp16"):
        lin_num, lin_den = 2, 1
    else:  # fp32
        lin_num, lin_den = 4, 1
    gemm = {"fp8": "fp8", "nvfp4": "fp4"}.get(checkpoint_dtype, "")  # ParamGroup.gemm
    lin: dict[str, Any] = {"bytes_per_param_num": lin_num, "bytes_per_param_den": lin_den, "gemm": gemm}
    moe_layers = shape.num_layers - shape.first_k_dense_replace
    h = shape.hidden_size
    embed = shape.vocab_size * h * (1 if shape.tie_word_embeddings else 2)
    mtp_layer = (
        shape.attention_params() + (shape.n_routed_experts + shape.n_shared_experts) * shape.expert_params() + 2 * h * h
    )
    moe_span = (shape.first_k_dense_replace, shape.num_layers)
    groups = [
        ParamGroup(
            name="attention",
            params=shape.attention_params() * shape.num_layers,
            **lin,
            split="attn",
            layer_span=(0, shape.num_layers),
        ),
        ParamGroup(
            name="dense_mlp",
            params=3 * h * shape.intermediate_size * shape.first_k_dense_replace,
            **lin,
            layer_span=(0, shape.first_k_dense_replace),
        ),
        ParamGroup(
            name="routed_experts",
            params=shape.n_routed_experts * shape.expert_params() * moe_layers,
            **lin,
            split="experts",
            layer_span=moe_span,
        ),
        ParamGroup(
            name="shared_experts",
            params=shape.n_shared_experts * shape.expert_params() * moe_layers,
            **lin,
            layer_span=moe_span,
        ),
        ParamGroup(
            name="router",
            params=shape.n_routed_experts * h * moe_layers,
            bytes_per_param_num=2,
            split="none",
            layer_span=moe_span,
        ),
        ParamGroup(name="embeddings", params=embed, bytes_per_param_num=2),
        ParamGroup(
            name="mtp",
            params=mtp_layer * shape.num_mtp_layers,
            **lin,
            split="experts",
        ),
    ]
    return tuple(g for g in groups if g.params > 0)


# --------------------------------------------------------------------------- any family, any quantization


@record(kw_only=True)
class HeadsGroup(ParamGroup):
    """An attention group split by heads, so over at most ``heads`` ranks.

    The k/v projections of a GQA model with fewer kv heads than attention ranks are replicated: each rank loads
    ``max(kv_heads / attn_tp, 1)`` heads' worth (SGLang and vLLM ``QKVParallelLinear``: ``num_kv_head_replicas``).
    """

    heads: int

    def bytes_per_gpu(self, split: Split) -> int:
        if self.split == "attn" and split.attention > self.heads:
            split = replace(split, attention=self.heads)
        return super().bytes_per_gpu(split)


@record(kw_only=True)
class BufferGroup(ParamGroup):
    """A buffer the engine builds on every GPU as it loads the model: not a checkpoint parameter (``params`` 0).

    The rotary cos/sin cache, ``max_position_embeddings`` × rotary dim in the model dtype (vLLM and SGLang
    ``RotaryEmbedding.cos_sin_cache``, one per process): vLLM's "Model loading took" counts it (32 MiB for
    Llama-3.1's 131,072 positions × 128).
    """

    buffer_bytes: int

    def bytes_per_gpu(self, split: Split) -> int:
        return self.buffer_bytes

    def in_dtype(self, stored: int, loaded: int) -> BufferGroup:
        """Built in the model dtype (``get_rope``: dtype None is torch's default, the model dtype at load)."""
        return replace(self, buffer_bytes=self.buffer_bytes * loaded // stored)


@record(kw_only=True)
class WeightsModel:
    """The parameter groups of a checkpoint, the quantization they were counted in, and what was assumed."""

    groups: tuple[ParamGroup, ...]
    family: str
    """'dense GQA', 'GQA MoE' or 'MLA MoE' (DSA when it has an indexer); '' when the config has no hidden_size."""
    quantization: Quantization

    @property
    def assumptions(self) -> tuple[str, ...]:
        """Said on the weights line: an unknown quant_method or dtype planned as bf16, never silently."""
        return self.quantization.assumptions

    @property
    def summary(self) -> str:
        """One line for the weights line: the schemes, e.g. 'fp8: fp8 e4m3, fp32 scale per 128×128 block; …'."""
        return self.quantization.summary

    @property
    def total_params(self) -> int:
        return sum(g.params for g in self.groups)


class _Groups:
    """Parameters and checkpoint bytes per group, each module in the scheme its name resolves to.

    Modules are counted by (group, shape, scheme) and sized once per distinct key, so a model's size costs its
    distinct layer kinds, not its layers.
    """

    def __init__(self, quant: Quantization):
        self.quant = quant
        self.order: dict[str, tuple[str, int]] = {}
        """group -> (split, heads), in the order groups first appear."""
        self.counts: dict[tuple[str, Scheme | None, int, int], int] = {}
        """(group, scheme or None for the checkpoint dtype, rows, cols) -> how many such matrices."""
        self.buffers: dict[str, Fraction] = {}
        self.extras: list[ParamGroup] = []
        """Groups a family builds whole (kvplan.models.mxfp4_moe.Mxfp4Experts), kept as built."""
        self.spans: dict[str, tuple[int, int]] = {}
        """group -> the decoder layers [first, end) its named modules sit on (a pipeline stage's share)."""
        self._uniform = quant.uniform

    def linear(
        self, group: str, split: str, module: str, rows: int, cols: int, *, count: int = 1, heads: int = 0
    ) -> None:
        """``count`` matrices of ``rows`` outputs × ``cols`` inputs, stored as ``module`` resolves."""
        if rows > 0 and cols > 0 and count > 0:
            self._count(group, split, heads, self.quant.scheme_for("" if self._uniform else module), rows, cols, count)

    def plain(self, group: str, split: str, params: int, *, heads: int = 0, scheme: Scheme | None = None) -> None:
        """Not a quantized linear (embeddings, LM head, routers, norms, biases): the checkpoint dtype, or
        ``scheme`` for a tensor the checkpoint stores in another (DeepSeek-V4's fp32 hyper-connection mixes)."""
        if params > 0:
            self._count(group, split, heads, scheme, params, 1, 1)

    def buffer(self, group: str, size: Fraction) -> None:
        """A load-time buffer of ``size`` bytes on every GPU (no parameters)."""
        if size > 0:
            self.buffers[group] = self.buffers.get(group, 0) + size

    def extra(self, group: ParamGroup) -> None:
        """A group the family sizes itself (its bytes depend on more than its parameters)."""
        self.extras.append(group)

    def span(self, layers: Iterable[int], *groups: str) -> None:
        """The decoder layers the ``groups`` sit on, as [first, end) (a pipeline stage holds its share of them)."""
        ids = list(layers)
        if ids:
            for g in groups:
                self.spans[g] = (min(ids), max(ids) + 1)

    def _count(self, group: str, split: str, heads: int, scheme: Scheme | None, rows: int, cols: int, n: int) -> None:
        self.order.setdefault(group, (split, heads))
        key = (group, scheme, rows, cols)
        self.counts[key] = self.counts.get(key, 0) + n

    def groups(self) -> tuple[ParamGroup, ...]:
        params: dict[str, int] = {}
        total: dict[str, Fraction] = {}
        natural: dict[str, tuple[int, int] | None] = {}
        """A group stored in one scheme keeps its natural fraction (fp8 blocks 16,388/16,384, as param_groups)."""
        gemm: dict[str, str] = {}  # the GEMM format of a group's quantized schemes where they agree (ParamGroup.gemm)
        for (group, scheme, rows, cols), n in self.counts.items():
            s = scheme or self.quant.plain
            params[group] = params.get(group, 0) + rows * cols * n
            total[group] = total.get(group, 0) + s.bytes_for(rows, cols, n)
            nat = None if scheme is not None and s.has_extras else s.natural
            if natural.setdefault(group, nat) != nat:
                natural[group] = None
            if s.weight_bits < 16 and gemm.setdefault(group, s.gemm) != s.gemm:
                gemm[group] = ""
        out: list[ParamGroup] = []
        for name, (split, heads) in self.order.items():
            per = total[name] / params[name]
            num, den = natural.get(name) or (per.numerator, per.denominator)
            kw: dict[str, Any] = {"name": name, "params": params[name], "bytes_per_param_num": num,
                                  "bytes_per_param_den": den, "split": split, "layer_span": self.spans.get(name),
                                  "gemm": gemm.get(name, "")}  # fmt: skip
            out.append(HeadsGroup(**kw, heads=heads) if heads else ParamGroup(**kw))
        for name, size in self.buffers.items():
            out.append(
                BufferGroup(name=name, params=0, bytes_per_param_num=0, buffer_bytes=math.ceil(size), split="none")
            )
        return (*out, *self.extras)


def param_groups_from_hf(
    config: Mapping[str, Any], source: str, *, fail: Fail | None = None, mla: MoeShape | None = None
) -> WeightsModel:
    """Parameter groups of a Hugging Face ``config.json``, in the checkpoint's own storage, for weights per GPU.

    Families, recognised from the keys (the architecture check is the loader's):
    - MLA (``kv_lora_rank``; DeepSeek-V2/V3/R1, Kimi-K2, and the DSA models with an indexer): the MoeShape
      groups above, each module in its scheme; ``mla`` passes the shape the loader already built;
    - GQA / MHA / MQA (Llama, Mistral, Qwen2, Qwen3): per layer q + o (``attention``, attention TP) and k + v
      (``kv_proj``, at most ``num_key_value_heads`` ways: replicated beyond), a gated MLP 3 × h × intermediate;
    - GQA MoE: Mixtral (``num_local_experts``, experts of ``intermediate_size``), Qwen3-MoE (``num_experts``,
      ``moe_intermediate_size``, MoE on layer i iff i is not in ``mlp_only_layers`` and (i + 1) %
      ``decoder_sparse_step`` == 0), GLM-4.5 (``first_k_dense_replace`` dense layers, ``n_routed_experts`` +
      ``n_shared_experts``, ``num_nextn_predict_layers`` MTP layers: one MoE decoder layer + eh_proj 2h × h);
      routers n_experts × h per MoE layer, in the checkpoint dtype.
    Embeddings and the LM head: vocab × h each, one copy when ``tie_word_embeddings``. GQA families also count
    their norms (2 a layer + the final one, Qwen3's q/k norms: replicated, 'none'), q/k/v biases
    (``attention_bias``; Qwen2 always) and the rotary cos/sin cache (:class:`BufferGroup`); the MLA groups stay
    exactly :func:`param_groups`' (every DSA golden keeps its weights). Splits: 'attn' attention, 'tp' dense
    MLP, shared experts and embeddings (vocab parallel), 'experts' routed experts and MTP, 'none' routers.
    Checked against vLLM's "Model loading took" of eight real startups (tests/models/test_weights_measured.py).

    No ``hidden_size``: no groups (the loader then asks for ``weights_per_gpu``). Bad values raise through
    ``fail`` (a key path and a message; reader.Reader.fail fits) or a ConfigError naming ``source``.

    >>> w = param_groups_from_hf({"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    ...     "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
    ...     "torch_dtype": "bfloat16"}, "llama-3.1-8b")
    >>> w.total_params, w.summary
    (8030261248, 'bf16 checkpoint')
    """
    quant = resolve(config, source, fail)

    def bad(path: tuple[str | int, ...], message: str) -> ConfigError:
        if fail is not None:
            fail(path, message)
        return ConfigError(message, source=source, key=".".join(str(p) for p in path))

    c = Fields(config, (), bad)
    if c.integer("hidden_size", 0) == 0:
        return WeightsModel(groups=(), family="", quantization=quant)
    layers = c.integer("num_hidden_layers", 0, maximum=MAX_LAYERS)
    layers += c.integer("num_nextn_predict_layers", 0, minimum=0, maximum=MAX_LAYERS)
    if not quant.uniform and layers > MAX_PATTERN_LAYERS:
        raise bad(
            ("num_hidden_layers",),
            f"{layers:,} layers (+ MTP) with a per-module quantization_config: kvplan matches module names for at"
            f" most {MAX_PATTERN_LAYERS:,} layers",
        )
    acc = _Groups(quant)
    family_groups = hybrid_groups(_first_architecture(config))
    if family_groups is not None:
        family = family_groups(c, acc)
    elif mla is not None or config.get("kv_lora_rank") is not None:
        shape = mla or _mla_shape(c)
        _mla_groups(shape, acc)
        family = "DSA MoE" if shape.index_n_heads and shape.index_head_dim else "MLA MoE"
        if not shape.n_routed_experts:
            family = family.replace(" MoE", "")
    else:
        family = _gqa_groups(c, acc, _first_architecture(config))
    return WeightsModel(groups=acc.groups(), family=family, quantization=quant)


HYBRID_GROUP_MODULES = {
    "Qwen3NextForCausalLM": "kvplan.models.params_qwen3_next",
    "Qwen3_5ForConditionalGeneration": "kvplan.models.params_qwen3_next",  # Qwen3.5 dense: the same modules
    "Qwen3_5ForCausalLM": "kvplan.models.params_qwen3_next",
    "Qwen3_5MoeForConditionalGeneration": "kvplan.models.params_qwen3_next",
    "Qwen3_5MoeForCausalLM": "kvplan.models.params_qwen3_next",
    "KimiLinearForCausalLM": "kvplan.models.params_kimi_linear",
    "DeepseekV4ForCausalLM": "kvplan.models.params_deepseek_v4",
    "Glm5NextForConditionalGeneration": "kvplan.models.params_glm5_next",
    "GptOssForCausalLM": "kvplan.models.params_gpt_oss",
    "Grok1ForCausalLM": "kvplan.models.params_grok",  # four norms a layer, Grok-2's residual MLP beside the experts
}
"""Hybrid architectures whose parameters a family module counts: ``groups(c, acc) -> family`` adds every module
to ``acc`` (linears in the scheme their names resolve to, plain tensors in the checkpoint dtype) and names the
family. A module not written yet leaves the architecture without groups (the loader asks for weights_per_gpu)."""


def hybrid_groups(architecture: str) -> Callable[[Fields, _Groups], str] | None:
    """The family function of a hybrid architecture (:data:`HYBRID_GROUP_MODULES`), None when there is none."""
    module = HYBRID_GROUP_MODULES.get(architecture)
    if module is None:
        return None
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        return None
    fn: Callable[[Fields, _Groups], str] = found.groups
    return fn


def _mla_shape(c: Fields) -> MoeShape:
    return MoeShape(
        hidden_size=c.required("hidden_size"),
        num_layers=c.required("num_hidden_layers", maximum=MAX_LAYERS),
        num_mtp_layers=c.integer("num_nextn_predict_layers", 0, minimum=0, maximum=MAX_LAYERS),
        num_attention_heads=c.required("num_attention_heads"),
        q_lora_rank=c.integer("q_lora_rank", 0, minimum=0) or None,
        kv_lora_rank=c.required("kv_lora_rank"),
        qk_nope_head_dim=c.integer("qk_nope_head_dim", 128),
        qk_rope_head_dim=c.required("qk_rope_head_dim"),
        v_head_dim=c.integer("v_head_dim", 128),
        index_n_heads=c.required("index_n_heads") if c.integer("index_topk", 0, minimum=0) else 0,  # vLLM: no default
        index_head_dim=c.integer("index_head_dim", 128 if c.integer("index_topk", 0, minimum=0) else 0),
        first_k_dense_replace=c.required("first_k_dense_replace", minimum=0),  # these 5 required: V2 / V3 differ
        intermediate_size=c.required("intermediate_size"),
        n_routed_experts=c.required("n_routed_experts"),
        n_shared_experts=c.integer("n_shared_experts", 0, minimum=0),
        moe_intermediate_size=c.required("moe_intermediate_size"),
        vocab_size=c.required("vocab_size"),
        tie_word_embeddings=c.flag("tie_word_embeddings", False),
    )


def _mla_groups(s: MoeShape, acc: _Groups) -> None:
    """The groups of :func:`param_groups` (same names, order, counts and splits), each module in its scheme."""
    h, ffn = s.hidden_size, s.moe_intermediate_size
    mlp = (("gate_proj", ffn, h), ("up_proj", ffn, h), ("down_proj", h, ffn))

    def attention(group: str, split: str, p: str) -> None:
        for mod, rows, cols in s.attention_modules():
            acc.linear(group, split, f"{p}self_attn.{mod}", rows, cols)

    def experts(routed: str, shared: str, shared_split: str, p: str) -> None:
        for m, rows, cols in mlp:
            acc.linear(routed, "experts", f"{p}mlp.experts.0.{m}", rows, cols, count=s.n_routed_experts)
            acc.linear(shared, shared_split, f"{p}mlp.shared_experts.{m}", rows, cols, count=s.n_shared_experts)

    inter = s.intermediate_size
    for i in range(s.num_layers):
        p = f"model.layers.{i}."
        attention("attention", "attn", p)
        if i < s.first_k_dense_replace:
            for m, rows, cols in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                acc.linear("dense_mlp", "tp", f"{p}mlp.{m}", rows, cols)
        else:
            experts("routed_experts", "shared_experts", "tp", p)
            acc.plain("router", "none", s.n_routed_experts * h)
    k = min(s.first_k_dense_replace, s.num_layers)
    acc.span(range(s.num_layers), "attention")
    acc.span(range(k), "dense_mlp")
    acc.span(range(k, s.num_layers), "routed_experts", "shared_experts", "router")
    # param_groups' order: attention, dense_mlp, routed, shared, router, embeddings, mtp
    acc.plain("embeddings", "tp", s.vocab_size * h * (1 if s.tie_word_embeddings else 2))
    for k in range(s.num_mtp_layers):
        p = f"model.layers.{s.num_layers + k}."
        attention("mtp", "experts", p)
        experts("mtp", "mtp", "experts", p)
        acc.linear("mtp", "experts", f"{p}eh_proj", h, 2 * h)


def gqa_heads(c: Fields) -> tuple[int, int]:
    """``num_attention_heads`` and ``num_key_value_heads`` (default: as many), the first a multiple of the second."""
    heads = c.required("num_attention_heads")
    kv_heads = c.integer("num_key_value_heads", heads)
    if kv_heads > heads or heads % kv_heads:
        raise c.bad(
            ("num_attention_heads",),
            f"{heads} attention heads are not a multiple of num_key_value_heads {kv_heads}",
        )
    return heads, kv_heads


def _gqa_groups(c: Fields, acc: _Groups, architecture: str) -> str:
    h = c.required("hidden_size")
    layers = c.required("num_hidden_layers", maximum=MAX_LAYERS)
    heads, kv_heads = gqa_heads(c)
    head_dim = c.integer("head_dim", h // heads)
    vocab = c.integer("vocab_size", 0, minimum=0)
    mixtral = c.integer("num_local_experts", 0, minimum=0)
    qwen = c.integer("num_experts", 0, minimum=0)
    glm = c.integer("n_routed_experts", 0, minimum=0)
    experts = mixtral or qwen or glm
    inter = c.integer("intermediate_size", 0, minimum=0)
    moe_inter = inter if mixtral else c.integer("moe_intermediate_size", 0, minimum=0)
    if experts and not moe_inter:
        raise c.bad(("moe_intermediate_size",), "missing (required for a MoE model)")
    # required: Glm4MoeConfig defaults them to 1 and 1, DeepseekV2Config to None and 0 (GLM-4.5's config names both)
    shared = c.required("n_shared_experts", minimum=0) if glm else 0
    dense_first = c.required("first_k_dense_replace", minimum=0) if glm else 0
    step = c.integer("decoder_sparse_step", 1) if qwen else 1
    only = _int_set(c, "mlp_only_layers") if qwen else frozenset()
    mtp = c.integer("num_nextn_predict_layers", 0, minimum=0, maximum=MAX_LAYERS)
    bias = c.flag("attention_bias", architecture.startswith("Qwen2"))  # Qwen2 always has q/k/v biases
    qk_norm = architecture.startswith("Qwen3")  # Qwen3 and Qwen3-MoE: q_norm and k_norm of head_dim

    def is_moe(i: int) -> bool:
        return bool(experts) and i >= dense_first and i not in only and (i + 1) % step == 0

    if not all(is_moe(i) for i in range(layers)) and not inter:
        raise c.bad(("intermediate_size",), "missing (required for the dense MLP layers)")
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    if mixtral:
        moe = "block_sparse_moe"
        names = (("w1", moe_inter, h), ("w3", moe_inter, h), ("w2", h, moe_inter))
    else:
        moe = "mlp"
        names = (("gate_proj", moe_inter, h), ("up_proj", moe_inter, h), ("down_proj", h, moe_inter))
    shared_names = (("gate_proj", moe_inter, h), ("up_proj", moe_inter, h), ("down_proj", h, moe_inter))

    def attention(p: str, group: str, kv: str, split: str) -> None:
        cap = kv_heads if kv == "kv_proj" else 0
        acc.linear(group, split, f"{p}self_attn.q_proj", q_out, h)
        acc.linear(group, split, f"{p}self_attn.o_proj", h, q_out)
        acc.linear(kv, split, f"{p}self_attn.k_proj", kv_out, h, heads=cap)
        acc.linear(kv, split, f"{p}self_attn.v_proj", kv_out, h, heads=cap)
        if bias:
            acc.plain(group, split, q_out)
            acc.plain(kv, split, 2 * kv_out, heads=cap)

    def moe_mlp(p: str, routed: str, shr: str, shr_split: str) -> None:
        for m, rows, cols in names:
            acc.linear(routed, "experts", f"{p}{moe}.experts.0.{m}", rows, cols, count=experts)
        for m, rows, cols in shared_names:
            acc.linear(shr, shr_split, f"{p}mlp.shared_experts.{m}", rows, cols, count=shared)

    for i in range(layers):
        p = f"model.layers.{i}."
        attention(p, "attention", "kv_proj", "attn")
        if is_moe(i):
            moe_mlp(p, "routed_experts", "shared_experts", "tp")
            acc.plain("router", "none", experts * h)
        else:
            for m, rows, cols in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                acc.linear("dense_mlp", "tp", f"{p}mlp.{m}", rows, cols)
    acc.span(range(layers), "attention", "kv_proj")
    moe_ids = [i for i in range(layers) if is_moe(i)]
    acc.span(moe_ids, "routed_experts", "shared_experts", "router")
    if len(moe_ids) < layers:
        acc.span((i for i in range(layers) if not is_moe(i)), "dense_mlp")
    acc.plain("embeddings", "tp", vocab * h * (1 if c.flag("tie_word_embeddings", False) else 2))
    # input and post-attention RMSNorm a layer, the final norm (+ Qwen3's q/k norms): replicated on every rank
    acc.plain("norms", "none", (2 * layers + 1) * h + (2 * head_dim * layers if qk_norm else 0))
    for k in range(mtp if experts else 0):
        p = f"model.layers.{layers + k}."
        attention(p, "mtp", "mtp", "experts")
        moe_mlp(p, "mtp", "mtp", "experts")
        acc.linear("mtp", "experts", f"{p}eh_proj", h, 2 * h)
    positions = c.integer("max_position_embeddings", 0, minimum=0)
    rotary_dim = int(head_dim * _factor(c, "partial_rotary_factor"))
    acc.buffer("rotary_cache", positions * rotary_dim * acc.quant.plain.bytes_per_param)
    return "GQA MoE" if experts else "dense GQA"


def _factor(c: Fields, key: str) -> float:
    """A fraction in (0, 1] (``partial_rotary_factor``); 1 when absent."""
    v = c.data.get(key)
    if v is None:
        return 1.0
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
        raise c.bad((key,), f"expected a number in (0, 1], got {v!r}"[:120])
    return float(v)


def _int_set(c: Fields, key: str) -> frozenset[int]:
    v = c.data.get(key)
    if v is None:
        return frozenset()
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise c.bad((key,), "expected a list of layer numbers")
    return frozenset(v)


def _first_architecture(config: Mapping[str, Any]) -> str:
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return archs if isinstance(archs, str) else ""


GROUPS_SAID = "parameter groups (no per-tensor layout)"


def as_parameter_groups(arch: ModelArch) -> ModelArch:
    """``arch`` with its weights line saying they are the parameter-group estimate (a preset, or a config kvplan
    cannot lay out per tensor), unless it has no groups at all."""
    if not arch.param_groups or GROUPS_SAID in arch.weights_summary:
        return arch
    said = f"{arch.weights_summary}; {GROUPS_SAID}" if arch.weights_summary else GROUPS_SAID
    return replace(arch, weights_summary=said)
