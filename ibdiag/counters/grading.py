"""Turn counter changes into Results, by the catalogue's rules and the thresholds' overrides.

With a baseline, an error counter is judged on its increase: ``on_increase`` says what any
increase means, and a rate per hour above ``rate_warn_per_hour``/``rate_fail_per_hour`` warns or
fails. Without one, lifetime values are shown and fail only beyond ``lifetime_limit`` (off by
default): a port with 3 symbol errors in 90 days is healthy.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ibdiag.counters.catalogue import CounterInfo, lookup, rule_for
from ibdiag.counters.deltas import MIN_RATE_WINDOW_HOURS, Change, Comparison
from ibdiag.model import Result, Status
from ibdiag.thresholds import CounterRule, Thresholds

_ON_INCREASE = {"fail": Status.FAIL, "warn": Status.WARN, "info": Status.PASS}
_RANK = {Status.PASS: 0, Status.WARN: 1, Status.FAIL: 2}


def judge(change: Change, rule: CounterRule) -> Tuple[Status, str]:
    """The status of one counter's increase and the rule that decided it."""
    if not change.delta:
        return Status.PASS, "no increase"
    status = _ON_INCREASE[rule.on_increase or "info"]
    why = {Status.FAIL: "any increase fails", Status.WARN: "any increase warns"}.get(
        status, "informative"
    )
    rate = change.judged_per_hour
    if rate is not None:
        for limit, limit_status in (
            (rule.rate_fail_per_hour, Status.FAIL),
            (rule.rate_warn_per_hour, Status.WARN),
        ):
            if limit is not None and rate > limit and _RANK[limit_status] > _RANK[status]:
                short = (change.hours or 0) < MIN_RATE_WINDOW_HOURS
                window = f" (judged over at least {MIN_RATE_WINDOW_HOURS:g} h)" if short else ""
                status, why = limit_status, f"above {limit:g}/hour{window}"
    return status, why


def describe_change(change: Change, since: str) -> str:
    """ "symbol_error +340 since the baseline 2.0 h ago (170.0/hour)" and any restart.

    The rate is shown over an hour or more only: 2 errors in 10 s is not "720/hour".
    """
    long_enough = change.hours is not None and change.hours >= MIN_RATE_WINDOW_HOURS
    rate = f" ({change.per_hour:.1f}/hour)" if long_enough and change.per_hour is not None else ""
    restart = f"; counter restarted: {change.restarted}" if change.restarted else ""
    return f"{change.name} +{change.delta} {since}{rate}{restart}"


def format_interval(hours: float) -> str:
    """ "42 s", "12 min", "2.0 h", "3.5 days"."""
    seconds = hours * 3600
    if seconds < 120:
        return f"{seconds:.0f} s"
    if hours < 2:
        return f"{seconds / 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:.1f} days"


def since_phrase(comparison: Comparison) -> str:
    if comparison.hours is None:
        return "since the baseline"
    return f"since the baseline {format_interval(comparison.hours)} ago"


def _expected(rule: CounterRule, status: Status) -> str:
    """What the rule that decided ``status`` allows: no increase, or a rate."""
    if _ON_INCREASE.get(rule.on_increase or "info") == status:
        return "no increase"
    limit = rule.rate_fail_per_hour if status == Status.FAIL else rule.rate_warn_per_hour
    return f"at most {limit:g}/hour" if limit is not None else "no increase"


def grade_errors(
    target: str,
    values: Dict[str, int],
    previous: Optional[Dict[str, int]],
    comparison: Optional[Comparison],
    thresholds: Thresholds,
    directory: str,
    command: Optional[str] = None,
) -> List[Result]:
    """Results for the error-category counters of one port or device.

    ``previous`` is the matched baseline's values (None: no baseline for this target).
    Non-pass results come one per counter; a clean target gets one summarising pass.
    Evidence is ``directory/name`` for sysfs, or the ``command`` the values came from.
    """
    errors = {name: value for name, value in values.items() if lookup(name).category == "error"}
    if not errors:
        return []
    if comparison is None or previous is None:
        return _grade_lifetime(target, errors, thresholds, directory, command)
    results: List[Result] = []
    informative: List[str] = []
    restarted: List[str] = []
    since = since_phrase(comparison)
    for item in comparison.changes(errors, previous):
        info = lookup(item.name)
        rule = rule_for(item.name, thresholds)
        status, why = judge(item, rule)
        if item.restarted and not comparison.rebooted:
            restarted.append(item.name)
        if status == Status.PASS:
            if item.delta:
                informative.append(f"{item.name} +{item.delta}")
            continue
        results.append(
            Result(
                target=target,
                status=status,
                message=f"{describe_change(item, since)}: {why}",
                observed=item.delta,
                subject=item.name,
                expected=_expected(rule, status),
                hint=_hint(info),
                evidence=[command or f"{directory}/{item.name}"],
            )
        )
    if not results:
        extra = f"; informative: {', '.join(informative)}" if informative else ""
        if restarted:
            extra += f"; reset since the baseline (counted from zero): {', '.join(restarted)}"
        elif comparison.rebooted:
            extra += "; the node rebooted since the baseline (counted from zero)"
        results.append(
            Result(
                target=target,
                status=Status.PASS,
                message=f"{len(errors)} error counters: no graded increase {since}{extra}",
                observed=0,
                evidence=[command or directory],
            )
        )
    return results


def _grade_lifetime(
    target: str,
    errors: Dict[str, int],
    thresholds: Thresholds,
    directory: str,
    command: Optional[str],
) -> List[Result]:
    results: List[Result] = []
    for name, value in errors.items():
        limit = rule_for(name, thresholds).lifetime_limit
        if limit is not None and value > limit:
            info = lookup(name)
            results.append(
                Result(
                    target=target,
                    status=Status.FAIL,
                    message=f"{name} is {value} since boot or the last reset, above the "
                    f"lifetime limit {limit}",
                    observed=value,
                    expected=f"at most {limit}",
                    hint=_hint(info),
                    evidence=[command or f"{directory}/{name}"],
                )
            )
    if not results:
        nonzero = ", ".join(f"{name} {value}" for name, value in errors.items() if value)
        shown = f"lifetime {nonzero}" if nonzero else "all zero"
        results.append(
            Result(
                target=target,
                status=Status.PASS,
                message=f"{len(errors)} error counters, {shown} (no baseline: not graded on "
                "change; use --baseline or --state)",
                evidence=[command or directory],
            )
        )
    return results


def _hint(info: CounterInfo) -> str:
    return f"{info.action or info.meaning}; see `ibdiag explain {info.name}`"


def saturated(values: Dict[str, int]) -> List[CounterInfo]:
    """Catalogued fixed-width counters stuck at their maximum: they cannot count any more."""
    found = []
    for name, value in values.items():
        info = lookup(name)
        if info.saturated_value is not None and value == info.saturated_value:
            found.append(info)
    return found
