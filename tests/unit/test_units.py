from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.render import gib, nbytes, size
from kvplan.units import GB, GiB, parse_bytes, parse_token_list, parse_tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1M", 1 << 20),  # binary, as model cards use: 1M = 1,048,576
        ("128K", 128 * 1024),
        ("512k", 512 * 1024),
        ("1000000", 1_000_000),
        ("1.5M", 1_572_864),  # 1.5 × 1,048,576 is a whole number of tokens
        (" 8K ", 8192),
    ],
)
def test_parse_tokens(text: str, expected: int) -> None:
    assert parse_tokens(text) == expected


@pytest.mark.parametrize("text", ["abc", "1.5", "-5", "1MB", "", "1.0000001M"])
def test_parse_tokens_rejects(text: str) -> None:
    with pytest.raises(InputError):
        parse_tokens(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80GiB", 80 * GiB),
        ("141GB", 141 * GB),
        ("143771MiB", 143_771 * (1 << 20)),
        ("1.5 KiB", 1536),
        ("512B", 512),
        # 94.46 GiB (a log's two decimals) = 101,425,652,695.04 B: truncated to whole bytes
        ("94.46GiB", 101_425_652_695),
    ],
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["94", "80 gigs", "GiB", "10Gb", "1.2.3GB"])
def test_parse_bytes_needs_a_unit(text: str) -> None:
    with pytest.raises(InputError):
        parse_bytes(text)


def test_parse_token_list() -> None:
    assert parse_token_list("8K,128K,1M") == (8192, 131072, 1 << 20)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (80 * GB, "74.51 GiB (80.00 GB)"),  # 80e9 / 2^30 = 74.505...
        (33 * GiB, "33.00 GiB (35.43 GB)"),  # 33 × 1.073741824 = 35.433...
        (53_940, "53,940 B"),  # under 1 MiB: exact bytes
        (64 * (1 << 20), "64.00 MiB (67.11 MB)"),  # 8192 × 2048 × 4 B top-k buffer: 67,108,864 B
    ],
)
def test_size_says_which_unit(n: int, expected: str) -> None:
    assert size(n) == expected


def test_gib_and_bytes() -> None:
    assert gib(GiB - 1) == "1.00 GiB"  # rounds up on display only
    assert nbytes(1152) == "1,152 B"
