"""Fuzz the command line (issue 10): any argv, any --set, any token text is a verdict or one line and exit 2.

Exit 4 (a kvplan bug) or an exception escaping the boundary fails the test; so does more than one stderr line.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "80"})

COMMANDS = [
    ["admit", "--ctx"],
    ["budget", "--ctx"],
    ["workspace", "--ctx"],
    ["prefix", "--ctx"],
    ["transfer", "--ctx"],
]
TOKENS = st.one_of(
    st.sampled_from(["1M", "128K", "0", "-1", "1e6", "1.5M", "1,048,576", "99999999999999999999999", "", "1M,2K"]),
    st.text(alphabet="0123456789KMkm.,-+e_ ", max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)
KNOBS = st.sampled_from(
    ["dcp", "tp", "mem_fraction_static", "page_size", "context_length", "weights_per_gpu", "kv_cache_dtype", "bogus"]
)
VALUES = st.one_of(
    st.sampled_from(["8", "0", "-1", "0.6", "2", "1M", "80GiB", "fp8", "nan", "inf", "1e400", "", "[1]", "{a: 1}"]),
    st.text(max_size=8),
)
EXTRA = st.lists(
    st.sampled_from(["--gen", "--concurrent", "--batch", "--mtp", "--hit", "--chunk", "--sweep", "--unit", "--link"]),
    max_size=2,
)


def check(r: Result, fmt: str) -> None:
    detail = f"exit {r.exit_code}\nstdout: {r.stdout[-500:]!r}\nstderr: {r.stderr!r}"
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{r.exception!r}\n{detail}"
    assert r.exit_code in (0, 1, 2), detail  # never 4 (a kvplan bug), never a traceback
    assert "Traceback" not in r.stdout + r.stderr, detail
    if r.exit_code == 2:
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("kvplan: error: "), detail
        if fmt == "json":
            assert json.loads(r.stdout)["exit_code"] == 2, detail
    else:
        assert r.stderr == "", detail
        if fmt == "json":
            json.loads(r.stdout)


@given(
    command=st.sampled_from(COMMANDS),
    value=TOKENS,
    sets=st.lists(st.tuples(KNOBS, VALUES), max_size=2),
    extra=EXTRA,
    extra_value=TOKENS,
    fmt=st.sampled_from(["table", "json"]),
)
def test_any_command_line_is_a_verdict_or_one_error_line(
    command: list[str], value: str, sets: list[tuple[str, str]], extra: list[str], extra_value: str, fmt: str
) -> None:
    args = [*command, value]
    for k, v in sets:
        args += ["--set", f"{k}={v}"]
    for option in extra:
        args += [option, extra_value]
    r = runner.invoke(app, [*args, "--format", fmt])
    check(r, fmt)


@given(argv=st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-=0123456789 ", max_size=10), max_size=4))
def test_any_argv_never_crashes(argv: list[str]) -> None:
    r = runner.invoke(app, argv)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code in (0, 1, 2), (argv, r.exit_code, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
