"""How a checkpoint stores its linear weights: the schemes of ``quantization_config`` (pure data).

A :class:`Scheme` is bits per value plus one scale (and zero point) per group of values, and a few bits per
output row, input column or whole matrix; :meth:`Scheme.bytes_for` sizes ``count`` matrices of rows × cols::

    bytes = (rows·cols·(weight_bits + (scale_bits + zero_bits) / values_per_scale)
             + rows·row_bits + cols·col_bits + tensor_bits) / 8

Each method's bytes per value are derived at ``resolve``; which modules stay unquantized at ``_matches``.
Embeddings, the LM head and MoE routers always stay in the checkpoint dtype (the engines load them unquantized).
An unknown ``quant_method`` is planned as the checkpoint dtype and said as an assumption, never silently.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kvplan import record
from kvplan.errors import ConfigError
from kvplan.limits import (
    MAX_DIM,
    MAX_MODULE_PATTERN_CHARS,
    MAX_MODULE_PATTERN_REPEATS,
    MAX_MODULE_PATTERNS,
    MAX_MODULE_REGEXES,
)

if TYPE_CHECKING:  # fractions (with decimal) loads where bytes are first counted: a preset's plan never does
    from fractions import Fraction

Fail = Callable[[tuple[str | int, ...], str], object]
"""Raises a located error for a key path under the config (reader.Reader.fail fits); must not return."""


@record(kw_only=True)
class Scheme:
    """One storage format of a linear weight: bits per value plus a scale (and a zero point) per group."""

    name: str
    weight_bits: int
    values_per_scale: int = 0
    """Values sharing one scale (and zero point): g for group quantization, 128 × 128 for fp8 blocks; 0: none."""
    scale_bits: int = 0
    zero_bits: int = 0
    """Zero point per group (asymmetric integer schemes); 0 when symmetric."""
    row_bits: int = 0
    """Per output row (per-channel scale, and zero point): vLLM keeps fp8 channel scales in fp32."""
    col_bits: int = 0
    """Per input column: GPTQ's ``g_idx`` (int32)."""
    tensor_bits: int = 0
    """Per matrix: an fp8 per-tensor scale (fp32), NVFP4's two fp32 globals."""

    @property
    def gemm(self) -> str:
        """The GEMM format the engines run it at: 'int4' for an integer format of 4 bits or fewer (AWQ, GPTQ,
        compressed-tensors int: dequantized to bf16 inside the GEMM, W4A16 Marlin / vLLM's ``fused_marlin_moe``),
        'fp4' (NVFP4, MXFP4) and 'fp8', which the tensor cores multiply; '' unquantized or not known (an 8-bit
        integer format: W8A8 or W8A16, the config decides)."""
        if self.name.startswith("int"):
            return "int4" if self.weight_bits <= 4 else ""
        return {4: "fp4", 8: "fp8"}.get(self.weight_bits, "")

    @property
    def bytes_per_param(self) -> Fraction:
        """The per-value part: weight bits plus the group scales and zeros, in bytes."""
        from fractions import Fraction

        bits = Fraction(self.weight_bits)
        if self.values_per_scale:
            bits += Fraction(self.scale_bits + self.zero_bits, self.values_per_scale)
        return bits / 8

    @property
    def natural(self) -> tuple[int, int]:
        """bytes_per_param as (bytes of one scale group, values in it): fp8 blocks (16,388, 16,384), NVFP4 (9, 16)."""
        per = self.values_per_scale or 1
        bits = per * self.weight_bits + (self.scale_bits + self.zero_bits if self.values_per_scale else 0)
        return (bits // 8, per) if bits % 8 == 0 else (bits, 8 * per)

    @property
    def has_extras(self) -> bool:
        """Bytes by row, column or tensor on top of the per-value ones."""
        return bool(self.row_bits or self.col_bits or self.tensor_bits)

    def bytes_for(self, rows: int, cols: int, count: int = 1) -> Fraction:
        """Bytes of ``count`` matrices of ``rows`` outputs × ``cols`` inputs (exact when groups divide ``cols``)."""
        from fractions import Fraction

        per_matrix = self.bytes_per_param * rows * cols + Fraction(
            rows * self.row_bits + cols * self.col_bits + self.tensor_bits, 8
        )
        return per_matrix * count


BF16 = Scheme(name="bf16", weight_bits=16)
FP16 = Scheme(name="fp16", weight_bits=16)
FP32 = Scheme(name="fp32", weight_bits=32)
FP8_BLOCK = Scheme(
    name="fp8 e4m3, fp32 scale per 128×128 block", weight_bits=8, values_per_scale=128 * 128, scale_bits=32
)
FP8_TENSOR = Scheme(name="fp8 e4m3, fp32 scale per tensor", weight_bits=8, tensor_bits=32)
NVFP4 = Scheme(
    name="NVFP4 (e2m1, fp8 scale per 16, two fp32 globals)",
    weight_bits=4,
    values_per_scale=16,
    scale_bits=8,
    tensor_bits=64,
)
MXFP4 = Scheme(name="MXFP4 (e2m1, e8m0 scale per 32)", weight_bits=4, values_per_scale=32, scale_bits=8)

_SCALE_BITS = {"float32": 32, "bfloat16": 16, "float16": 16, "float8_e4m3fn": 8, "float8_e8m0fnu": 8, "uint8": 8}
_DTYPES = {
    "bfloat16": BF16,
    "bf16": BF16,
    "float16": FP16,
    "fp16": FP16,
    "half": FP16,
    "float32": FP32,
    "fp32": FP32,
    "float": FP32,
}


@record(kw_only=True)
class Quantization:
    """A checkpoint's ``quantization_config`` resolved: which scheme each linear module is stored in."""

    method: str
    """'none' (plain dtype), 'fp8', 'modelopt', 'mxfp4', 'awq', 'gptq', 'compressed-tensors', or the unknown name."""
    plain: Scheme
    """The checkpoint dtype (``torch_dtype``): embeddings, LM head, routers and every unquantized module."""
    groups: tuple[tuple[tuple[str, ...], Scheme], ...] = ()
    """(targets, scheme) in order; empty targets match every linear module (single-scheme methods)."""
    ignore: tuple[str, ...] = ()
    match: str = "substring"
    """How ``ignore`` (and targets) match a module name: 'substring', 'glob' (modelopt) or 'ct' (compressed-tensors)."""
    assumptions: tuple[str, ...] = ()

    @property
    def uniform(self) -> bool:
        """One scheme for every linear module (nothing ignored, one group for all): no names to match."""
        return not self.ignore and len(self.groups) <= 1 and all(t in ((), ("Linear",)) for t, _ in self.groups)

    def scheme_for(self, module: str) -> Scheme:
        """The scheme of one linear module, by its Hugging Face name (``model.layers.3.mlp.experts.0.up_proj``)."""
        if self._ignored(module):
            return self.plain
        for targets, scheme in self.groups:
            if not targets or any(_matches(t, module, self.match) for t in targets):
                return scheme
        return self.plain

    @property
    def summary(self) -> str:
        """One line for the weights line, e.g. 'compressed-tensors: int4 group 32 (…); bf16 where ignored'."""
        schemes = "; ".join(dict.fromkeys(s.name for _, s in self.groups))
        if self.method == "none" or not schemes:
            return f"{self.plain.name} checkpoint"
        return f"{self.method}: {schemes}; {self.plain.name} elsewhere"

    @cached_property
    def _ignored(self) -> Callable[[str], bool]:
        """One compiled test for the whole ignore list (Qwen3-FP8 lists 282 modules; 94 layers match against it)."""
        if not self.ignore:
            return lambda name: False
        if self.match == "ct":
            exact = {p for p in self.ignore if not p.startswith("re:")}
            rxs = [re.compile(p[3:]) for p in self.ignore if p.startswith("re:")]
            if "Linear" in exact:
                return lambda name: True
            return lambda name: name in exact or any(rx.match(name) is not None for rx in rxs)
        if self.match == "glob":
            rx = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in self.ignore))
            return lambda name: rx.match(name) is not None
        # substring ("model.layers.*.self_attn" as gpt-oss writes it: '*' any run of characters); a pattern
        # naming "layers.N." can only match a module of layer N (a module name has one such part)
        by_layer: dict[str, list[str]] = {}
        anywhere: list[str] = []
        wild = [re.compile(fnmatch.translate(f"*{p}*")) for p in self.ignore if "*" in p]  # linear-time globs
        for p in self.ignore:
            m = _LAYER.search(p)
            if "*" not in p:
                (by_layer.setdefault(m.group(1), []) if m else anywhere).append(p)

        def ignored(name: str) -> bool:
            m = _LAYER.search(name)
            near = by_layer.get(m.group(1), ()) if m else ()
            return (
                any(p in name for p in anywhere)
                or any(p in name for p in near)
                or any(rx.match(name) is not None for rx in wild)
            )

        return ignored


