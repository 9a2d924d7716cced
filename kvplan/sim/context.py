"""Requests the engine refuses for their length (:mod:`kvplan.lengths`) are answered with an error before
the scheduler sees them, so they never match, never write KV and never hold pages; a replay counts them instead
of running them, and runs the rest with the output the engine generates."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kvplan.lengths import ContextLimit
from kvplan.sim.result import Refused
from kvplan.sim.trace import Request


def admitted(requests: Iterable[Request], limit: ContextLimit | None, refused: Refused) -> Iterator[Request]:
    """The requests the engine runs, in trace order (indices kept: the window still counts trace positions);
    each refused one is tallied in ``refused``."""
    if limit is None:
        yield from requests
        return
    for r in requests:
        if limit.refuses(r.input_tokens, r.output_tokens):
            refused.add(r.input_tokens)
            continue
        out = limit.output_tokens(r.input_tokens, r.output_tokens)
        if out != r.output_tokens:
            r = Request(r.index, r.arrival_us, r.input_tokens, out, r.blocks, r.line, r.file)
        yield r
