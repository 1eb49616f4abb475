"""Benchmark: our TwoNN and MLE (genlab.analyses.dimension.estimators) against scikit-dimension
0.5.0.

Points: a 10-dimensional Gaussian latent tanh-embedded in R^64 (genlab.data.manifolds, seed 0),
n = 2k, 20k, 100k. For each n and each estimator, ours and skdim's, each in a fresh process:

- the answer, and |ours - skdim|: the algorithms are the same (TwoNN's linear fit through the
  origin after discarding the top 10% of r2/r1; MLE with k = 20 neighbours, the point itself
  excluded, averaged as MacKay & Ghahramani: ``MLE(k=20)`` vs ``skdim.id.MLE().fit(X,
  n_neighbors=20)``), so they should agree to rounding (checked at 1e-6);
- wall time of ``fit`` (the median of ``--repeats`` after a warm-up fit on 500 points, so numba
  compilation in skdim and first-call costs in torch are excluded), and the ratio skdim / ours;
- peak memory of the fit: the process's resident-set high-water mark (VmHWM, reset through
  /proc/self/clear_refs just before the fit) minus its resident set before the fit. That counts
  torch's, numpy's and sklearn's allocations alike, which tracemalloc would not.

skdim's TwoNN on data with more than 25 features sorts every row of the full n x n distance
matrix (``pairwise_distances_chunked`` then ``np.sort``): O(n^2 log n) time, memory bounded by
sklearn's working_memory (1 GiB). Its MLE uses sklearn's brute-force k-NN. Ours screens the
data less their mean in float32 tiles of 1024 x 1024 squared distances, each serving its rows'
and its columns' search (the tiles on and above the diagonal only), merging the entries below
per-row thresholds in compiled passes (numba), then re-ranks the candidates exactly in float64
(see ``genlab.analyses.dimension.neighbors.nearest_neighbors``). A skdim measurement that runs past
``--timeout`` seconds (300) is stopped and reported as such (skdim's TwoNN at n = 100k: its
time is then extrapolated from n = 20k as n^2 log n, and marked with *); ours are bounded at
``--timeout-ours`` (1200).

Both sides run with ``--threads`` threads (torch intra-op threads; threadpoolctl limits for
BLAS/OpenMP in numpy, sklearn and numba's layer) in float64.

    .venv/bin/python benchmarks/intrinsic_dim.py             # ~20 min on 2 cores (n = 100k)
    .venv/bin/python benchmarks/intrinsic_dim.py --quick     # n = 2k, 5k: ~45 s smoke run
    .venv/bin/python benchmarks/intrinsic_dim.py --estimators mle --sizes 20000
    .venv/bin/python benchmarks/intrinsic_dim.py --quick --sizes 2000 --json intrinsic_dim.json

``--sizes`` given with ``--quick`` wins over its 2k, 5k. ``--json PATH`` writes the figures
printed, unrounded: {"benchmark", "quick", "settings", "rows": [{"estimator", "n", "ours",
"skdim" (each {"value", "s", "peak_mib", "peak_exact"}, or {"timed_out": true} or {"error"}),
"abs_diff", "skdim_s" (extrapolated when skdim was stopped), "skdim_s_extrapolated", "speed_up"
(skdim s / ours s)}]}; null where the table prints "-".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from results_json import add_json_argument, write_json

LATENT_DIM, AMBIENT_DIM, MLE_K = 10, 64, 20


def points(n: int):  # -> np.ndarray, float64 (n, 64)
    from genlab.data.manifolds import ManifoldSettings, manifold

    data = manifold(ManifoldSettings(task="classification", n_classes=2, teacher_hidden=(),
                                     intrinsic_dim=LATENT_DIM, ambient_dim=AMBIENT_DIM,
                                     embedding="tanh", n_train=n, n_test=1, seed=0))
    return data.train.x.astype("float64")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def child(side: str, estimator: str, n: int, repeats: int, threads: int) -> dict:
    """One (side, estimator, n) measurement, in this (fresh) process."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)
    import torch

    torch.set_num_threads(threads)
    if side == "ours":
        from genlab.analyses.dimension.estimators import MLE, TwoNN

        def fit(X):
            model = TwoNN() if estimator == "twonn" else MLE(k=MLE_K)
            return model.fit(X).dimension_
    else:
        import skdim

        def fit(X):
            if estimator == "twonn":
                return float(skdim.id.TwoNN().fit(X).dimension_)
            return float(skdim.id.MLE().fit(X, n_neighbors=MLE_K).dimension_)

    fit(points(500))  # warm-up: numba compilation, torch's first calls
    X = points(n)
    times, value = [], None
    rss_before = _status_kb("VmRSS")
    exact_peak = _reset_peak()
    for _ in range(repeats):
        start = time.perf_counter()
        value = fit(X)
        times.append(time.perf_counter() - start)
    peak = _status_kb("VmHWM") if exact_peak else _status_kb("VmPeak")
    return {"value": float(value), "s": statistics.median(times),
            "peak_mib": max(0, peak - rss_before) / 1024, "peak_exact": exact_peak}


