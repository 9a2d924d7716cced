"""A verdict judged at the point estimate and at both ends of the pool's band (DESIGN §2.5.1): an outcome that
flips inside the band says so."""

from __future__ import annotations

from kvplan import record
from kvplan.engines.band import PoolBand, end_plans, pool_band
from kvplan.engines.common import PoolPlan
from kvplan.models.arch import ModelArch
from kvplan.plan.admit import Admission, Request, admit
from kvplan.plan.workspace import Workspace, WorkspaceQuery, workspace


@record
class BandVerdict:
    band: PoolBand
    point: bool
    """Admitted at the point estimate."""
    low: bool
    """Admitted with every estimate at the end that shrinks the pool."""
    high: bool

    @property
    def flips(self) -> bool:
        return not (self.point == self.low == self.high)

    def words(self) -> str:
        """'ADMITTED at the point estimate; rejected at the low end of the band', or '' where nothing flips."""
        if not self.flips:
            return ""
        if self.point:
            return "ADMITTED at the point estimate; rejected at the low end of the band"
        return "REJECTED at the point estimate; admitted at the high end of the band"


def judge(a: Admission, arch: ModelArch | None = None) -> BandVerdict:
    """``a`` re-judged on the plans at the band's ends; a pool read from a log has no band."""
    band = pool_band(a.plan, arch)
    if a.pool_source != "planned":
        band = PoolBand(a.plan.logged_tokens, a.plan.logged_tokens, a.plan.logged_tokens, band.terms)
    ends = end_plans(a.plan, arch) if not band.exact else None
    if ends is None:
        return BandVerdict(band, a.admitted, a.admitted, a.admitted)
    low, high = (_admitted(p, a.request) for p in ends)
    return BandVerdict(band, a.admitted, low, high)


def _admitted(plan: PoolPlan, req: Request) -> bool:
    return admit(plan, req, remedies=False).admitted


def low_end_plan(plan: PoolPlan, arch: ModelArch | None = None) -> PoolPlan | None:
    """The plan with every estimate at the end that shrinks the pool; None where nothing is estimated."""
    ends = end_plans(plan, arch)
    return ends[0] if ends is not None else None


@record
class WorkspaceBand:
    """A workspace question asked again on the plans at the band's ends (the same batch, context and chunk)."""

    fits: tuple[bool, bool, bool]
    """(low end, point, high end): the workspaces fit in the room."""
    pool_fits: tuple[bool, bool, bool]

    @staticmethod
    def words(ends: tuple[bool, bool, bool], yes: str, no: str) -> str:
        """'' where all three agree; else '<yes|no> at the point estimate; <no|yes> at the <low|high> end of the
        band'."""
        low, point, high = ends
        if low == point == high:
            return ""
        other, end = (low, "low") if low != point else (high, "high")
        return f"{yes if point else no} at the point estimate; {yes if other else no} at the {end} end of the band"


def judge_workspace(w: Workspace) -> WorkspaceBand | None:
    """``w`` on the plans at the band's ends; None where nothing is estimated."""
    ends = end_plans(w.plan)
    if ends is None:
        return None
    q = WorkspaceQuery(batch=w.batch, draft_tokens=w.draft_tokens, ctx=w.ctx, chunk=w.chunk)
    low, high = (workspace(p, q) for p in ends)
    return WorkspaceBand((low.fits, w.fits, high.fits), (low.pool_fits, w.pool_fits, high.pool_fits))