_LAYER = re.compile(r"layers\.(\d+)\.")


# Which modules stay unquantized follows each method's own list: compressed-tensors ``ignore`` (``re:`` patterns
# matched from the start of the name, else the exact name; ``targets`` likewise, "Linear" matching every linear
# layer), modelopt ``exclude_modules`` (glob patterns), and ``modules_to_not_convert`` / ``ignored_layers`` (a
# substring of the module name, as transformers matches them; ``*`` any run of characters, as gpt-oss writes
# ``model.layers.*.self_attn``).
def _matches(pattern: str, name: str, style: str) -> bool:
    if style == "glob":
        return fnmatch.fnmatchcase(name, pattern)
    if style == "ct":
        if pattern.startswith("re:"):
            return re.match(pattern[3:], name) is not None
        return pattern in (name, "Linear")
    return pattern in name


# Per value (what ParamGroup's bytes per parameter carries), and the extras:
# - bf16 / fp16 / fp32: 2 / 2 / 4 (``weight``);
# - fp8 in 128x128 blocks (``quant_method: fp8`` with ``weight_block_size``): 1 + 4/16,384 (``weight`` e4m3 and a
#   ``weight_scale_inv`` fp32 per block); fp8 per tensor: 1, + 4 B a tensor (+ 4 B input scale when static);
# - NVFP4 (modelopt ``quant_algo: NVFP4``): 0.5 + 1/16 (packed e2m1, one fp8 e4m3 scale per 16), + 8 B a tensor
#   (``weight_scale_2`` and ``input_scale``, fp32);
# - MXFP4 (``quant_method: mxfp4``): 0.5 + 1/32 (packed e2m1 ``blocks``, one e8m0 ``scales`` byte per 32);
# - AWQ intN, group g: N/8 + (2 + N/8)/g (``qweight`` packed in int32, fp16 ``scales``, N-bit ``qzeros`` per
#   group; ``zero_point: false`` drops the zeros);
# - GPTQ intN, group g: N/8 + (2 + N/8)/g (``qweight``, fp16 ``scales``, N-bit ``qzeros``, stored even when
#   ``sym``), + 4 B an input column (``g_idx``); group -1: one scale and zero a row instead;
# - compressed-tensors intN, group g: N/8 + (scale + zero)/g (``weight_packed``, ``weight_scale`` in the model
#   dtype, ``weight_zero_point`` N-bit only when asymmetric); fp8 (``type: float``) scales are fp32 as vLLM holds
#   them (per ``channel``: 4 B a row; ``tensor``: 4 B a tensor; ``block``: per block); fp4 has fp8 scales per
#   group and an fp32 global a tensor; a ``scale_dtype`` in the config wins.
# Group scales are exact when a matrix's input dim is a multiple of the group (true for every modelled family but
# GLM-4.5-Air's 10,944-wide dense MLP, < 0.01 % off).
def resolve(config: Mapping[str, Any], source: str, fail: Fail | None = None) -> Quantization:
    """The quantization of a Hugging Face ``config.json`` (its ``quantization_config`` and ``torch_dtype``).

    Bad values (a group size that is not a positive integer, a pattern list that is not a list of strings)
    raise through ``fail`` with the key path, or a ConfigError naming ``source``; an unknown method is an
    assumption, not an error.
    """

    def bad(path: tuple[str | int, ...], message: str) -> ConfigError:
        if fail is not None:
            fail(path, message)
        key = ".".join(str(p) for p in path)
        return ConfigError(message, source=source, key=key)

    plain, assumptions = _plain(config)
    q = config.get("quantization_config")
    if q is None:
        return Quantization(method="none", plain=plain, assumptions=assumptions)
    if not isinstance(q, Mapping):
        raise bad(("quantization_config",), f"expected a mapping, got {type(q).__name__}")
    r = Fields(q, ("quantization_config",), bad)
    method = _normal(r.text("quant_method", ""))
    if method == "modelopt" or method.startswith("modelopt-") or isinstance(q.get("quantization"), Mapping):
        return _modelopt(r, plain, assumptions)
    if method == "fp8":
        block = r.int_list("weight_block_size")
        if block:
            rows, cols = [*block, block[0]][:2]
            scheme = (
                FP8_BLOCK
                if (rows, cols) == (128, 128)
                else Scheme(
                    name=f"fp8 e4m3, fp32 scale per {rows}×{cols} block",
                    weight_bits=8,
                    values_per_scale=rows * cols,
                    scale_bits=32,
                )
            )
        else:  # per-tensor weight scale, and an input scale with static activations (fp32 each)
            static = r.text("activation_scheme", "dynamic").lower() == "static"
            scheme = replace(FP8_TENSOR, tensor_bits=64) if static else FP8_TENSOR
        fp8 = _simple("fp8", scheme, r, plain, assumptions)
        if config.get("expert_dtype") == "fp4":  # DeepSeek-V4: MXFP4 routed experts (vLLM DeepseekV4FP8Config)
            return replace(fp8, groups=(((".experts.",), MXFP4), *fp8.groups))
        return fp8
    if method == "mxfp4":
        return _simple("mxfp4", MXFP4, r, plain, assumptions)
    if method in ("awq", "gptq"):
        # vLLM's AWQConfig / GPTQConfig.from_config read both with get_from_keys: no default, first key found
        bits = _first_int(r, ("w_bit", "bits") if method == "awq" else ("bits",), minimum=1)
        group = _first_int(r, ("q_group_size", "group_size") if method == "awq" else ("group_size",), minimum=-1)
        if bits not in (2, 3, 4, 8):
            raise bad(("quantization_config", "bits"), f"expected 2, 3, 4 or 8 bits, got {bits}")
        zero = bits if method == "gptq" or r.flag("zero_point", True) else 0
        per = f"group {group}" if group > 0 else "per channel"
        extra = ", int32 g_idx" if method == "gptq" else ""
        scheme = Scheme(
            name=f"int{bits} {method.upper()} {per} (fp16 scales{', zero points' if zero else ''}{extra})",
            weight_bits=bits,
            values_per_scale=max(group, 0),
            scale_bits=16 if group > 0 else 0,
            zero_bits=zero if group > 0 else 0,
            row_bits=0 if group > 0 else 16 + zero,
            col_bits=32 if method == "gptq" else 0,
        )
        return _simple(method, scheme, r, plain, assumptions)
    if method == "compressed-tensors":
        return _compressed_tensors(r, plain, assumptions)
    if not method and (algo := r.text("quant_algo", "")):
        return Quantization(method="none", plain=plain, assumptions=(*assumptions, _no_method(algo, plain)))
    shown = r.text("quant_method", "") or "(none)"
    return Quantization(
        method=shown,
        plain=plain,
        assumptions=(*assumptions, f"assumed {plain.name}: quant_method {shown!r} is not modelled"),
    )


