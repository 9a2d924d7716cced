"""safetensors headers (kvplan/models/safetensors.py), pinned where the mutation check moved a figure: each dtype's
element size, from the format's ``Dtype`` enum (huggingface/safetensors ``Dtype::bitsize``: BOOL, U8, I8 and the
F8 kinds 8 bits, F4 4, F6 6, 16-bit, 32-bit and 64-bit kinds, C64 a pair of f32: 64), the shape bounds, and the
indexer layers a checkpoint ships.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan import limits
from kvplan.errors import InputError
from kvplan.models.safetensors import Tensor, _dims, indexer_layers_shipped, parse_safetensors_header, snapshot_shards

BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64,
    "F64": 64, "C64": 64,
}  # fmt: skip


@pytest.mark.parametrize(("dtype", "bits"), sorted(BITS.items()))
def test_each_dtype_holds_its_bits(dtype: str, bits: int) -> None:
    # 1,024 elements: 1,024 × bits / 8 bytes (F4: 512, F6: 768, BF16: 2,048, C64: 8,192)
    assert Tensor("w", dtype, (32, 32)).nbytes == 1_024 * bits // 8


def test_a_shape_has_at_most_8_dimensions_each_up_to_the_token_limit() -> None:
    assert _dims([limits.MAX_TOKENS], "s") == (limits.MAX_TOKENS,)
    assert _dims([1] * 8, "s") == (1,) * 8
    with pytest.raises(InputError, match="expected a list of at most 8 dimensions"):
        _dims([1] * 9, "s")
    with pytest.raises(InputError, match="expected a list of at most 8 dimensions"):
        _dims((1, 2), "s")
    with pytest.raises(InputError, match=r"is not a dimension \(0 \.\. 1,099,511,627,776\)"):
        _dims([limits.MAX_TOKENS + 1], "s")


def test_indexer_layers_are_counted_by_their_layer_number() -> None:
    # DeepSeek-V3.2 names the indexer model.layers.N.self_attn.indexer.*; layer 61 (num_hidden_layers 61) is MTP
    names = ["model.layers.3.self_attn.indexer.wk.weight", "model.layers.3.self_attn.indexer.wq_b.weight",
             "model.layers.7.self_attn.indexer.wk.weight", "model.layers.61.self_attn.indexer.wk.weight"]  # fmt: skip
    assert indexer_layers_shipped([Tensor(n, "BF16", (1,)) for n in names], 61) == 2


def test_a_tensor_must_end_inside_the_data_after_the_8_byte_length_and_the_header() -> None:
    # a safetensors file: 8-byte header length, the JSON header (n bytes), then the data: file_size - 8 - n bytes.
    # One BF16 element (2 B) at offsets [0, 2] fits a file of 8 + n + 2 bytes, not one of 8 + n + 1
    header = b'{"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}'
    (t,) = parse_safetensors_header(header, 8 + len(header) + 2, "f")
    assert t.nbytes == 2
    with pytest.raises(InputError, match="inside the file's 1 data bytes"):
        parse_safetensors_header(header, 8 + len(header) + 1, "f")


# kvplan's header cache (kvplan.models.hub_cache): each shard's first 8 + n bytes under headers/, beside
# kvplan-headers.json naming the shard and its full size. The safetensors format (huggingface/safetensors README,
# "Format"): 8 bytes, N, an unsigned little-endian 64-bit integer, the size of the header; then N bytes of UTF-8
# JSON; then the data. One BF16 element [0, 2]: a shard of 8 + N + 2 bytes.
_JSON = b'{"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}'


def _cached(tmp_path, body: bytes):  # type: ignore[no-untyped-def]
    import json

    from kvplan.models import hub_cache

    folder = tmp_path / "snap"
    (folder / hub_cache.HEADERS_DIR).mkdir(parents=True)
    size = 8 + len(_JSON) + 2
    shards = [{"file": "model.safetensors", "size": size}]
    (folder / hub_cache.HEADERS_NAME).write_text(json.dumps({"repo": "org/tiny", "revision": "main", "shards": shards}))
    (folder / hub_cache.HEADERS_DIR / "model.safetensors").write_bytes(body)
    return folder


def test_a_cached_header_of_8_plus_n_bytes_is_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kvplan.models.safetensors import snapshot_tensors

    n = len(_JSON)
    (t,) = snapshot_tensors(_cached(tmp_path, n.to_bytes(8, "little") + _JSON))
    assert (t.name, t.dtype, t.shape, t.nbytes) == ("w", "BF16", (1,), 2)


@pytest.mark.parametrize("cut", [-1, 1])
def test_a_cached_header_one_byte_short_or_long_is_refused(tmp_path, cut: int) -> None:  # type: ignore[no-untyped-def]
    # the length field says N = 62 bytes follow; a cache holding 61 or 63 of them is not that header
    from kvplan.models.safetensors import snapshot_tensors

    n = len(_JSON)
    assert n == 62
    body = n.to_bytes(8, "little") + (_JSON[:cut] if cut < 0 else _JSON + b" ")
    with pytest.raises(
        InputError, match=rf"headers/model\.safetensors: {n + cut} header bytes cached, 62 expected; remove it"
    ):
        snapshot_tensors(_cached(tmp_path, body))


def test_no_bytes_of_no_bytes_are_unexplained() -> None:
    # an index whose metadata.total_size is 0 (a checkpoint of no tensors): nothing unexplained, 0 ppm; and
    # 3 bytes of 3,000,000 are 1 ppm (3 × 1,000,000 // 3,000,000), 2 bytes 0 (rounded toward zero)
    from kvplan.models.safetensors import Reconciliation

    def ppm(total: int, explained: int) -> int:
        r = Reconciliation(total_size=total, explained_bytes=explained, unknown_names=(), missing_names=())
        return r.unexplained_ppm

    assert (ppm(0, 0), ppm(3_000_000, 2_999_997), ppm(3_000_000, 2_999_998)) == (0, 1, 0)


def test_the_length_field_is_8_bytes_and_n_must_fit_after_it() -> None:
    # the format's first 8 bytes are N (u64 little-endian); 7 bytes are not a safetensors file. N = 10 needs a file
    # of 8 + 10 = 18 bytes at least: 18 holds it (no data), 17 has only 9 after the length
    from kvplan.models.safetensors import header_length

    with pytest.raises(InputError, match="f: shorter than the 8-byte header length"):
        header_length(b"\x0a" + b"\0" * 6, 100, "f")
    ten = (10).to_bytes(8, "little")
    assert header_length(ten, 18, "f") == 10
    with pytest.raises(InputError, match="f: the header claims 10 bytes but only 9 follow its 8-byte length"):
        header_length(ten, 17, "f")


def test_an_unlistable_snapshot_says_the_os_reason_in_one_line(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # An OSError with errno/strerror (what os.scandir raises on a folder without read permission): the line says
    # its strerror alone, not str(e)'s "[Errno 13] Permission denied: '...'".
    def denied(self: Path, pattern: str) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "glob", denied)
    with pytest.raises(InputError) as e:
        snapshot_shards(tmp_path)
    assert str(e.value) == f"snapshot {tmp_path}: cannot list: Permission denied"

    # An OSError without strerror (None): the line falls back to the error's own text, never "None".
    def bare(self: Path, pattern: str) -> None:
        raise OSError("stale file handle")

    monkeypatch.setattr(Path, "glob", bare)
    with pytest.raises(InputError) as e:
        snapshot_shards(tmp_path)
    assert str(e.value) == f"snapshot {tmp_path}: cannot list: stale file handle"
