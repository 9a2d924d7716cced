"""DeepSeek-V4 on vLLM: the non-KV memory its model code allocates, read from vLLM's DeepSeek-V4 source.

- ``model_executor/models/deepseek_v4.py`` ``DeepseekV4Model.__init__`` builds two buffers while the model is
  constructed (so inside "Model loading took" and vLLM's non-KV memory): ``topk_indices_buffer``
  ``torch.empty(max_num_batched_tokens, index_topk, dtype=torch.int32)`` (shared by every indexer layer) and, on
  the last PP rank whether or not MTP runs, ``_mtp_hidden_buffer``
  ``torch.empty(max_num_batched_tokens, hc_mult × hidden_size, dtype=model dtype)`` (the pre-hc_head residual
  streams the MTP draft reads).
- ``model_executor/layers/deepseek_v4_attention.py`` ``DeepseekV4MultiHeadLatentAttentionWrapper.attention_impl``,
  dummy-run branch: each compressed layer reserves ``_forward_prefill``'s bf16 gather workspace from the worker's
  ``WorkspaceManager``, ``(PREFILL_CHUNK_SIZE = 4, M, head_dim)`` with ``M = cdiv(max_model_len, compress_ratio)
  + window_size + max_num_batched_tokens`` (0 compressed tokens on a window-only layer). The manager keeps one
  buffer for the worker's life, grown to the largest request, which the MoE kernel's workspace shares: the
  profile model (kvplan.engines.vllm_profile) takes the larger of the two, not their sum.
"""

from __future__ import annotations

from kvplan.engines.vllm_dsv4 import is_v4
from kvplan.models.arch import ModelArch
from kvplan.units import cdiv

V4_PREFILL_CHUNK_SIZE = 4
"""``PREFILL_CHUNK_SIZE`` (layers/deepseek_v4_attention.py): prefill requests gathered at once."""

V4_GATHER_BYTES = 2
"""The gather workspace is ``torch.bfloat16``."""

TOPK_INDEX_BYTES = 4
"""``topk_indices_buffer`` is ``torch.int32``."""


def v4_load_buffers(arch: ModelArch, *, mnbt: int, last_stage: bool = True) -> dict[str, int]:
    """The buffers ``DeepseekV4Model.__init__`` allocates (bytes on one GPU); {} for another model."""
    dims = arch.activation
    if not is_v4(arch) or dims is None:
        return {}
    out = {"v4_topk_indices_buffer_bytes": mnbt * arch.index_topk * TOPK_INDEX_BYTES}
    if last_stage:
        out["v4_mtp_hidden_buffer_bytes"] = mnbt * dims.residual_streams * dims.hidden_size * dims.dtype_bytes
    return out


def v4_gather_workspace_bytes(arch: ModelArch, *, mnbt: int, max_model_len: int) -> int:
    """The largest prefill gather workspace a V4 layer reserves in the dummy run (0 for another model)."""
    most = 0
    for layer in arch.layers:
        att = layer.compressed
        if att is None:
            continue
        compressed = cdiv(max_model_len, att.compress_ratio) if att.compress_ratio > 1 else 0
        rows = compressed + att.window + mnbt
        most = max(most, V4_PREFILL_CHUNK_SIZE * rows * att.head_dim * V4_GATHER_BYTES)
    return most
