"""kvplan.perf.reserve: SGLang's running reservations (``PrefillAdder``: each decoding request's output left, clipped
at 4,096 by ``CLIP_MAX_NEW_TOKENS``) kept without a sum at each admission; every expected value worked by hand from
that rule: a request with r tokens left holds min(r, 4096)."""

from __future__ import annotations

import pytest

from kvplan.perf.reserve import Reservations, term


def test_a_term_falls_only_once_its_output_left_is_under_the_clip() -> None:
    # 5,000 left: 4,096 reserved, and 5,000 − 4,096 = 904 tokens made before it falls; 100 left: 100, falling now
    assert term(5000) == (4096, 904) and term(100) == (100, 0) and term(4096) == (4096, 0)


def test_the_sum_is_kept_exact_as_requests_start_finish_and_are_retracted() -> None:
    r = Reservations(accept=1000)
    falls = r.restart(count=50, lefts=[5000, 100, 4096])
    assert falls == [904, 0, 0] and r.at_least(50) == (4096 + 100 + 4096, True)
    # 10 steps later: 4,990 left still holds 4,096; 90; 4,086
    assert r.at_least(60) == (4096 + 90 + 4086, True)
    assert r.trend(60) == (4096 + 90 + 4086, 2, 904 - 10)  # two terms falling, the third after 894 more steps
    # a request of 6,000 left starts decoding at count 60: 4,096, falling after 1,904 more tokens (10 + 1,904)
    late = r.add(60, 6000)
    assert late == 1914
    # the 100-token request finishes at count 150 (its 100th step), holding 0
    r.drop(150, falls[1], 0)
    # at count 1,050 (1,000 steps after the sum): 4,000 left holds 4,000; 4,096 − 1,000 = 3,096; the late one has
    # 6,000 − 990 = 5,010 left and still holds 4,096
    assert r.at_least(1050) == (4000 + 3096 + 4096, True)
    # the 4,096 one is retracted at count 1,050 holding 3,096; at count 3,050: 2,000 and the late one 3,010
    r.drop(1050, falls[2], 3096)
    assert r.at_least(3050) == (2000 + 3010, True)
    # a request of 5,000 left starts at count 3,050 (3,000 steps after the sum): it falls after 3,000 + 904
    assert r.add(3050, 5000) == 3904
    # one not yet falling leaves: the late one retracted at 1,060 of 4,096 would have left 4,096 (its a 1,914 > 1,010)
    s = Reservations(accept=1000)
    a = s.add(0, 6000)
    s.drop(10, a, 4096)
    assert s.at_least(5000) == (0, True) and s.trend(5000) == (0, 0, 1 << 62)


@pytest.mark.parametrize(("steps", "expected"), [(0, (100, True)), (3, (100 - 8, False)), (50, (0, False))])
def test_speculative_decoding_gives_a_lower_bound_exact_only_before_a_step(
    steps: int, expected: tuple[int, bool]
) -> None:
    # 2.6 tokens accepted a step on average: 3 steps make at most ceil(7.8) = 8 tokens, at least floor(7.8) = 7, so
    # the request holds 92 or 93: 92 is a lower bound, not the sum; 50 steps: at most 130 ≥ 100, never below 0
    r = Reservations(accept=2600)
    r.restart(count=0, lefts=[100])
    assert r.at_least(steps) == expected


def test_with_speculative_decoding_a_retraction_voids_the_bound_until_the_next_sum() -> None:
    # a retracted request's term cannot be taken out exactly (its loss is bounded, not known): no bound (0) until
    # restart; a finished one holds at most 0 by then and stays in
    r = Reservations(accept=2600)
    a, b = r.restart(count=0, lefts=[100, 50])
    r.drop(20, b, 0)  # finished: 20 steps made at least 52 ≥ 50
    assert r.at_least(20)[0] > 0
    r.drop(20, a, 48)
    assert r.at_least(20) == (0, False)
    r.restart(count=20, lefts=[48])
    assert r.at_least(20) == (48, True)


def test_a_term_that_leaves_before_it_falls_is_skipped_once() -> None:
    # three requests of 5,000 left: each holds 4,096 and falls after 904 tokens (the same a). One is retracted at
    # count 10 still holding 4,096; at count 1,000 the two left hold min(5,000 − 1,000, 4,096) = 4,000 each
    r = Reservations(accept=1000)
    a = r.restart(count=0, lefts=[5000, 5000, 5000])
    r.drop(10, a[0], 4096)
    assert r.at_least(1000) == (2 * 4000, True)


def test_with_speculative_decoding_a_late_term_counts_its_loss_since_it_joined() -> None:
    # 2.6 tokens a step: after 3 steps the count's x is ceil(7.8) = 8 (the most made), while a request that starts
    # decoding then is counted as having made floor(7.8) = 7: its term already fell 1 below 50. The first request (100
    # left at count 0) has lost 8: 100 − 8 + 50 − 1 = 141
    r = Reservations(accept=2600)
    r.restart(count=0, lefts=[100])
    r.at_least(3)
    assert r.add(3, 50) == 7
    assert r.at_least(3) == (141, False)
    # and both go on falling: at count 10, x = 26: 100 − 26 + 50 − (26 − 7) = 105
    assert r.at_least(10) == (105, False)


def test_an_engine_that_has_run_nothing_counts_from_zero() -> None:
    # the empty sum at decode count 0: a request of 5,000 left starting then falls after 904 tokens; one of 100
    # left holds 90 after 10 steps, the sum of both 4,096 + 90
    r = Reservations(accept=1000)
    assert r.add(0, 5000) == 904 and r.add(0, 100) == 0
    assert r.at_least(10) == (4096 + 90, True)


def test_terms_leave_whether_or_not_they_have_started_to_fall() -> None:
    # 50 left, added and retracted at count 0 (its a is the count's x, 0: not yet falling), beside 5,000 left: at
    # count 10 the sum is the 4,096 the other still holds
    r = Reservations(accept=1000)
    r.restart(count=0, lefts=[5000])
    r.drop(0, r.add(0, 50), 50)
    assert r.at_least(10) == (4096, True)
    # 5,000 and 4,500 left fall after 904 and 404 tokens; the first is retracted at count 2,000 holding
    # min(3,000, 4,096) = 3,000: at count 3,000 the second holds min(4,500 − 3,000, 4,096) = 1,500
    s = Reservations(accept=1000)
    a = s.restart(count=0, lefts=[5000, 4500])
    s.drop(2000, a[0], 3000)
    assert s.at_least(3000) == (1500, True)