def _normal(method: str) -> str:
    """A quant_method as the engines compare it: lower case (vLLM ``ModelConfig._verify_quantization``
    ``quant_cfg.get("quant_method", "").lower()``), '_' and '-' alike (compressed_tensors / compressed-tensors)."""
    return method.lower().replace("_", "-")


def method_of(config: Mapping[str, Any]) -> str:
    """The config's quant_method as ``resolve`` reads it ('' when none): for the readers that need the method
    alone (the MXFP4 MoE kernel choice), lenient where ``resolve`` would raise (validation reports that)."""
    q = config.get("quantization_config")
    m = q.get("quant_method") if isinstance(q, Mapping) else None
    return _normal(m) if isinstance(m, str) else ""


def _no_method(algo: str, plain: Scheme) -> str:
    """A flat ``quant_algo`` with no ``quant_method``: neither engine picks a quantization method from it."""
    return (
        f"planned as {plain.name}: quantization_config names quant_algo {algo!r} but no quant_method, and the engines "
        "load such a checkpoint unquantized (vLLM ModelConfig._parse_quant_hf_config sets a method only for "
        "producer modelopt with a nested 'quantization'; SGLang _modelopt_override_quantization_method only for "
        'quant_method modelopt_fp4/modelopt_fp8 or --quantization modelopt); add "quant_method": "modelopt" '
        f"to serve it as {algo}"
    )


