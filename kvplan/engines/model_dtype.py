"""The weights in the dtype the engine builds the model in (``--dtype``), not the checkpoint's ``torch_dtype``.

Both engines resolve the model dtype first (vLLM ``vllm/config/model.py`` ``_get_and_verify_dtype`` /
``_resolve_auto_dtype``; SGLang ``srt/configs/model_config.py`` ``_get_and_verify_dtype``): ``auto`` keeps a bf16 /
fp16 config and downcasts a float32 one (vLLM to bf16 from SM80; SGLang to fp16, "Following the common practice,
we use float16 for float32 models"), 2 bytes either way; only ``--dtype float32`` is 4. They build every parameter
in it (vLLM ``model_loader/utils.py initialize_model``, SGLang ``model_loader/loader.py DefaultModelLoader``, both
under ``set_default_torch_dtype(model_config.dtype)``) and copy the checkpoint in: an unquantized tensor takes the
model dtype's bytes whatever it was stored in. Quantized tensors and their scales keep their storage. The rotary
cos/sin cache (``get_rope``: ``dtype=None`` is ``torch.get_default_dtype()``, ``RotaryEmbedding`` ``cache.to(
dtype)``) and the profile run's activations follow the model dtype too; gpt-oss passes its own float32 rope.
A measured weights point was taken under ``--dtype auto`` (2-byte parameters): it stands unless ``--dtype
float32`` asks for another dtype.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment

AUTO_BYTES = 2
"""What ``--dtype auto`` builds in on a CUDA GPU: the config's bf16 / fp16, or a float32 config downcast."""


def model_dtype_bytes(dep: Deployment) -> int:
    """Bytes a parameter in the model dtype the deployment's engine resolves (``--dtype``)."""
    return 4 if dep.dtype in ("float", "float32") else AUTO_BYTES


def with_model_dtype(arch: ModelArch, dep: Deployment) -> ModelArch:
    """The model with its unquantized weights in the model dtype (module docstring); unchanged when the
    checkpoint's torch_dtype already is it."""
    stored, loaded = arch.checkpoint_dtype_bytes, model_dtype_bytes(dep)
    if stored == loaded:
        return arch
    groups = tuple(g.in_dtype(stored, loaded) for g in arch.param_groups)
    said = (
        f"unquantized weights cast on load from the checkpoint's {stored}-byte torch_dtype to the"
        f" {loaded}-byte model dtype (--dtype {dep.dtype})"
    )
    measured = arch.measured_weights if loaded == AUTO_BYTES else ()
    summary = f"{arch.weights_summary}; {said}" if arch.weights_summary else said
    # the profile run's activations are in the model dtype as well (vllm_profile reads dtype_bytes)
    act = replace(arch.activation, dtype_bytes=loaded) if arch.activation is not None else None
    return replace(arch, param_groups=groups, measured_weights=measured, weights_summary=summary, activation=act)
