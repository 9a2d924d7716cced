"""Bytes and token counts: constants and parsers. Formatting lives in ``kvplan.render``.

Token counts use binary suffixes, as model cards do: ``1M`` = 1,048,576 tokens, ``128K`` = 131,072.
Byte sizes always need a unit; both decimal (``GB`` = 10**9) and binary (``GiB`` = 2**30) are accepted.
"""

from __future__ import annotations

import re

from kvplan.errors import InputError

KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

_BYTE_UNITS = {
    "B": 1,
    "KB": KB,
    "MB": MB,
    "GB": GB,
    "TB": TB,
    "KIB": KiB,
    "MIB": MiB,
    "GIB": GiB,
    "TIB": TiB,
}
_TOKEN_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

_NUMBER = r"(\d+(?:_\d+)*(?:\.\d+)?|\.\d+)"
_BYTES_RE = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-z]+)\s*$")
_TOKENS_RE = re.compile(rf"^\s*{_NUMBER}\s*([kKmMgG]?)\s*$")


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints."""
    return -(-a // b)


def _scaled(number: str, scale: int) -> tuple[int, int]:
    """number × scale in exact decimal arithmetic: (whole part, remainder numerator)."""
    digits = number.replace("_", "")
    whole, _, frac = digits.partition(".")
    numerator = int(whole or "0") * 10 ** len(frac) + int(frac or "0")
    whole_part, rest = divmod(numerator * scale, 10 ** len(frac))
    return int(whole_part), int(rest)


def parse_bytes(text: str) -> int:
    """'80GiB' -> 85899345920, '141GB' -> 141000000000. A bare number is an error.

    >>> parse_bytes("1.5 KiB")
    1536
    """
    m = _BYTES_RE.match(str(text))
    if not m:
        if re.match(rf"^\s*{_NUMBER}\s*$", str(text)):
            raise InputError(f"byte size {text!r} has no unit: write e.g. '{text}GiB' or '{text}GB'")
        raise InputError(f"byte size {text!r} is not a number with a unit such as GiB or GB")
    number, unit = m.groups()
    scale = _BYTE_UNITS.get(unit.upper())
    if scale is None or (unit.upper() != "B" and unit[-1] != "B"):
        raise InputError(f"byte size {text!r}: unknown unit {unit!r} (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    return _scaled(number, scale)[0]  # '94.46GiB' (a log's two decimals) truncates to whole bytes


def parse_tokens(text: str | int) -> int:
    """'1M' -> 1048576, '128K' -> 131072, '512k' -> 524288, '1000000' -> 1000000.

    >>> parse_tokens("1M")
    1048576
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = _TOKENS_RE.match(str(text))
    if not m:
        raise InputError(f"token count {text!r} is not an integer or a count like 128K or 1M")
    number, suffix = m.groups()
    value, rest = _scaled(number, _TOKEN_SUFFIX[suffix.upper()])
    if rest:
        raise InputError(f"token count {text!r} is not a whole number of tokens")
    return value


def parse_percent_ppm(text: str) -> int:
    """'2%' -> 20,000 parts per million; '0.5%' -> 5,000. The % sign is required."""
    m = re.match(rf"^\s*{_NUMBER}\s*%\s*$", str(text))
    if not m:
        raise InputError(f"percentage {text!r}: write it with a % sign, e.g. 2%")
    value, _ = _scaled(m.group(1), 10_000)
    return value


def parse_concurrency(text: str) -> tuple[int, int]:
    """'4@128K' -> (4 requests, 131,072 tokens each)."""
    count, sep, tokens = str(text).partition("@")
    if not sep or not count.strip().isdigit() or int(count) <= 0:
        raise InputError(f"concurrency {text!r}: write N@CTX, e.g. 4@128K")
    n = parse_tokens(tokens)
    if n <= 0:
        raise InputError(f"concurrency {text!r}: the context must be positive")
    return int(count), n


def parse_token_list(text: str) -> tuple[int, ...]:
    """'8K,128K,1M' -> (8192, 131072, 1048576)."""
    items = [t for t in str(text).split(",") if t.strip()]
    if not items:
        raise InputError("empty list of token counts")
    return tuple(parse_tokens(t) for t in items)


def parse_option_tokens(option: str, text: str) -> int:
    """parse_tokens for a command-line option, naming the option in the error."""
    try:
        return parse_tokens(text)
    except InputError as e:
        raise InputError(f"{option}: {e}") from None
