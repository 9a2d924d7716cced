"""Bytes, token counts and link speeds: constants and parsers. Formatting lives in ``kvplan.render``.

One grammar for every number a user types (README "Numbers kvplan reads"):

- Token counts use binary suffixes, as model cards do: ``1M`` = 1,048,576 tokens, ``128K`` = 131,072 (``k``/``m``/``g``
  in either case). Exact counts may group digits with commas in threes (``1,048,576``, kvplan's own printed
  style) or underscores (``1_048_576``), or use an exponent (``1e6`` = 1,000,000). The result must be whole.
- Lists of token counts (``budget --ctx``) are separated by ``;``, spaces, or commas; digits grouped in threes by
  commas are one number (``1,000,000`` is one million), so write ``128;256`` to list two small counts.
- Byte sizes always need a unit: decimal (``GB`` = 10**9) or binary (``GiB`` = 2**30), read case-insensitively
  (``88gib``, ``141gb``); a lowercase ``b`` after an uppercase prefix (``Gb``, ``Mib``) means bits and is refused.
- Link speeds: ``B`` is bytes and ``b`` bits (``400Gb/s``, ``400Gbps``, ``400Gbit`` = 50 GB/s; ``50GB/s``,
  ``50GBps``, ``46.5GiB/s``); a unit written all in lowercase (``400gb/s``) is ambiguous and refused.
- Every number has at most ``limits.MAX_INT_DIGITS`` digits, checked before it is converted.
"""

from __future__ import annotations

import re
from typing import Literal

from kvplan.errors import InputError
from kvplan.limits import MAX_INT_DIGITS, MAX_TOKENS, LimitError, bounded_int

KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

_DECIMAL_PREFIX = {"": 1, "K": KB, "M": MB, "G": GB, "T": TB}
_BINARY_PREFIX = {"K": KiB, "M": MiB, "G": GiB, "T": TiB}
_TOKEN_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_ZERO_ALLOWED = ("--gen", "--hit")
"""Options where 0 tokens means something (no generation, no cached prefix); every other count must be positive."""

_NUMBER = r"(\d+(?:_\d+)*(?:\.\d+)?|\.\d+)"
_GROUPED = r"\d{1,3}(?:,\d{3})+"
_BYTES_RE = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-z]+)\s*$")
_TOKENS_RE = re.compile(rf"^\s*({_GROUPED}|\d+(?:_\d+)*(?:\.\d+)?|\.\d+)\s*([kKmMgG]?)\s*$")
_EXP_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)[eE]\+?(\d{1,2})\s*$")
_LINK_RE = re.compile(
    rf"^\s*{_NUMBER}\s*([kKmMgGtT])(i?)(bits?|bytes?|b)(/s|ps|/sec)?\s*$",
    re.IGNORECASE,
)
_LIST_ITEM_RE = re.compile(rf"\s*({_GROUPED}(?:\.\d+)?\s*[kKmMgG]?(?![\d,])|[^,;\s]+)\s*(?:[,;]|\s+|$)")
LIST_RULE = "list items are separated by ',', ';' or spaces; digits grouped in threes by commas are one number"
TOKENS_HELP = "an integer (1048576, 1,048,576, 1e6) or a binary count such as 128K or 1M"


GibStyle = Literal["report", "engine", "engine_exact", "vllm"]


