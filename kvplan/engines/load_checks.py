"""The refusals an engine raises while it builds the model, before any memory is profiled (pure).

Both engines split each layer's weights by the deployment's layout while constructing the model, and refuse to
start when a slice is not whole. Each rule below is one such check, with the engine's file and function and its
message verbatim (filled with the model's numbers); they run in the engine's construction order (config checks,
then layer 0's attention, then layer 0's MLP, dense or MoE), and the first that fails is the engine's error.
``plan_pool`` (kvplan.engines) sets it as the plan's ``startup_error``; admit re-plans its remedies (ep, another
tp) and fit prunes the candidate with the same message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kvplan import record
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.models.shards import Block, ShardDims
from kvplan.versions import sglang_rules

ENGINE = {"sglang": "SGLang", "vllm": "vLLM"}


# The splits and the refusals they meet:
#
# The splits (``Split``): attention over attention TP = tp / dp_attention; routed experts over
# - SGLang: moe_ep = ep, moe_tp = tp / ep (``parallel_state`` ``get_moe_expert_parallel_world_size`` /
#   ``get_moe_tensor_parallel_world_size``);
# - vLLM: ``--enable-expert-parallel`` (kvplan's ep > 1) puts whole experts on every rank (moe_tp 1, EP over all
#   tp ranks); without it each expert is split tp ways (``FusedMoEParallelConfig.make``).
#
# Not modelled: SGLang's ROCm aiter padding (``SGLANG_USE_AITER`` skips the MoE block check when the padding is a
# block: an environment switch, so AMD GPUs are not refused here); SGLang's dense MLP under DP attention (its
# row-parallel check compares with the whole TP size); shared experts; fp8 blocks in compressed-tensors or
# modelopt checkpoints; hybrid models (kvplan.models.hybrid builds no ShardDims); vLLM releases before
# vllm-project/vllm#30836, which also checked merged slices (the same verdict, another projection's message).
@record
class Layout:
    """The split sizes the engine's loader divides by."""

    engine: str
    tp: int
    """The TP world size the checks compare with (``get_tensor_model_parallel_world_size``): SGLang's whole tp;
    vLLM's TP group, tp / dp_attention (``--data-parallel-size`` replicates it)."""
    attn_tp: int
    moe_tp: int
    moe_ep: int
    dp_attention: int
    vendor: str
    moe_precheck: bool = False
    """SGLang's ModelRunner checks a block-quantized MoE before building the model (versions.py)."""

    @classmethod
    def of(cls, dep: Deployment) -> Layout:
        attn_tp = max(dep.tp // max(dep.dp_attention, 1), 1)
        if dep.engine == "vllm":  # --enable-expert-parallel: EP over every rank, experts whole
            moe_tp, moe_ep = (1, dep.tp) if dep.ep > 1 else (dep.tp, 1)
        else:
            moe_ep = max(dep.ep, 1)
            moe_tp = max(dep.tp // moe_ep, 1)
        world = attn_tp if dep.engine == "vllm" else dep.tp
        precheck = dep.engine == "sglang" and sglang_rules(dep.engine_version).moe_quant_precheck
        return cls(dep.engine, world, attn_tp, moe_tp, moe_ep, max(dep.dp_attention, 1), dep.gpu.vendor, precheck)


@record
class Refusal:
    rule: str
    """'heads', 'kv heads', 'experts', 'expert width', 'expert blocks', 'attention blocks', 'dense blocks'."""
    message: str
    """The engine's own message, with the numbers it would print."""
    where: str
    """The engine file and function that raises it."""
    experts: bool = False
    """Another split of the experts (another ep) may avoid it."""

    def __str__(self) -> str:
        return f"{self.message} ({self.where})"


Rule = Callable[[ShardDims, Layout], Iterator[Refusal]]


def _sglang_ep_wider_than_tp(s: ShardDims, lay: Layout) -> Iterator[Refusal]:
    """SGLang launches each TP rank with ``moe_ep_rank = tp_rank // (tp_size // ep_size)``
    (``srt/entrypoints/engine.py``, the scheduler processes): an ep above tp divides by 0 before any model is built."""
    if lay.engine == "sglang" and lay.moe_ep > lay.tp:
        yield Refusal(
            "experts",
            f"ZeroDivisionError: integer division or modulo by zero (moe_ep_rank = tp_rank // (tp_size {lay.tp} // "
            f"ep_size {lay.moe_ep}))",
            "sglang/srt/entrypoints/engine.py, the scheduler launch",
            experts=True,
        )


def _sglang_moe_precheck(s: ShardDims, lay: Layout) -> Iterator[Refusal]:
    """SGLang 0.5.4-0.5.5 ``ModelRunner.check_quantized_moe_compatibility`` (model_executor/model_runner.py), run
    before the model is built when the config has ``weight_block_size`` and ``moe_intermediate_size`` (skipped under
    ROCm aiter padding, an environment switch: not on AMD here)."""
    if not lay.moe_precheck or s.moe_block_precheck is None or lay.vendor == "amd":
        return
    where = "sglang/srt/model_executor/model_runner.py ModelRunner.check_quantized_moe_compatibility"
    moe, bn = s.moe_block_precheck
    tp, ep = lay.tp, lay.moe_ep
    if tp % ep:
        yield Refusal("experts", f"tp_size {tp} must be divisible by ep_size {ep}", where)
        return
    moe_tp = tp // ep
    if moe % moe_tp:
        msg = (
            f"moe_intermediate_size {moe} must be divisible by moe_tp_size ({moe_tp}) which is tp_size ({tp}) "
            f"divided by moe_ep_size ({ep})."
        )
        yield Refusal("expert width", msg, where, experts=True)
    elif (moe // moe_tp) % bn:
        msg = (
            f"For quantized MoE models, please make sure (moe_intermediate_size={moe} / moe_tp_size={moe_tp}) % "
            f"weight_block_size_n={bn} == 0 where moe_tp_size is equal to tp_size ({tp}) divided by ep_size ({ep}). "
            "You can fix this by setting arguments `--tp` and `--ep` correctly."
        )
        yield Refusal("expert blocks", msg, where, experts=True)


def _heads(s: ShardDims, lay: Layout) -> Iterator[Refusal]:
    if s.num_attention_heads % lay.attn_tp == 0:
        return
    if lay.engine == "vllm":
        yield Refusal(
            "heads",
            f"Total number of attention heads ({s.num_attention_heads}) must be divisible by tensor parallel size "
            f"({lay.attn_tp}).",
            "vllm/config/model.py ModelConfig.verify_with_parallel_config",
        )
    else:
        mla = not s.num_kv_heads  # the MLA attention names it differently (deepseek_v2.py)
        cond = "num_heads % attn_tp_size == 0" if mla else "self.total_num_heads % attn_tp_size == 0"
        yield Refusal(
            "heads",
            f"AssertionError: assert {cond} ({s.num_attention_heads} heads, attention tp {lay.attn_tp})",
            "sglang/srt/models/deepseek_v2.py DeepseekV2AttentionMLA.__init__"
            if mla
            else "sglang/srt/models/<model>.py, the attention's __init__ (e.g. qwen3_moe.py Qwen3MoeAttention)",
        )


def _kv_heads(s: ShardDims, lay: Layout) -> Iterator[Refusal]:
    """GQA kv heads are split when there are at least as many as ranks, else replicated: either way one must
    divide the other (vLLM ``QKVParallelLinear.__init__``: ``divide`` -> ``ensure_divisibility``; SGLang asserts
    it in the model's attention)."""
    kv, t = s.num_kv_heads, lay.attn_tp
    if not kv or (kv % t == 0 if kv >= t else t % kv == 0):
        return
    num, den = (kv, t) if kv >= t else (t, kv)
    if lay.engine == "vllm":
        yield Refusal(
            "kv heads",
            f"AssertionError: {num} is not divisible by {den}",
            "vllm/model_executor/layers/linear.py QKVParallelLinear.__init__ (vllm/distributed/utils.py "
            "ensure_divisibility)",
        )
    else:
        cond = (
            "self.total_num_kv_heads % attn_tp_size == 0" if kv >= t else "attn_tp_size % self.total_num_kv_heads == 0"
        )
        yield Refusal(
            "kv heads",
            f"AssertionError: assert {cond} ({kv} kv heads, attention tp {t})",
            "sglang/srt/models/<model>.py, the attention's __init__ (e.g. qwen3_moe.py Qwen3MoeAttention)",
        )


_VLLM_LINEAR = "vllm/model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape"
_SGL_LINEAR = "sglang/srt/layers/quantization/fp8.py Fp8LinearMethod.validate_block_quant_shapes"


def _column(rule: str, block: Block, sizes: tuple[int, ...], lay: Layout, t: int) -> Iterator[Refusal]:
    """A column-parallel projection's output slices (split t ways), each a whole number of block_n rows.

    A merged projection (qkv, gate_up: several slices): SGLang checks every slice at any tp; vLLM allows slices
    that are not whole (``ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch``, vllm-project/vllm#30836).
    A single one (MLA's q_b_proj, kv_b_proj): both check it once it is split (t > 1; SGLang compares t with its
    whole TP size, so not under DP attention).
    """
    merged = len(sizes) > 1
    if merged and lay.engine == "vllm":
        return
    if not merged and (t == 1 or (lay.engine == "sglang" and t != lay.tp)):
        return
    for size in sizes:
        if size % block[0]:
            yield Refusal(
                rule,
                f"Weight output_partition_size = {size} is not divisible by weight quantization block_n = {block[0]}.",
                _VLLM_LINEAR if lay.engine == "vllm" else _SGL_LINEAR,
            )
            return


def _row(rule: str, block: Block, size: int, lay: Layout, t: int) -> Iterator[Refusal]:
    """A row-parallel projection's input slice (split t ways), a whole number of block_k columns."""
    if t > 1 and size % block[1]:
        yield Refusal(
            rule,
            f"Weight input_size_per_partition = {size} is not divisible by weight quantization block_k = {block[1]}.",
            _VLLM_LINEAR if lay.engine == "vllm" else _SGL_LINEAR,
        )


def _attention_blocks(s: ShardDims, lay: Layout) -> Iterator[Refusal]:
    """Full attention's qkv_proj (merged: q, k, v slices) and o_proj (row: heads × head_dim inputs); MLA's
    q_b_proj, kv_b_proj (single columns) and o_proj, in the order the attention builds them."""
    if s.attention_block is None or s.num_attention_heads % lay.attn_tp:
        return
    t, b = lay.attn_tp, s.attention_block
    row_t = t if t == lay.tp else 1  # SGLang's row check compares the split with its whole TP size
    if not s.head_dim:
        nope, rope, v = s.mla_head_dims
        h = s.num_attention_heads // t
        yield from _column("attention blocks", b, (h * (nope + rope),), lay, t)
        yield from _column("attention blocks", b, (h * (nope + v),), lay, t)
        yield from _row("attention blocks", b, h * v, lay, row_t)
        return
    q = s.num_attention_heads // t * s.head_dim
    kv = max(s.num_kv_heads // t, 1) * s.head_dim
    yield from _column("attention blocks", b, (q, kv, kv), lay, t)
    yield from _row("attention blocks", b, q, lay, row_t)


def _dense_blocks(s: ShardDims, lay: Layout) -> Iterator[Refusal]:
    """The dense MLP: gate_up_proj (merged column: two slices of intermediate / tp) and down_proj (row). Under SGLang
    DP attention too: DeepseekV2DecoderLayer splits the dense MLP over the whole TP group unless moe_dense_tp_size
    is 1 (enable_moe_dense_fully_dp), which only the prefill context-parallel and DWDP modes set."""
    if s.dense_block is None or not s.dense_intermediate:
        return
    t = lay.tp
    if s.dense_intermediate % t:
        return  # not a whole split: the engine's divide() asserts first; kvplan does not model that message
    part = s.dense_intermediate // t
    yield from _column("dense blocks", s.dense_block, (part, part), lay, t)
    yield from _row("dense blocks", s.dense_block, part, lay, t)


def _experts(s: ShardDims, lay: Layout) -> Iterator[Refusal]:
    """The routed experts: whole experts per EP rank (SGLang), the expert width per MoE-TP rank, and, in fp8
    blocks, that width a whole number of blocks (``Fp8MoEMethod.create_weights``, the same check in both)."""
    if not s.num_experts:
        return
    sgl_moe = "sglang/srt/layers/moe/fused_moe_triton/layer.py FusedMoE.__init__"
    if lay.engine == "sglang" and s.num_experts % lay.moe_ep:
        yield Refusal(
            "experts",
            f"AssertionError: assert num_experts % self.moe_ep_size == 0 ({s.num_experts} experts, ep {lay.moe_ep})",
            sgl_moe,
            experts=True,
        )
        return
    # vLLM spreads experts unevenly over EP ranks (``determine_expert_map``: the first ``num_experts % ep`` ranks
    # get one more), so only SGLang refuses above; both assert the expert width splits over the MoE-TP ranks
    if s.expert_intermediate % lay.moe_tp:
        cond, where = (
            ("intermediate_size % self.moe_tp_size == 0", sgl_moe)
            if lay.engine == "sglang"
            else ("self.intermediate_size % tp_size == 0", "vllm/model_executor/layers/fused_moe/config.py")
        )
        yield Refusal(
            "expert width",
            f"AssertionError: assert {cond} ({s.expert_intermediate}, moe tp {lay.moe_tp})",
            where,
            experts=True,
        )
        return
    b = s.expert_block
    if b is None or (lay.engine == "sglang" and lay.vendor == "amd"):
        return
    part = s.expert_intermediate // lay.moe_tp
    where = (
        "vllm/model_executor/layers/quantization/fp8.py Fp8MoEMethod.create_weights"
        if lay.engine == "vllm"
        else "sglang/srt/layers/quantization/fp8.py Fp8MoEMethod.create_weights"
    )
    if part % b[0]:
        msg = (
            f"The output_size of gate's and up's weight = {part} is not divisible by weight quantization "
            f"block_n = {b[0]}."
        )
        yield Refusal("expert blocks", msg, where, experts=True)
    elif lay.tp > 1 and part % b[1]:  # the TP world size, not the MoE TP size, in both engines
        msg = f"The input_size of down's weight = {part} is not divisible by weight quantization block_k = {b[1]}."
        yield Refusal("expert blocks", msg, where, experts=True)


def _mlp(s: ShardDims, lay: Layout) -> Iterator[Refusal]:
    """Layer 0's MLP first: a dense first layer refuses before any MoE layer is built."""
    order = (_dense_blocks, _experts) if s.first_layer_dense else (_experts, _dense_blocks)
    for rule in order:
        yield from rule(s, lay)


RULES: tuple[Rule, ...] = (_sglang_ep_wider_than_tp, _sglang_moe_precheck, _heads, _kv_heads, _attention_blocks, _mlp)
"""In the engine's order: SGLang's launch (ep above tp), SGLang 0.5.4-0.5.5's MoE pre-check, the heads (vLLM at
config time, SGLang in the attention), then layer 0's weights."""


def load_refusal(arch: ModelArch, dep: Deployment) -> Refusal | None:
    """The first refusal the engine raises building this model on this layout, or None (loads)."""
    if arch.shards is None:
        return None
    lay = Layout.of(dep)
    for rule in RULES:
        for r in rule(arch.shards, lay):
            return r
    return None


def refusal_text(dep: Deployment, r: Refusal) -> str:
    """The plan's startup_error: which engine refuses, at which layout, and its message."""
    ep = f" ep {dep.ep}" if dep.ep > 1 else ""
    dp = f" dp_attention {dep.dp_attention}" if dep.dp_attention > 1 else ""
    engine = ENGINE.get(dep.engine, dep.engine)
    return f"{engine} {dep.engine_version} refuses to load the model at tp {dep.tp}{ep}{dp}: {r}"
