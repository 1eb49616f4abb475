"""Each benchmark script run on its quickest setting with ``--json``: it exits 0, prints its tables
as before, and writes one strict JSON object with the expected keys and finite measured numbers.
CPU only, one thread; each run takes seconds (the slowest, influence, ~15 s on one core)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def run_benchmark(tmp_path: Path, script: str, *args: str,
                  timeout: float = 180) -> tuple[dict[str, Any], str]:
    """(the --json object, the printed output) of benchmarks/``script`` run with ``args``."""
    out = tmp_path / "results.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), *args, "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temporary left
    text = out.read_text()
    record = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in strict JSON"))
    assert isinstance(record, dict)
    return record, proc.stdout


def measured(value: Any) -> bool:
    """A finite number (not a bool, not null)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def positive(*values: Any) -> bool:
    return all(measured(v) and v > 0 for v in values)


def test_train_ensemble_json(tmp_path: Path) -> None:
    record, printed = run_benchmark(tmp_path, "train_ensemble.py", "--quick")
    assert set(record) == {"benchmark", "device", "quick", "settings", "mflop_per_model_step",
                           "matmul", "rows"}
    assert record["benchmark"] == "train_ensemble" and record["device"] == "cpu"
    assert record["quick"] is True and record["settings"]["ks"] == [1, 4]
    assert positive(record["mflop_per_model_step"])
    assert [(m["threads"], m["size"]) for m in record["matmul"]] == [(1, 512)]
    assert positive(record["matmul"][0]["gflop_per_s"])
    assert [(r["threads"], r["K"], r["method"]) for r in record["rows"]] == [
        (1, 1, "bmm"), (1, 1, "vmap"), (1, 4, "bmm"), (1, 4, "vmap")]
    for row in record["rows"]:
        assert set(row) == {"threads", "K", "method", "loop_us_per_model_step",
                            "vectorised_us_per_model_step", "speed_up", "vectorised_gflop_per_s",
                            "fraction_of_matmul"}
        assert positive(*(v for k, v in row.items() if k != "method"))
        assert row["speed_up"] == pytest.approx(
            row["loop_us_per_model_step"] / row["vectorised_us_per_model_step"])
    # the printed table is still there, and shows the same figures rounded
    first = record["rows"][0]
    assert "threads    K method   loop us    vec us speed-up vec GFLOP/s of matmul" in printed
    assert f"{first['speed_up']:>7.1f}x" in printed


def test_seed_batch_json(tmp_path: Path) -> None:
    record, printed = run_benchmark(tmp_path, "seed_batch.py", "--quick")
    assert set(record) == {"benchmark", "device", "quick", "threads", "settings", "rows"}
    assert record["benchmark"] == "seed_batch" and record["device"] == "cpu"
    assert record["quick"] is True and record["settings"]["ks"] == [1, 4]
    assert [(r["family"], r["K"]) for r in record["rows"]] == [
        (f, k) for f in ("mlp", "cnn", "transformer") for k in (1, 4)]
    for row in record["rows"]:
        assert set(row) == {"family", "K", "separate_s", "ensemble_s", "speed_up",
                            "max_abs_logit_diff"}
        assert positive(row["separate_s"], row["ensemble_s"], row["speed_up"])
        assert row["speed_up"] == pytest.approx(row["separate_s"] / row["ensemble_s"])
        # in float64 the ensemble trains the separate runs' models: rounding apart, the same outputs
        assert measured(row["max_abs_logit_diff"]) and row["max_abs_logit_diff"] < 1e-9
    assert "family         K  separate s  ensemble s  speed-up" in printed


def test_sharpness_json(tmp_path: Path) -> None:
    record, printed = run_benchmark(tmp_path, "sharpness.py", "--quick")
    assert {"benchmark", "device", "quick", "settings", "parameters", "train_s", "points",
            "reference", "traced_vs_hessian_top_eigenvalues_max_rel_diff", "to_target",
            "power_over_lanczos", "hvps_power_over_lanczos", "product_costs", "hvp_rel_mismatch",
            "tracking"} == set(record) - {"torch_threads"}
    points = ["untrained", "trained", "+10 steps"]
    assert record["benchmark"] == "sharpness" and record["device"] == "cpu"
    assert record["parameters"] == 13210 and positive(record["train_s"])
    assert list(record["points"]) == points == list(record["reference"])
    for ref in record["reference"].values():
        assert positive(ref["lambda_max"], ref["steps"], ref["residual"])
        assert measured(ref["lambda_2"]) and measured(ref["theta_min"])
        assert ref["lambda_2"] <= ref["lambda_max"]
    assert measured(record["traced_vs_hessian_top_eigenvalues_max_rel_diff"])
    assert list(record["hvps_power_over_lanczos"]) == points
    assert positive(*record["hvps_power_over_lanczos"].values())
    for point in points:
        assert positive(*record["power_over_lanczos"][point].values())
    rows = {(r["point"], r["method"]): r for r in record["to_target"]}
    assert len(rows) == 4 * len(points)
    for point in points:
        for method in ("Lanczos", "power iteration"):
            row = rows[point, method]
            assert positive(row["hvps_median"], row["hvps_worst"], row["median_s"],
                            row["worst_s"])
            assert row["rel_err_median"] <= 1e-3
        assert record["hvps_power_over_lanczos"][point] == pytest.approx(
            rows[point, "power iteration"]["hvps_median"] / rows[point, "Lanczos"]["hvps_median"])
    assert [c["call"] for c in record["product_costs"]] == [
        "gradient, float64", "gradient, float32 (training)",
        "HVP, curvature_operator (genlab, kept gradient graph)",
        "HVP, curvlinops HessianLinearOperator", "HVP, double backward rebuilt per product"]
    assert all(positive(c["ms"], c["per_float64_gradient"]) for c in record["product_costs"])
    assert record["product_costs"][0]["per_float64_gradient"] == 1.0
    assert measured(record["hvp_rel_mismatch"]) and record["hvp_rel_mismatch"] < 1e-6
    tracking = record["tracking"]["+10 steps"]
    assert 0 < tracking["overlap_abs_cos"] <= 1 + 1e-9
    assert {(r["method"], r["start"]) for r in tracking["rows"]} == {
        (m, s) for m in ("Lanczos", "power iteration", "hessian_top_eigenvalues(tol=0.001)")
        for s in ("warm", "cold")}
    assert "1. HVPs and seconds until" in printed and "power / Lanczos" in printed


