from __future__ import annotations

import pytest

from kvplan import units
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


# --------------------------------------------------------------------------- issue 9 / 10: one grammar for numbers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,048,576", 1_048_576),  # kvplan's own printed style: commas group digits in threes
        ("1,000,000", 1_000_000),
        ("1_048_576", 1_048_576),
        ("1e6", 1_000_000),  # 1 × 10^6, exact
        ("2.5e6", 2_500_000),  # 2.5 × 10^6 is whole
        ("16K", 16 * 1024),  # 16,384
    ],
)
def test_parse_tokens_accepts_every_written_style(text: str, expected: int) -> None:
    assert parse_tokens(text) == expected


@pytest.mark.parametrize("text", ["1,00", "1,0000", "1e-3", "1.5e0", "1" * 5000, "1e99"])
def test_parse_tokens_refuses_malformed_or_huge(text: str) -> None:
    # '1,00' / '1,0000' are not groups of three; 1.5e0 is not whole; 5,000 digits is past MAX_INT_DIGITS (30)
    # before int() is called (Python's own limit of 4,300 would raise ValueError); 1e99 > MAX_TOKENS (2^40)
    with pytest.raises(InputError):
        parse_tokens(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8K,128K,1M", (8192, 131072, 1 << 20)),
        ("1,000,000", (1_000_000,)),  # regression: was read as three contexts (1, 0, 0)
        ("8K, 1,048,576", (8192, 1_048_576)),
        ("128;256", (128, 256)),  # two small counts: ';' or spaces
        ("128 256", (128, 256)),
        ("1000,2000", (1000, 2000)),  # 1000 is not a group of three after 1-3 digits: a list
    ],
)
def test_parse_token_list_separators(text: str, expected: tuple[int, ...]) -> None:
    assert parse_token_list(text) == expected


@pytest.mark.parametrize("text", ["0", "8K,0", "", " , "])
def test_parse_token_list_refuses_zero_and_empty(text: str) -> None:
    with pytest.raises(InputError):
        parse_token_list(text)


def test_option_tokens_zero_only_where_it_means_something() -> None:
    from kvplan.units import parse_option_tokens

    assert parse_option_tokens("--gen", "0") == 0  # no generated tokens
    with pytest.raises(InputError, match="--ctx"):
        parse_option_tokens("--ctx", "0")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("88gib", 88 * GiB),  # case-insensitive where unambiguous: 88 × 2^30 = 94,489,280,512
        ("141gb", 141 * GB),
        ("80GIB", 80 * GiB),
    ],
)
def test_parse_bytes_case_insensitive(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["10Gb", "80Gib", "1Mb"])
def test_parse_bytes_refuses_bits(text: str) -> None:
    with pytest.raises(InputError, match="bits"):
        parse_bytes(text)


def test_parse_bytes_refuses_5000_digits_before_int() -> None:
    from kvplan.limits import LimitError

    with pytest.raises(LimitError, match="digits"):
        parse_bytes("9" * 5000 + "GiB")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # bits: 400 × 10^9 / 8 = 50,000,000,000 B/s
        ("400Gb/s", 50 * GB),  # regression: was read as 400 GB/s (8× too fast)
        ("400Gbps", 50 * GB),
        ("400Gbit", 50 * GB),
        ("400Gbit/s", 50 * GB),
        ("400 Gb", 50 * GB),
        # bytes: 400 × 10^9 B/s
        ("400GBps", 400 * GB),  # regression: was read as bits (50 GB/s)
        ("400GB/s", 400 * GB),
        ("46.5GiB/s", 49_928_994_816),  # 46.5 × 2^30
        ("1.6Tbps", 200 * GB),  # 1.6 × 10^12 / 8
    ],
)
def test_link_bits_and_bytes(text: str, expected: int) -> None:
    from kvplan.units import parse_link

    assert parse_link(text) == expected


@pytest.mark.parametrize("text", ["400gb/s", "400gbps", "50gib/s"])
def test_link_all_lowercase_is_ambiguous(text: str) -> None:
    from kvplan.units import parse_link

    with pytest.raises(InputError, match="ambiguous"):
        parse_link(text)


def test_one_gib_formatter_keeps_each_callers_words() -> None:
    # 36.1 GiB to the byte (38,762,079,846 B, floor of 36.1 × 2^30), and 1,234.5 GiB (1,325,534,281,728 B, exact)
    small, big = 38_762_079_846, 1_325_534_281_728
    assert units.gib(small, "vllm") == "36.1"  # vLLM format_gib: round(b / GiB_bytes, 2), not zero-padded
    assert units.gib(small, "engine") == "36.10 GiB"  # an engine message's '{:.2f}'
    assert units.gib(big, "engine") == "1234.50 GiB"  # ... ungrouped
    assert units.gib(big) == gib(big) == "1,234.50 GiB"  # kvplan's reports group the thousands
    assert units.gib(small, "engine_exact") == "36.10 GiB (38,762,079,846 B)"
