"""What a claim asserts of its effect, as params.yaml states it: a :class:`Rule` such as
``>= 2.5``, ``< 0`` or ``within [0.95, 1.15]``, judged against an estimate's 95% interval.

Cheap on purpose (no numpy): the settings validate a study's rules when params.yaml is loaded,
before any job runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from genlab.studies.intervals import Estimate

IntervalVerdict = Literal["reproduced", "not_reproduced", "inconclusive"]
RULE_FORMS = "'>= x', '> x', '<= x', '< x' or 'within [low, high]'"
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_ONE_SIDED = re.compile(rf"^\s*(>=|>|<=|<)\s*({_NUMBER})\s*$")
_WITHIN = re.compile(rf"^\s*within\s*\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]\s*$")


@dataclass(frozen=True)
class Rule:
    """What a claim asserts of its effect: ``op`` ``threshold`` (``>=``, ``>``, ``<=``, ``<``) or
    ``within`` ``[low, high]``. Thresholds come from params.yaml, declared before the run."""

    op: Literal[">=", ">", "<=", "<", "within"]
    threshold: float | tuple[float, float]

    def __post_init__(self) -> None:
        if self.op == "within":
            low, high = self.threshold  # type: ignore[misc]
            if not low <= high:
                raise ValueError(f"within [{low}, {high}]: low must not exceed high")
        elif self.op not in (">=", ">", "<=", "<") or isinstance(self.threshold, tuple):
            raise ValueError(f"unknown rule {self.op} {self.threshold}")

    def holds(self, x: float) -> bool:
        if self.op == "within":
            low, high = self.threshold  # type: ignore[misc]
            return low <= x <= high
        t = self.threshold
        return {">=": x >= t, ">": x > t, "<=": x <= t, "<": x < t}[self.op]  # type: ignore

    def judge(self, estimate: Estimate) -> IntervalVerdict:
        """reproduced: the whole interval satisfies the rule; not_reproduced: none of it does;
        inconclusive: it straddles a threshold, or there is no interval (one unit)."""
        if estimate.interval is None:
            return "inconclusive"
        lo, hi = estimate.interval
        if self.op == "within":
            low, high = self.threshold  # type: ignore[misc]
            if low <= lo and hi <= high:
                return "reproduced"
            return "not_reproduced" if hi < low or lo > high else "inconclusive"
        if self.holds(lo) and self.holds(hi):  # one-sided rules hold on an interval's ends
            return "reproduced"
        if not self.holds(lo) and not self.holds(hi):
            return "not_reproduced"
        return "inconclusive"

    def __str__(self) -> str:
        if self.op == "within":
            low, high = self.threshold  # type: ignore[misc]
            return f"within [{low:g}, {high:g}]"
        return f"{self.op} {self.threshold:g}"

    @classmethod
    def parse(cls, text: str) -> Rule:
        """The rule ``text`` states (see :data:`RULE_FORMS`); a ValueError naming the forms
        otherwise."""
        if m := _ONE_SIDED.match(text):
            return cls(m.group(1), float(m.group(2)))  # type: ignore[arg-type]
        if m := _WITHIN.match(text):
            return cls("within", (float(m.group(1)), float(m.group(2))))
        raise ValueError(f"{text!r} is not a rule; a rule is {RULE_FORMS}")


__all__ = ["RULE_FORMS", "IntervalVerdict", "Rule"]