def test_influence_json(tmp_path: Path) -> None:
    # --quick at one section-2 size and a short LiSSA: ~15 s on one core (--quick alone: ~30 s)
    record, printed = run_benchmark(tmp_path, "influence.py", "--quick", "--sizes", "300",
                                    "--lissa-depth", "100")
    assert set(record) == {"benchmark", "quick", "settings", "parameters", "lambda", "train_s",
                           "train_grad_max", "loo_points", "loo_s", "n_train", "n_test",
                           "methods", "memory_vs_n_train"}
    assert record["parameters"] == 385 and record["n_train"] == 300 and record["n_test"] == 50
    assert record["settings"] == {"chunk": 256, "sizes": [300], "lissa_depth": 100, "threads": 1}
    assert positive(record["train_s"], record["train_grad_max"], record["loo_s"])
    names = ["ekfac", "exact", "cg", "lissa", "exact, materialised G"]
    assert list(record["methods"]) == names
    for figures in record["methods"].values():
        assert set(figures) == {"s", "over_exact", "peak_mib", "loo_pearson", "loo_spearman",
                                "cos_vs_exact"}
        assert positive(figures["s"], figures["over_exact"], figures["peak_mib"])
        assert all(-1 <= figures[k] <= 1 + 1e-9 for k in
                   ("loo_pearson", "loo_spearman", "cos_vs_exact"))
    assert record["methods"]["exact"]["over_exact"] == 1.0
    assert record["methods"]["cg"]["cos_vs_exact"] > 0.999
    [size] = record["memory_vs_n_train"]
    assert size["n_train"] == 300 and positive(size["gradient_matrix_mib"],
                                               size["score_matrix_mib"])
    assert list(size["peak_mib"]) == names == list(size["s"])
    assert positive(*size["peak_mib"].values(), *size["s"].values())
    assert "2. peak memory (MB) against n_train" in printed


def test_intrinsic_dim_json(tmp_path: Path) -> None:
    pytest.importorskip("skdim", reason="the reference side: scikit-dimension (genlab[dev])")
    # one estimator at one size: two fresh processes (~4 s each, mostly imports); MLE's row is
    # the same code with another fit
    record, printed = run_benchmark(tmp_path, "intrinsic_dim.py", "--quick", "--sizes", "2000",
                                    "--estimators", "twonn")
    assert set(record) == {"benchmark", "quick", "settings", "rows"}
    assert record["settings"]["sizes"] == [2000] and record["settings"]["repeats"] == 1
    assert [(r["estimator"], r["n"]) for r in record["rows"]] == [("twonn", 2000)]
    for row in record["rows"]:
        assert set(row) == {"estimator", "n", "ours", "skdim", "abs_diff", "skdim_s",
                            "skdim_s_extrapolated", "speed_up"}
        for side in ("ours", "skdim"):
            assert set(row[side]) == {"value", "s", "peak_mib", "peak_exact"}
            assert positive(row[side]["value"], row[side]["s"])
            assert measured(row[side]["peak_mib"]) and row[side]["peak_mib"] >= 0
        assert 5 < row["ours"]["value"] < 15  # a 10-D latent
        assert measured(row["abs_diff"]) and row["abs_diff"] < 1e-6
        assert positive(row["skdim_s"], row["speed_up"]) and row["skdim_s_extrapolated"] is False
    assert "estimator       n      ours     skdim" in printed


def test_results_json_writes_strict_json_with_null_for_non_finite(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("results_json", BENCHMARKS / "results_json.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "sub" / "r.json"
    module.write_json(out, {"a": math.inf, "b": (1, np.float64(2.5), math.nan), 3: {"c": -1e-3},
                            "d": np.int64(7), "e": "x"})
    assert json.loads(out.read_text()) == {"a": None, "b": [1, 2.5, None], "3": {"c": -1e-3},
                                           "d": 7, "e": "x"}
    assert [p.name for p in out.parent.iterdir()] == ["r.json"]
    module.write_json(None, {"a": 1})  # no --json: nothing written