def linear_format(q: Quantization) -> str:
    """The storage of a checkpoint's linear layers as one word ('nvfp4', 'fp8', or the plain dtype 'bf16' / 'fp16' /
    'fp32'): the scheme of a routed expert's projection, where the weights of a MoE are (ignore lists and per-module
    groups applied as for every module); other schemes (MXFP4, int4) keep the plain dtype's word."""
    s = q.scheme_for("model.layers.1.mlp.experts.0.down_proj")
    if s.weight_bits == 4 and s.scale_bits == 8 and s.name.startswith("NVFP4"):
        return "nvfp4"
    if s.weight_bits == 8:
        return "fp8"
    return q.plain.name


def checkpoint_dtype(config: Mapping[str, Any], source: str) -> str:
    """The one reading of a config's linear storage (``resolve`` then ``linear_format``): what the weights of a
    preset-style parameter layout (kvplan.models.weights.param_groups) take, so that no path reads the
    quantization_config another way."""
    return linear_format(resolve(config, source))


def stored_dtype_bytes(config: Mapping[str, Any]) -> int:
    """Bytes a parameter of the config's torch_dtype (2 where it names none or one kvplan does not model)."""
    return _plain(config)[0].weight_bits // 8


def _plain(config: Mapping[str, Any]) -> tuple[Scheme, tuple[str, ...]]:
    raw = config.get("torch_dtype", config.get("dtype"))
    if raw is None:
        return BF16, ("assumed bf16: the config names no torch_dtype",)
    scheme = _DTYPES.get(str(raw).strip().lower().removeprefix("torch.")) if isinstance(raw, str) else None
    if scheme is None:
        return BF16, (f"assumed bf16: torch_dtype {str(raw)[:40]!r} is not modelled",)
    return scheme, ()