def measure(side: str, estimator: str, n: int, repeats: int, threads: int,
            timeout: float) -> dict:
    command = [sys.executable, __file__, "--child", side, estimator, str(n), str(repeats),
               str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads), "NUMBA_NUM_THREADS": str(threads)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              check=True, env=env)
    except subprocess.TimeoutExpired:
        return {"timed_out": True}
    except subprocess.CalledProcessError as exc:
        return {"error": exc.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        help="n values (default 2000 20000 100000; with --quick 2000 5000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed fits at n <= 20k (1 above)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds before one of skdim's measurements (a process) is stopped")
    parser.add_argument("--timeout-ours", type=float, default=1200.0,
                        help="the same for ours")
    parser.add_argument("--estimators", nargs="+", choices=["twonn", "mle"],
                        default=["twonn", "mle"])
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 2k, 5k")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args()
    if args.child:
        side, estimator, n, repeats, threads = args.child
        print(json.dumps(child(side, estimator, int(n), int(repeats), int(threads))))
        return
    if args.quick:
        args.sizes, args.repeats = args.sizes or [2000, 5000], 1
    args.sizes = args.sizes or [2000, 20000, 100000]
    record = {"benchmark": "intrinsic_dim", "quick": args.quick, "settings": {
        "sizes": args.sizes, "repeats": args.repeats, "threads": args.threads,
        "estimators": args.estimators, "mle_k": MLE_K, "latent_dim": LATENT_DIM,
        "ambient_dim": AMBIENT_DIM, "skdim_timeout_s": args.timeout,
        "ours_timeout_s": args.timeout_ours}, "rows": []}

    print(f"{LATENT_DIM}-D Gaussian latent, tanh-embedded in R^{AMBIENT_DIM}; float64; "
          f"{args.threads} thread(s); MLE k = {MLE_K}; time = median of {args.repeats} fits "
          f"(1 above n = 20k) after a warm-up; memory = peak resident set during the fit minus "
          f"the resident set before it; skdim is stopped after {args.timeout:.0f} s")
    print(f"{'estimator':>9} {'n':>7} {'ours':>9} {'skdim':>9} {'|diff|':>9} {'ours s':>8} "
          f"{'skdim s':>8} {'speed-up':>8} {'ours MiB':>8} {'skdim MiB':>9}", flush=True)
    results: dict[tuple[str, int], dict[str, dict]] = {}
    for estimator in args.estimators:
        for n in args.sizes:
            repeats = args.repeats if n <= 20000 else 1
            ours = measure("ours", estimator, n, repeats, args.threads, args.timeout_ours)
            skdim = measure("skdim", estimator, n, repeats, args.threads, args.timeout)
            results[(estimator, n)] = {"ours": ours, "skdim": skdim}
            note = ""
            skdim_seconds = skdim.get("s")
            if skdim.get("timed_out"):
                smaller = [m for m in args.sizes if m < n and "s" in
                           results.get((estimator, m), {}).get("skdim", {})]
                if smaller:
                    m = max(smaller)
                    base = results[(estimator, m)]["skdim"]["s"]
                    skdim_seconds = base * (n / m) ** 2 * math.log(n) / math.log(m)
                    note = (f"  skdim stopped at {args.timeout:.0f} s; its time extrapolated "
                            f"from n = {m} as n^2 log n")
                else:
                    note = f"  skdim stopped at {args.timeout:.0f} s"

            def cell(result: dict, key: str, fmt: str) -> str:
                if result.get("timed_out"):
                    return "stopped"
                if "error" in result:
                    return "error"
                return format(result[key], fmt)

            diff = (abs(ours["value"] - skdim["value"])
                    if "value" in ours and "value" in skdim else None)
            speed = (skdim_seconds / ours["s"]
                     if skdim_seconds is not None and "s" in ours else None)
            print(f"{estimator:>9} {n:>7} {cell(ours, 'value', '9.5f')} "
                  f"{cell(skdim, 'value', '9.5f')} "
                  f"{'-' if diff is None else format(diff, '9.1e'):>9} "
                  f"{cell(ours, 's', '8.2f')} "
                  f"{format(skdim_seconds, '8.1f') + ('*' if note else '') if skdim_seconds else cell(skdim, 's', '8.2f'):>8} "  # noqa: E501
                  f"{'-' if speed is None else format(speed, '7.1f') + 'x':>8} "
                  f"{cell(ours, 'peak_mib', '8.0f')} {cell(skdim, 'peak_mib', '9.0f')}{note}",
                  flush=True)
            if "error" in ours or "error" in skdim:
                print(f"          errors: ours {ours.get('error')}, skdim {skdim.get('error')}")
            if diff is not None and diff > 1e-6:
                print(f"          ANSWERS DIFFER by {diff:.2e} (> 1e-6)")
            record["rows"].append({"estimator": estimator, "n": n, "ours": ours, "skdim": skdim,
                                   "abs_diff": diff, "skdim_s": skdim_seconds,
                                   "skdim_s_extrapolated": bool(skdim.get("timed_out")
                                                                and skdim_seconds),
                                   "speed_up": speed})
    write_json(args.json, record)


if __name__ == "__main__":
    main()