def gib(n: int, style: GibStyle = "report") -> str:
    """``n`` bytes in gibibytes to two places, as whoever prints it words them:
    report '1,234.57 GiB' (kvplan's reports), engine '1234.57 GiB' (an engine message's ``{:.2f}``),
    engine_exact '52.68 GiB (56,565,170,176 B)' (a refusal with its bytes), vllm '36.1' (vLLM's ``format_gib``:
    ``round(x, 2)``, not zero-padded, no unit: the caller's text says GiB, as vLLM's does)."""
    if style == "vllm":
        return f"{round(n / GiB, 2)}"
    text = f"{n / GiB:,.2f} GiB" if style == "report" else f"{n / GiB:.2f} GiB"
    return f"{text} ({n:,} B)" if style == "engine_exact" else text


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints."""
    return -(-a // b)


def _digits_ok(number: str, text: object) -> None:
    digits = sum(ch.isdigit() for ch in number)
    if digits > MAX_INT_DIGITS:
        raise LimitError(
            f"{str(text)[:24]!r}…: a number of {digits:,} digits is past kvplan's limit of {MAX_INT_DIGITS}"
        )


def _scaled(number: str, scale: int) -> tuple[int, int]:
    """number × scale in exact decimal arithmetic: (whole part, remainder numerator)."""
    digits = number.replace("_", "").replace(",", "")
    whole, _, frac = digits.partition(".")
    numerator = int(whole or "0") * 10 ** len(frac) + int(frac or "0")
    whole_part, rest = divmod(numerator * scale, 10 ** len(frac))
    return int(whole_part), int(rest)


def _byte_scale(unit: str) -> int | None:
    """The multiplier of a byte unit, read case-insensitively; None if unknown. Bits are refused."""
    u = unit.upper()
    if u == "B":
        return 1
    prefix, binary, body = u[:1], u[1:-1], u[-1:]
    if body != "B" or binary not in ("", "I") or prefix not in "KMGT":
        return None
    if unit[-1] == "b" and unit[0].isupper():
        raise InputError(f"unit {unit!r} is bits; memory sizes are in bytes: write {prefix}{binary.lower()}B")
    return (_BINARY_PREFIX if binary else _DECIMAL_PREFIX)[prefix]


def parse_bytes(text: str) -> int:
    """'80GiB' -> 85899345920, '141GB' -> 141000000000, '88gib' -> 94489280512. A bare number is an error.

    >>> parse_bytes("1.5 KiB")
    1536
    """
    m = _BYTES_RE.match(str(text))
    if not m:
        if re.match(rf"^\s*{_NUMBER}\s*$", str(text)):
            raise InputError(
                f"byte size {text!r} has no unit: write e.g. '{str(text).strip()}GiB' or '{str(text).strip()}GB'"
            )
        raise InputError(f"byte size {str(text)[:40]!r} is not a number with a unit such as GiB or GB")
    number, unit = m.groups()
    _digits_ok(number, text)
    try:
        scale = _byte_scale(unit)
    except InputError as e:
        raise InputError(f"byte size {text!r}: {e}") from None
    if scale is None:
        raise InputError(f"byte size {text!r}: unknown unit {unit!r} (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    value, rest = _scaled(number, scale)
    if rest and (scale == 1 or value == 0):  # '0.5B' is no byte count: never floored to 0 in silence
        raise InputError(f"byte size {text!r} is not a whole number of bytes")
    return value  # '94.46GiB' (a log's two decimals) truncates to whole bytes


def parse_tokens(text: str | int) -> int:
    """'1M' -> 1048576, '128K' -> 131072, '1,048,576' -> 1048576, '1e6' -> 1000000. Never negative.

    >>> parse_tokens("1M")
    1048576
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise InputError(f"token count {text} is negative")
        return bounded_int(text, name="token count", low=0, high=MAX_TOKENS)
    s = str(text)
    exp = _EXP_RE.match(s)
    if exp:
        mantissa, power = exp.groups()
        _digits_ok(mantissa, s)
        value, rest = _scaled(mantissa, 10 ** int(power))
    else:
        m = _TOKENS_RE.match(s)
        if not m:
            raise InputError(f"token count {s[:40]!r} is not {TOKENS_HELP}")
        number, suffix = m.groups()
        _digits_ok(number, s)
        value, rest = _scaled(number, _TOKEN_SUFFIX[suffix.upper()])
    if rest:
        raise InputError(f"token count {s!r} is not a whole number of tokens")
    return bounded_int(value, name=f"token count {s.strip()!r}", low=0, high=MAX_TOKENS)


def parse_positive_tokens(text: str | int, what: str = "token count") -> int:
    """parse_tokens for a count that must be at least 1 (contexts, chunk sizes, pool sizes)."""
    n = parse_tokens(text)
    if n <= 0:
        raise InputError(f"{what} must be positive, got {text!r}")
    return n


def parse_percent_ppm(text: str) -> int:
    """'2%' -> 20,000 parts per million; '0.5%' -> 5,000. The % sign is required."""
    m = re.match(rf"^\s*{_NUMBER}\s*%\s*$", str(text))
    if not m:
        raise InputError(f"percentage {str(text)[:40]!r}: write it with a % sign, e.g. 2%")
    _digits_ok(m.group(1), text)
    value, _ = _scaled(m.group(1), 10_000)
    return value


def parse_concurrency(text: str) -> tuple[int, int]:
    """'4@128K' -> (4 requests, 131,072 tokens each)."""
    count, sep, tokens = str(text).partition("@")
    if not sep or not count.strip().isdigit() or not count.strip().isascii():
        raise InputError(f"concurrency {str(text)[:40]!r}: write N@CTX, e.g. 4@128K")
    n_requests = parse_positive_tokens(count.strip(), f"concurrency {text!r}: the request count")
    n = parse_positive_tokens(tokens, f"concurrency {text!r}: the context")
    bounded_int(n_requests * n, name=f"concurrency {text!r} (requests × context)", low=1, high=MAX_TOKENS)
    return n_requests, n