def _simple(method: str, scheme: Scheme, r: Fields, plain: Scheme, assumptions: tuple[str, ...]) -> Quantization:
    skip = r.patterns("modules_to_not_convert") + r.patterns("ignored_layers")
    return Quantization(method=method, plain=plain, groups=(((), scheme),), ignore=skip, assumptions=assumptions)


def _modelopt(r: Fields, plain: Scheme, assumptions: tuple[str, ...]) -> Quantization:
    inner = r.sub("quantization") or r
    algo = inner.text("quant_algo", "").upper()
    excl = inner.patterns("exclude_modules") or r.patterns("exclude_modules") or r.patterns("ignore")
    if "FP4" in algo:
        group = inner.integer("group_size", 16)
        scheme = (
            NVFP4
            if group == 16
            else replace(NVFP4, name=f"NVFP4 (e2m1, fp8 scale per {group}, two fp32 globals)", values_per_scale=group)
        )
    elif "FP8" in algo:
        scheme = FP8_TENSOR
    else:
        shown = algo or "(none)"
        return Quantization(
            method="modelopt",
            plain=plain,
            assumptions=(*assumptions, f"assumed {plain.name}: modelopt quant_algo {shown!r} is not modelled"),
        )
    return Quantization(
        method="modelopt", plain=plain, groups=(((), scheme),), ignore=excl, match="glob", assumptions=assumptions
    )


