"""The shared claim machinery: every study's claim table, and the one function that decides a
claim's status from its verdict (one verdict, per-unit verdicts, an explicit not run)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from genlab.studies import NAMES, load_claims
from genlab.studies.base import ClaimResult
from genlab.studies.claims import Claim, decide, decide_effect, declare
from genlab.studies.intervals import Rule, mean_interval

CLAIMS = declare("toy", "Someone et al. 2020", {
    "fits": ("Networks fit the data", "train accuracy reaches 1.0"),
    "falls": ("Test accuracy falls", "mean test accuracy strictly decreases"),
})
FITS = CLAIMS["fits"]


def as_json(result: ClaimResult) -> str:
    """The result as reports/claims.json writes it: key order matters."""
    return json.dumps(result.to_json(), ensure_ascii=False)


def test_a_table_keeps_its_order_and_the_study_citation() -> None:
    assert list(CLAIMS) == ["fits", "falls"]
    expected = Claim(study="toy", key="fits", text="Networks fit the data",
                     criterion="train accuracy reaches 1.0", citation="Someone et al. 2020")
    assert expected == FITS
    assert FITS.kind == "literature"


def test_a_table_can_cite_per_claim() -> None:
    table = declare("toy", {"a": "Paper A", "b": "Paper B"},
                    {"a": ("claim a", "criterion a"), "b": ("claim b", "criterion b")})
    assert [c.citation for c in table.values()] == ["Paper A", "Paper B"]


@pytest.mark.parametrize("name", NAMES)
def test_every_study_declares_its_claims(name: str) -> None:
    table = load_claims(name).CLAIMS
    assert table and all(isinstance(c, Claim) and c.study == name and c.key == key
                         and c.text and c.criterion and c.citation for key, c in table.items())


@pytest.mark.parametrize(("verdict", "status"), [
    (True, "reproduced"), (False, "not_reproduced"),
    (np.bool_(True), "reproduced"), (np.float64(0.3) > 0.5, "not_reproduced")])
def test_one_verdict(verdict: Any, status: str) -> None:
    result = decide(FITS, verdict, {"train_acc": 0.99})
    assert result.status == status and result.numbers == {"train_acc": 0.99}
    assert (result.study, result.claim, result.citation, result.criterion) == (
        "toy", FITS.text, FITS.citation, FITS.criterion)


def test_not_run_appends_the_reason_last() -> None:
    result = decide(FITS, None, {"n_runs": 0}, reason="no run")
    assert result.status == "not_run"
    assert list(result.numbers.items()) == [("n_runs", 0), ("reason", "no run")]


def test_a_reason_already_in_the_numbers_keeps_its_place() -> None:
    result = decide(FITS, None, {"reason": "no run", "skipped": ["a"]})
    assert result.status == "not_run" and list(result.numbers) == ["reason", "skipped"]


def test_not_run_needs_a_reason_and_only_one() -> None:
    with pytest.raises(ValueError, match="without a reason"):
        decide(FITS, None, {"n_runs": 0})
    with pytest.raises(ValueError, match="two reasons"):
        decide(FITS, None, {"reason": "a"}, reason="b")


def test_a_decided_claim_can_say_why() -> None:
    result = decide(FITS, False, {"ratio": 3.0}, reason="never reached the target")
    assert result.status == "not_reproduced"
    assert list(result.numbers) == ["ratio", "reason"]


def test_the_numbers_are_not_copied_without_a_reason() -> None:
    numbers = {"ratio": 3.0}
    assert decide(FITS, True, numbers).numbers is numbers


@pytest.mark.parametrize(("units", "status"), [
    ([True, True], "reproduced"),
    ([True, False], "not_reproduced"),
    ([], "not_run"),
    ([True, None], "not_run"),
    ([None, None], "not_run"),
    ([None, False], "not_reproduced"),  # a failing unit outweighs an unchecked one
    ((True, np.bool_(True)), "reproduced"),
    ({"seed=0": True, "seed=1": False}, "not_reproduced"),
    ({"seed=0": True, "seed=1": None}, "not_run"),
    ({}, "not_run"),
])
def test_every_unit_must_hold(units: Any, status: str) -> None:
    assert decide(FITS, units, {}).status == status


@pytest.mark.parametrize(("units", "status"), [
    ([True, True], "reproduced"), ([True, False], "not_reproduced"), ([], "not_run"),
    ([True, None], "not_run"), ([None, False], "not_run")])
def test_every_unit_checked_leaves_any_unchecked_claim_not_run(units: Any, status: str) -> None:
    assert decide(FITS, units, {}, every_unit_checked=True).status == status


def test_an_unknown_kind_is_refused() -> None:
    odd = Claim(study="toy", key="x", text="t", criterion="c", citation="z",
                kind="interval")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown kind"):
        decide(odd, True, {})


CHECKED = declare("toy", "Someone et al. 2020", {
    "falls": ("Test accuracy falls", "mean test accuracy strictly decreases"),
    "chance": ("Random labels are at chance", "|acc - 1/C| <= 0.03"),
}, controls=("chance",))


@pytest.mark.parametrize(("verdict", "status"), [
    (True, "passed"), (False, "failed"), ([True, True], "passed"), ([True, False], "failed"),
    ([True, None], "not_run")])
def test_a_control_passes_or_fails_and_is_never_reproduced(verdict: Any, status: str) -> None:
    control = CHECKED["chance"]
    assert control.kind == "control" and CHECKED["falls"].kind == "literature"
    result = decide(control, verdict, {"acc": 0.1})
    assert (result.kind, result.status) == ("control", status)
    assert result.to_json()["kind"] == "control"


def test_controls_must_be_in_the_table() -> None:
    with pytest.raises(ValueError, match=r"controls \['nope'\] are not in its claim table"):
        declare("toy", "c", {"a": ("t", "c")}, controls=("nope",))


@pytest.mark.parametrize(("units", "status", "control_status"), [
    ([3.0, 3.2, 2.9, 3.1], "reproduced", "passed"),  # t interval about [2.8, 3.3]: all >= 2.5
    ([1.0, 4.0, 2.0, 3.5], "inconclusive", "inconclusive"),  # straddles 2.5
    ([1.0, 1.2, 0.9, 1.1], "not_reproduced", "failed"),
    ([3.0], "inconclusive", "inconclusive"),  # one unit: no interval, no verdict
])
def test_an_effect_is_judged_by_its_whole_interval(units: list[float], status: str,
                                                   control_status: str) -> None:
    rule, estimate = Rule(">=", 2.5), mean_interval(units)
    result = decide_effect(CHECKED["falls"], rule, estimate, {"by_seed": units})
    assert result.status == status
    assert decide_effect(CHECKED["chance"], rule, estimate, {}).status == control_status
    out = result.to_json()
    assert list(out) == ["study", "key", "kind", "claim", "condition", "status", "estimate",
                         "interval", "n", "interval_method", "rule", "numbers", "citation",
                         "criterion"]
    assert out["n"] == len(units) and out["rule"] == ">= 2.5" and out["interval_method"] == "t"
    assert out["estimate"] == pytest.approx(float(np.mean(units)))
    if len(units) > 1:
        lo, hi = out["interval"]
        assert lo < out["estimate"] < hi


# The helpers each study had before the shared function, as they were, for the JSON check.
TEXT, CRITERION, CITATION = FITS.text, FITS.criterion, FITS.citation


def old_claim(status: str, numbers: Mapping[str, Any]) -> ClaimResult:
    """benign_oscillation, influence, intrinsic_dim, measures_grid, mislabel_detection,
    random_labels, sgd_stability: the status decided by the caller."""
    return ClaimResult(study="toy", key=FITS.key, claim=TEXT, status=status,  # type: ignore[arg-type]
                       numbers=numbers, citation=CITATION, criterion=CRITERION)


def old_eos_claim(verdicts: list[bool | None], numbers: dict[str, Any]) -> ClaimResult:
    status = ("not_run" if not verdicts or any(v is None for v in verdicts)
              else "reproduced" if all(verdicts) else "not_reproduced")
    return old_claim(status, numbers)


def old_collapse_decide(verdicts: Mapping[str, bool | None], numbers: dict[str, Any],
                        reasons: Mapping[str, str]) -> ClaimResult:
    values = list(verdicts.values())
    if values and all(v is True for v in values):
        status = "reproduced"
    elif any(v is False for v in values):
        status = "not_reproduced"
    else:
        status = "not_run"
    if reasons:
        numbers = {**numbers, "not_checked": dict(reasons)}
    return old_claim(status, numbers)


def test_the_json_is_the_old_helpers_json() -> None:
    base = {"eta_small": 0.01, "eta_large": 1.0, "n_diverged": {"0.01": 0, "1.0": 1}}
    ratio = 7.5
    pairs = [
        (old_claim("not_run", {**base, "reason": "every run diverged"}),
         decide(FITS, None, base, reason="every run diverged")),
        (old_claim("reproduced" if ratio >= 5 else "not_reproduced", {**base, "ratio": ratio}),
         decide(FITS, ratio >= 5, {**base, "ratio": ratio})),
        (old_claim("not_run", {"reason": "no trained run", "skipped": ["m-s0"]}),
         decide(FITS, None, {"reason": "no trained run", "skipped": ["m-s0"]})),
        (old_claim("not_reproduced", {"param_ratio": 9.0, "reason": "no d reached it"}),
         decide(FITS, False, {"param_ratio": 9.0}, reason="no d reached it")),
    ]
    for verdicts in ([True, True], [True, False], [], [True, None], [None, False]):
        numbers = {"lr=0.2,seed=0": {"crossed": False}, "diverged": []}
        pairs.append((old_eos_claim(verdicts, numbers),
                      decide(FITS, verdicts, numbers, every_unit_checked=True)))
    for verdicts, reasons in (({"seed=0": True}, {}),
                              ({"seed=0": None, "seed=1": False}, {"seed=0": "diverged"}),
                              ({"seed=0": None}, {"seed=0": "never reached 100%"}),
                              ({}, {})):
        numbers = {label: {"final_nc4": 0.001} for label, v in verdicts.items() if v is not None}
        new_numbers = {**numbers, "not_checked": dict(reasons)} if reasons else numbers
        pairs.append((old_collapse_decide(verdicts, numbers, reasons),
                      decide(FITS, verdicts, new_numbers)))
    for old, new in pairs:
        assert as_json(new) == as_json(old)


def test_decide_units_judges_the_mean_over_measured_seeds_and_needs_two() -> None:
    from genlab.studies.claims import decide_units

    result = decide_units(CHECKED["falls"], "> 0", {0: 0.2, 1: 0.3, 2: None, 3: 0.25}, {})
    assert result.status == "reproduced" and result.effect["n"] == 3
    assert result.numbers["by_seed"] == {"0": 0.2, "1": 0.3, "2": None, "3": 0.25}
    straddles = decide_units(CHECKED["falls"], "> 0", {0: 0.2, 1: -0.1, 2: 0.05}, {})
    assert straddles.status == "inconclusive"
    one = decide_units(CHECKED["falls"], "> 0", {0: 0.2, 1: float("nan")}, {},
                       condition="spread=1")
    assert one.status == "not_run" and "1 seed(s) measured of 2" in one.numbers["reason"]
    assert one.condition == "spread=1"
