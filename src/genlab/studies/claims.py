"""The claims every study checks, and the one place their verdicts are decided.

A study declares its literature claims in a table (:func:`declare`: key -> :class:`Claim`, in the
order the report lists them), works out from its summary whether each holds, and hands the
verdict with the numbers behind it to :func:`decide`, which alone turns it into a
:class:`~genlab.studies.base.ClaimResult` and its status:

- one verdict: ``True`` reproduced, ``False`` not reproduced, ``None`` not run (the claim could
  not be checked: a reason is required, as ``reason=`` or as the numbers' own ``"reason"``);
- per-unit verdicts (a list, or a mapping label -> verdict: "at every step size", "in every
  seed"): the claim must hold in every unit. Every unit holds: reproduced; a unit fails:
  not reproduced, even when other units could not be checked (``None``); otherwise (no unit,
  or only holding and unchecked units) not run. ``every_unit_checked=True`` is stricter: any
  unchecked unit leaves the claim not run, even beside a failing one.

A claim's ``kind`` says how it is counted: a ``literature`` claim (a paper's, which could come
out either way) is reproduced or not; a ``control`` (a check that holds by construction or by
the method's guarantee: a solver against its exact solution, a random ranking at chance) passed
or failed, and the report and ``genlab claims`` count controls apart. A study names its
controls when it declares its table.

:func:`decide_effect` judges a claim by an estimate's 95% interval over independent units
(:mod:`genlab.studies.intervals`): reproduced when the whole interval satisfies the rule, not
reproduced when none of it does, inconclusive when it straddles the threshold;
:func:`decide_units` does so for the mean of a statistic measured once per seed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from genlab.studies.base import ClaimKind, ClaimResult, ClaimStatus
from genlab.studies.intervals import Estimate, Rule

Verdict = bool | None
"""Whether a claim (or one unit of it) holds; None: it could not be checked."""


@dataclass(frozen=True)
class Claim:
    """One literature claim, as a study declares it and the report shows it."""

    study: str
    key: str  # the claim's name within its study
    text: str  # the claim, in words
    criterion: str  # the pass criterion, in words
    citation: str
    kind: ClaimKind = "literature"


def declare(study: str, citation: str | Mapping[str, str],
            claims: Mapping[str, tuple[str, str]],
            controls: Collection[str] = ()) -> dict[str, Claim]:
    """A study's claim table: ``claims`` is key -> (text, criterion), in report order;
    ``citation`` is the study's one citation, or key -> citation; ``controls`` the keys that
    are controls, not literature claims."""
    unknown = set(controls) - set(claims)
    if unknown:
        raise ValueError(f"{study}: controls {sorted(unknown)} are not in its claim table")
    return {key: Claim(study=study, key=key, text=text, criterion=criterion,
                       citation=citation if isinstance(citation, str) else citation[key],
                       kind="control" if key in controls else "literature")
            for key, (text, criterion) in claims.items()}


def decide(claim: Claim, verdict: Verdict | Sequence[Verdict] | Mapping[str, Verdict],
           numbers: Mapping[str, Any], *, reason: str | None = None,
           every_unit_checked: bool = False, condition: str | None = None) -> ClaimResult:
    """The result of checking ``claim``: its status from ``verdict`` (see the module doc), with
    ``numbers``, and ``reason`` appended to them as ``"reason"`` when given; ``condition`` names
    the study's condition it was checked under, if the study declares several.

    A single ``None`` verdict needs a reason (``reason=`` or ``numbers["reason"]``)."""
    if reason is not None:
        if "reason" in numbers:
            raise ValueError(f"claim {claim.study}/{claim.key}: two reasons")
        numbers = {**numbers, "reason": reason}
    if isinstance(verdict, Mapping | list | tuple):
        units = list(verdict.values()) if isinstance(verdict, Mapping) else list(verdict)
        status = _every_unit(units, every_unit_checked)
    elif verdict is None:
        if "reason" not in numbers:
            raise ValueError(f"claim {claim.study}/{claim.key}: not run without a reason")
        status = "not_run"
    else:
        status = "reproduced" if verdict else "not_reproduced"
    return _result(claim, status, numbers, condition=condition)


def decide_effect(claim: Claim, rule: Rule | str, estimate: Estimate,
                  numbers: Mapping[str, Any], *, condition: str | None = None) -> ClaimResult:
    """The result of checking ``claim`` by ``estimate``'s 95% interval against ``rule`` (a Rule,
    or its text as params.yaml states it; see :meth:`genlab.claim_rules.Rule.judge`); the
    estimate, interval, n and rule go into the result beside ``numbers``."""
    rule = Rule.parse(rule) if isinstance(rule, str) else rule
    effect = {**estimate.to_json(), "rule": str(rule)}
    return _result(claim, rule.judge(estimate), numbers, effect, condition)


def decide_units(claim: Claim, rule: Rule | str, units: Mapping[Any, float | None],
                 numbers: Mapping[str, Any], *, condition: str | None = None,
                 unit_name: str = "seed") -> ClaimResult:
    """:func:`decide_effect` on the mean of per-unit values (``units``: seed -> the claim's
    statistic in that seed, None where it could not be measured), with its 95% interval
    (:func:`genlab.studies.intervals.mean_interval`). The values go into the numbers as
    ``by_<unit_name>``; with fewer than two measured units the claim is not run."""
    import math

    from genlab.studies.intervals import mean_interval

    measured = {k: float(v) for k, v in units.items() if v is not None and math.isfinite(v)}
    numbers = {**numbers, f"by_{unit_name}": {str(k): units[k] for k in units}}
    if len(measured) < 2:
        return decide(claim, None, numbers, condition=condition, reason=(
            f"{len(measured)} {unit_name}(s) measured of {len(units)}: an interval needs two"))
    return decide_effect(claim, rule, mean_interval(list(measured.values())), numbers,
                         condition=condition)


def paired_differences(a: Mapping[Any, float | None], b: Mapping[Any, float | None]
                       ) -> dict[Any, float | None]:
    """Per unit present in both (a seed, on common random numbers), ``a`` minus ``b``; None
    where either is None (a run that diverged or was left out). The units of
    :func:`decide_units`."""
    return {unit: None if a[unit] is None or b[unit] is None else a[unit] - b[unit]
            for unit in sorted(set(a) & set(b))}


def spearman(x: Sequence[float], y: Sequence[float], min_points: int = 3) -> float | None:
    """Spearman's rank correlation, None with fewer than ``min_points`` points or a constant
    side (two points give the sign of their relation, ±1)."""
    from scipy.stats import spearmanr

    if len(x) < min_points or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    if len(x) == 2:  # scipy needs three; two distinct points are perfectly (anti)monotone
        return 1.0 if (x[1] - x[0]) * (y[1] - y[0]) > 0 else -1.0
    return float(spearmanr(x, y).statistic)


_CONTROL_STATUS: dict[str, ClaimStatus] = {"reproduced": "passed", "not_reproduced": "failed"}


def _result(claim: Claim, status: ClaimStatus, numbers: Mapping[str, Any],
            effect: Mapping[str, Any] | None = None,
            condition: str | None = None) -> ClaimResult:
    if claim.kind == "control":
        status = _CONTROL_STATUS.get(status, status)
    elif claim.kind != "literature":
        raise ValueError(f"claim {claim.study}/{claim.key}: unknown kind {claim.kind!r}")
    return ClaimResult(study=claim.study, key=claim.key, claim=claim.text, status=status,
                       numbers=numbers, citation=claim.citation, criterion=claim.criterion,
                       kind=claim.kind, effect=effect, condition=condition)


def _every_unit(units: list[Verdict], every_unit_checked: bool) -> ClaimStatus:
    """The status of a claim that must hold in every unit."""
    unchecked = any(v is None for v in units)
    if not units or (every_unit_checked and unchecked):
        return "not_run"
    if any(v is not None and not v for v in units):
        return "not_reproduced"
    return "not_run" if unchecked else "reproduced"


__all__ = ["Claim", "ClaimKind", "Verdict", "declare", "decide", "decide_effect", "decide_units"]