def _compressed_tensors(r: Fields, plain: Scheme, assumptions: tuple[str, ...]) -> Quantization:
    groups: list[tuple[tuple[str, ...], Scheme]] = []
    notes = list(assumptions)
    cg = r.sub("config_groups")
    if cg is not None:
        for key in list(cg.data)[:MAX_MODULE_PATTERNS]:
            g = cg.sub(str(key))
            if g is None:
                continue
            targets = g.patterns("targets") or ("Linear",)
            w = g.sub("weights")
            if w is None:
                continue  # activations only: weights stay in the model dtype
            bits = w.integer("num_bits", 8, maximum=32)
            kind = "float" if w.text("type", "int").lower() == "float" else "int"
            strategy = w.text("strategy", "tensor").lower()
            if strategy in ("group", "tensor-group", "tensor_group"):
                per = w.integer("group_size", 128)
            elif strategy == "block":
                block = w.int_list("block_structure") or [128, 128]
                per = block[0] * (block + block[:1])[1]
            elif strategy in ("tensor", "channel"):
                per = 0
            else:  # an unknown strategy: its scales are left out, and said
                notes.append(f"compressed-tensors strategy {strategy!r} is not modelled: its scales are left out")
                strategy, per = "tensor", 0
            fp4 = kind == "float" and bits == 4
            # scales as vLLM holds them: fp8 weights' in fp32, fp4's in fp8 (+ an fp32 global a tensor), int's in
            # the model dtype; a config's own scale_dtype wins
            default = 8 if fp4 else 32 if kind == "float" else plain.weight_bits
            given = w.text("scale_dtype", "").lower().removeprefix("torch.")
            scale_bits = _SCALE_BITS.get(given, default)
            scale_name = given if given in _SCALE_BITS else {8: "fp8", 32: "fp32"}.get(scale_bits, plain.name)
            zero = 0 if kind == "float" or w.flag("symmetric", True) else bits
            grouped = strategy in ("group", "tensor-group", "tensor_group", "block")
            what = f"{'fp' if kind == 'float' else 'int'}{bits}"
            how = f"group {per}" if grouped and strategy != "block" else strategy
            name = f"{what} {how} ({scale_name} scales{', zero points' if zero else ''})"
            scheme = Scheme(
                name=name,
                weight_bits=bits,
                values_per_scale=per,
                scale_bits=scale_bits if grouped else 0,
                zero_bits=zero if grouped else 0,
                row_bits=scale_bits + zero if strategy == "channel" else 0,
                tensor_bits=(scale_bits + zero if strategy == "tensor" else 0)
                + (32 if "tensor" in strategy and grouped else 0),
            )
            groups.append((targets, scheme))
    if not groups:
        notes.append(f"assumed {plain.name}: compressed-tensors config without weight config_groups")
    ignore = r.patterns("ignore")
    every = [*ignore, *(t for targets, _ in groups for t in targets)]
    regexes = sum(p.startswith("re:") for p in every)
    if len(every) > MAX_MODULE_PATTERNS or regexes > MAX_MODULE_REGEXES:
        raise r.bad(
            r.path,
            f"{len(every):,} module patterns ({regexes:,} of them re:) are past kvplan's limits of"
            f" {MAX_MODULE_PATTERNS:,} ({MAX_MODULE_REGEXES:,} re:) for ignore and targets together",
        )
    return Quantization(
        method="compressed-tensors",
        plain=plain,
        groups=tuple(groups),
        ignore=ignore,
        match="ct",
        assumptions=tuple(notes),
    )


_REPEATS = re.compile(r"(?<!\\)(?:[*+]|\{\d*,\d*\})")
_REPEATED_GROUP = re.compile(r"(?<!\\)\)(?:[*+]|\{\d*,\d*\})")