def parse_token_list(text: str) -> tuple[int, ...]:
    """'8K,128K,1M' -> (8192, 131072, 1048576); '1,000,000' -> (1000000,); '128;256' -> (128, 256).

    Items are separated by ``,``, ``;`` or spaces; a run of digits grouped in threes by commas is one number.
    """
    s = str(text)
    items: list[str] = []
    pos = 0
    while pos < len(s):
        m = _LIST_ITEM_RE.match(s, pos)
        if m is None or m.end() == pos:
            break
        items.append(m.group(1))
        pos = m.end()
    if not items or s[pos:].strip(" ,;"):
        raise InputError("empty list of token counts" if not s.strip(" ,;") else f"cannot read {s[:40]!r} as a list")
    try:
        return tuple(parse_positive_tokens(t) for t in items)
    except InputError as e:
        raise type(e)(f"{e} ({LIST_RULE})") from None


def parse_option_tokens(option: str, text: str) -> int:
    """parse_tokens for a command-line option, naming the option in the error; 0 only where it means something."""
    try:
        n = parse_tokens(text)
    except InputError as e:
        raise type(e)(f"{option}: {e}") from None
    if n <= 0 and option not in _ZERO_ALLOWED:
        raise InputError(f"{option} must be positive, got {text!r}")
    return n


def parse_link(text: str) -> int:
    """Link speed in bytes/s: '400Gbps' / '400Gb/s' / '400Gbit' -> 50 GB/s; '50GB/s' / '50GBps'; '46.5GiB/s'.

    ``B`` is bytes and ``b`` bits; the words ``bit`` and ``byte`` count in any case. A unit all in lowercase
    (``400gb/s``) is refused as ambiguous. Bits are divided by 8 and rounded down to whole bytes per second.
    """
    s = str(text)
    m = _LINK_RE.match(s)
    hint = "give a speed such as 400Gb/s or 400Gbps (bits), 50GB/s or 50GBps (bytes), 46.5GiB/s"
    if not m:
        raise InputError(f"--link {s[:40]!r}: {hint}")
    number, prefix, binary, body, _rate = m.groups()
    _digits_ok(number, s)
    word = body.lower()
    if word.startswith("bit"):
        bits = True
    elif word.startswith("byte"):
        bits = False
    elif not any(ch.isupper() for ch in prefix + binary + body):
        raise InputError(
            f"--link {s!r} is ambiguous: write {number}{prefix.upper()}b/s for bits or {number}{prefix.upper()}B/s"
            " for bytes (B = bytes, b = bits)"
        )
    else:
        bits = body == "b"
    scale = (_BINARY_PREFIX if binary else _DECIMAL_PREFIX)[prefix.upper()]
    value = _scaled(number, scale)[0]
    value = value // 8 if bits else value
    if value <= 0:
        raise InputError(f"--link {s!r} must be positive")
    return value


_DURATION_RE = re.compile(r"^\s*(\d{1,9}(?:\.\d{1,6})?)\s*(us|µs|ms|s|min)\s*$")
_DURATION_US = {"us": 1, "µs": 1, "ms": 1_000, "s": 1_000_000, "min": 60_000_000}
_RATE_RE = re.compile(r"^\s*(\d{1,12}(?:\.\d{1,6})?)\s*([kKmM]?)\s*(tok/s|tokens/s|/s)\s*$")


def parse_duration_us(option: str, text: str) -> int:
    """'2s' -> 2,000,000 µs, '50ms' -> 50,000, '0.5s'; a unit is required (us, ms, s, min); positive."""
    m = _DURATION_RE.match(str(text))
    if not m:
        raise InputError(f"{option} {str(text)[:40]!r}: give a duration with its unit, e.g. 2s, 50ms, 800us")
    value, rest = _scaled(m.group(1), _DURATION_US[m.group(2)])
    if value + (rest > 0) <= 0:
        raise InputError(f"{option} must be positive, got {text!r}")
    return value + (rest > 0)  # a fraction of a microsecond rounds up


def parse_per_s(option: str, text: str, unit: str = "tok/s") -> int:
    """'20000tok/s' / '20K tok/s' -> 20,000 a second (rounded down); '2.5/s' for a request rate; positive."""
    m = _RATE_RE.match(str(text))
    if not m:
        raise InputError(f"{option} {str(text)[:40]!r}: give a rate such as 20000{unit} or 20K{unit}")
    value, _ = _scaled(m.group(1), {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2).lower()])
    if value <= 0:
        raise InputError(f"{option} must be at least 1{unit}, got {text!r}")
    return value


_REQ_RATE_RE = re.compile(r"^\s*(\d{1,6}(?:\.\d{1,6})?)\s*(?:req)?/s\s*$")


def parse_request_rate(option: str, text: str) -> float:
    """'2.5/s' or '2.5req/s' -> 2.5 requests a second; above 0 (a float: it only sets the mean of random gaps)."""
    m = _REQ_RATE_RE.match(str(text))
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"{option} {str(text)[:40]!r}: give requests a second above 0, e.g. 2.5/s")
    return float(m.group(1))
