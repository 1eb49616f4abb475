"""Estimates with 95% intervals, and the three-way verdict a rule gives an interval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from genlab.studies.intervals import (
    Estimate,
    Rule,
    bootstrap_interval,
    mean_interval,
    paired_difference,
    t_interval,
)


def test_t_interval_is_the_textbook_formula() -> None:
    est = t_interval([1.0, 2.0, 3.0, 4.0])
    half = stats.t.ppf(0.975, 3) * np.std([1, 2, 3, 4], ddof=1) / 2  # 3.182 * 1.291 / 2
    assert est.value == 2.5 and est.n == 4 and est.method == "t"
    assert est.interval == pytest.approx((2.5 - half, 2.5 + half), rel=1e-12)
    assert half == pytest.approx(2.0543, abs=1e-4)
    assert t_interval([3.0]).interval is None


@pytest.mark.parametrize(("n", "low", "high"), [(5, 0.93, 0.97), (12, 0.90, 0.97)])
def test_mean_interval_covers_the_true_mean_about_95_percent_of_the_time(
        n: int, low: float, high: float) -> None:
    """Normal units: the t interval (n = 5) is exact, so its coverage is 95% up to the
    simulation's binomial error (sd 0.5 points over 2000 draws); BCa (n = 12) undercovers a
    little at that size (about 92-93%), hence the wider band."""
    rng = np.random.default_rng(1)
    draws = 2000 if n < 10 else 400
    hits = 0
    for _ in range(draws):
        est = mean_interval(rng.normal(1.0, 2.0, size=n))
        assert est.method == ("t" if n < 10 else "bootstrap")
        hits += est.interval[0] <= 1.0 <= est.interval[1]
    assert low <= hits / draws <= high


def test_bootstrap_is_reproducible_and_handles_constant_and_tiny_samples() -> None:
    values = [0.3, 1.2, 0.7, 2.5, 1.1, 0.9, 1.8, 0.4, 1.5, 1.0, 0.6]
    a, b = bootstrap_interval(values), bootstrap_interval(values)
    assert a == b and a.method == "bootstrap" and a.n == 11
    assert a.interval[0] < a.value < a.interval[1]
    med = bootstrap_interval(values, statistic=np.median)
    assert med.value == 1.0 and med.interval[0] <= 1.0 <= med.interval[1]
    assert bootstrap_interval([2.0] * 5).interval == (2.0, 2.0)
    assert bootstrap_interval([1.0, 2.0]).interval is None  # BCa needs three units


def test_paired_difference_pairs_by_unit() -> None:
    # the conditions differ by 4 in every seed, though each varies across seeds by far more
    est = paired_difference([5.0, 16.0, 7.0], [1.0, 12.0, 3.0])
    assert (est.value, est.interval, est.n) == (4.0, (4.0, 4.0), 3)
    unpaired = t_interval([5.0, 16.0, 7.0])
    assert unpaired.interval[1] - unpaired.interval[0] > 20
    with pytest.raises(ValueError, match="paired units must match"):
        paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        mean_interval([1.0, math.nan])


def interval(lo: float, hi: float) -> Estimate:
    return Estimate((lo + hi) / 2, (lo, hi), 3, "t")


@pytest.mark.parametrize(("rule", "lo", "hi", "verdict"), [
    (Rule(">=", 2.5), 2.6, 4.0, "reproduced"),
    (Rule(">=", 2.5), 2.5, 4.0, "reproduced"),  # the threshold itself satisfies >=
    (Rule(">", 2.5), 2.5, 4.0, "inconclusive"),  # ... but not >
    (Rule(">=", 2.5), 1.0, 2.4, "not_reproduced"),
    (Rule(">=", 2.5), 2.0, 3.0, "inconclusive"),
    (Rule("<", 0.0), -2.0, -0.1, "reproduced"),
    (Rule("<=", 0.0), 0.1, 0.2, "not_reproduced"),
    (Rule("<", 0.0), -0.1, 0.1, "inconclusive"),
    (Rule("within", (0.95, 1.15)), 1.0, 1.1, "reproduced"),
    (Rule("within", (0.95, 1.15)), 1.2, 1.4, "not_reproduced"),
    (Rule("within", (0.95, 1.15)), 0.5, 0.9, "not_reproduced"),
    (Rule("within", (0.95, 1.15)), 0.9, 1.0, "inconclusive"),
    (Rule("within", (0.95, 1.15)), 0.9, 1.2, "inconclusive"),  # wider than the band
])
def test_rule_judges_the_whole_interval(rule: Rule, lo: float, hi: float, verdict: str) -> None:
    assert rule.judge(interval(lo, hi)) == verdict


def test_one_unit_is_never_a_verdict_and_bad_rules_are_refused() -> None:
    assert Rule(">=", 0.0).judge(Estimate(5.0, None, 1, "t")) == "inconclusive"
    assert str(Rule("within", (0.95, 1.15))) == "within [0.95, 1.15]"
    assert str(Rule(">=", 2.5)) == ">= 2.5"
    with pytest.raises(ValueError):
        Rule("within", (2.0, 1.0))
    with pytest.raises(ValueError):
        Rule("==", 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("text, op, threshold", [
    (">= 2.5", ">=", 2.5), ("<0", "<", 0.0), ("> -1e-3", ">", -0.001),
    ("within [1, 10]", "within", (1.0, 10.0)), ("within[-0.5,.5]", "within", (-0.5, 0.5))])
def test_a_rule_parses_from_the_text_params_yaml_states(text, op, threshold):
    rule = Rule.parse(text)
    assert (rule.op, rule.threshold) == (op, threshold)
    assert Rule.parse(str(rule)) == rule  # the report's text reads back as the same rule


@pytest.mark.parametrize("text", ["bigger 3", ">= x", "within [2, 1]", "== 3", ""])
def test_a_malformed_rule_is_refused_naming_the_forms(text):
    with pytest.raises(ValueError, match="within"):
        Rule.parse(text)


def test_a_rule_in_settings_is_checked_when_params_load():
    from pydantic import ValidationError

    from genlab.settings import ClaimRule, FrozenModel

    class Rules(FrozenModel):
        effect: ClaimRule

    assert Rules(effect="> 0").effect == "> 0"
    with pytest.raises(ValidationError, match="is not a rule"):
        Rules(effect="positive")
