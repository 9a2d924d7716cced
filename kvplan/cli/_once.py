"""Every option used or refused.

click (vendored by typer) keeps the last of a single-value option given twice (``fit --require-ctx 1M
--require-ctx 128K`` planned 128K alone and said FITS); ``SingleValues`` refuses the repeat before parsing.
``needs`` refuses an option typed on the command line that has no effect without another one (``--link``
without ``--pd``). Both are usage errors: one line, exit 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typer import Context
from typer._click.core import ParameterSource
from typer._click.exceptions import UsageError
from typer.core import TyperCommand, TyperOption

from kvplan.limits import check_environment


class SingleValues(TyperCommand):
    """A kvplan command whose single-value options may be given once (``multiple`` ones, e.g. ``--set``, repeat)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        check_environment()  # KVPLAN_MAX_*_BYTES: a bad value is refused, not the default in silence
        repeated = first_repeat(self.params, args)
        if repeated is not None:
            raise UsageError(repeated, ctx)
        return super().parse_args(ctx, args)


def first_repeat(params: Sequence[Any], args: Sequence[str]) -> str | None:
    """The message for the first single-value option or flag given twice in args (``--eagle`` then
    ``--no-eagle`` included), or None. Values are skipped as click reads them (``--opt VALUE``, ``--opt=VALUE``,
    ``-oVALUE``), so a value that looks like an option is a value."""
    takes: dict[str, TyperOption] = {}
    flags: dict[str, TyperOption] = {}
    for p in params:
        if isinstance(p, TyperOption) and not p.count and p.nargs == 1:
            # every option that reads a value (its value is skipped); a flag reads none
            (flags if p.is_flag else takes).update((o, p) for o in (*p.opts, *p.secondary_opts))
    seen: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        i += 1
        name: str | None = arg
        value: str | None = arg
        if arg in flags:
            option = flags[arg]
        else:
            name, value = _split(arg, takes)
            if name is None:
                continue
            if value is None:  # the value is the next argument
                value = args[i] if i < len(args) else ""
                i += 1
            option = takes[name]
        assert name is not None and value is not None
        key = option.name or name
        if option.multiple:  # --set KNOB=VALUE, repeatable by design
            continue
        if key in seen and option.is_flag:
            first = seen[key]
            both = f"{name} given twice" if first == name else f"{first} and {name} both given"
            return f"{both}: kvplan does not keep only the last; give one"
        if key in seen:
            return (
                f"{name} given twice ({seen[key][:40]!r}, then {value[:40]!r}): it takes one value, and kvplan does"
                " not keep only the last; give it once"
            )
        seen[key] = value
    return None


def _split(arg: str, takes: dict[str, TyperOption]) -> tuple[str | None, str | None]:
    """(option, inline value or None) when arg names a single-value option, else (None, None)."""
    if arg.startswith("--"):
        name, eq, value = arg.partition("=")
        return (name, value if eq else None) if name in takes else (None, None)
    if arg.startswith("-") and len(arg) >= 2 and arg[:2] in takes:
        return arg[:2], (arg[2:] if len(arg) > 2 else None)
    return None, None


def typed(ctx: Context, name: str) -> bool:
    """Whether the option ``name`` (its parameter name) was given on the command line or in the environment."""
    source = ctx.get_parameter_source(name)
    return source is not None and source not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def needs(ctx: Context, option: str, name: str, requirement: str, present: Any) -> None:
    """Refuse ``option`` (parameter ``name``) when typed while ``requirement`` is absent (``present`` falsy): it
    would have no effect, and a user who typed it expects one."""
    if not present and typed(ctx, name):
        raise UsageError(f"{option} has no effect without {requirement}: add {requirement} or drop {option}", ctx)