def _backtracking(pattern: str) -> str:
    """Why Python's backtracking regex engine could take hours on this pattern, or '' when it cannot: a repeated
    group ("(.*.*)*x") or more than limits.MAX_MODULE_PATTERN_REPEATS open repeats (".*.*.*.*.*.*x"); real ignore
    lists use one or two ``.*`` and plain groups."""
    if _REPEATED_GROUP.search(pattern):
        return f"a repeated group in {pattern[:60]!r} is refused (its matching time can explode)"
    if len(_REPEATS.findall(pattern)) > MAX_MODULE_PATTERN_REPEATS:
        return (
            f"{pattern[:60]!r} has more than {MAX_MODULE_PATTERN_REPEATS} repeats (*, +, {{m,n}}): refused"
            " (its matching time can explode)"
        )
    return ""


def _first_int(r: Fields, keys: tuple[str, ...], *, minimum: int) -> int:
    """The first of ``keys`` the config gives (the engines' ``get_from_keys``), required."""
    for key in keys:
        if r.data.get(key) is not None:
            return r.integer(key, 0, minimum=minimum)
    raise r.bad((*r.path, keys[-1]), f"missing (required: {' or '.join(keys)}, read with no default by the engines)")


class Fields:
    """Typed, located reads of a config mapping (errors name the key path through ``bad``)."""

    def __init__(self, data: Mapping[str, Any], path: tuple[str | int, ...], bad: Callable[..., ConfigError]):
        self.data = data
        self.path = path
        self.bad = bad

    def sub(self, key: str) -> Fields | None:
        v = self.data.get(key)
        if v is None:
            return None
        if not isinstance(v, Mapping):
            raise self.bad((*self.path, key), f"expected a mapping, got {type(v).__name__}")
        return Fields(v, (*self.path, key), self.bad)

    def text(self, key: str, default: str) -> str:
        v = self.data.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise self.bad((*self.path, key), f"expected a string, got {type(v).__name__}")
        return v.strip()[:64]

    def flag(self, key: str, default: bool) -> bool:
        v = self.data.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self.bad((*self.path, key), f"expected true or false, got {type(v).__name__}")
        return v

    def integer(self, key: str, default: int, *, minimum: int = 1, maximum: int = MAX_DIM) -> int:
        v = self.data.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum or (v == 0 and minimum < 0):
            raise self.bad((*self.path, key), f"expected an integer from {minimum} to {maximum:,}, got {v!r}"[:120])
        return v

    def required(self, key: str, *, minimum: int = 1, maximum: int = MAX_DIM) -> int:
        if self.data.get(key) is None:
            raise self.bad((*self.path, key), "missing (required)")
        return self.integer(key, 0, minimum=minimum, maximum=maximum)

    def int_list(self, key: str) -> list[int]:
        v = self.data.get(key)
        if v is None:
            return []
        ok = isinstance(v, list) and 1 <= len(v) <= 2
        if not ok or any(isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= 1 << 16 for x in v):
            raise self.bad((*self.path, key), f"expected one or two integers from 1 to 65,536, got {v!r}"[:120])
        return list(v)

    def patterns(self, key: str) -> tuple[str, ...]:
        v = self.data.get(key)
        if v is None:
            return ()
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or len(v) > MAX_MODULE_PATTERNS:
            raise self.bad((*self.path, key), f"expected a list of at most {MAX_MODULE_PATTERNS:,} module names")
        for i, p in enumerate(v):
            if not isinstance(p, str) or len(p) > MAX_MODULE_PATTERN_CHARS:
                raise self.bad(
                    (*self.path, key, i), f"expected a module name of at most {MAX_MODULE_PATTERN_CHARS} characters"
                )
            if p.startswith("re:"):
                try:
                    re.compile(p[3:])
                except re.error as e:
                    raise self.bad((*self.path, key, i), f"not a regular expression: {e}") from None
                problem = _backtracking(p[3:])
                if problem:
                    raise self.bad((*self.path, key, i), problem)
        return tuple(v)
