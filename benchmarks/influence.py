"""Benchmark: influence scores by EK-FAC, exact, CG and LiSSA: time, peak memory, agreement.

On the influence study's MLP (10-32-1 tanh, one logit, binary cross entropy, L2 λ = 1e-2, P =
385) trained to a stationary point on the study's data (logistic teacher, d = 10, n = 300, 50
test points), in one run:

1. Every method's (n_test, n_train) scores at the study's size: wall time, peak memory, and
   Pearson / Spearman correlation of −I/n with leave-one-out retraining warm-started from the
   trained model (K removed points, every test point); and for CG and LiSSA, the cosine of
   their scores with the dense solve's. Methods: ``exact`` (damped GGN, dense Cholesky),
   ``cg``, ``lissa`` (library defaults: minibatch 64, depth ⌈(s/λ) ln 10³⌉), ``ekfac``
   (kronfluence: fitting the factors and scoring, one call).
2. Memory against the training-set size: the same model and 50 test points against n_train =
   300, 3000, 30000 fresh training points from the same teacher (influence formulas apply at
   any θ; only the cost is measured here), the streamed methods beside a reference that
   materialises the (n_train, P) per-example gradient matrix (what exact_influence did before
   streaming). A streamed method's peak should stay near chunk·P plus the (n_test, n_train)
   score matrix, not grow like n_train·P.

Each measurement runs in a forked child process (its own address space: nothing one method
allocates or caches counts for the next) at one torch thread, after every method ran once on a
tiny problem in the parent (imports and one-time initialisation are not measured); peak memory
is the child's VmHWM (reset through /proc/self/clear_refs at its start) minus its resident size
before the method ran: the growth the method itself caused.

    .venv/bin/python benchmarks/influence.py            # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/influence.py --quick    # a smoke run, under a minute
    .venv/bin/python benchmarks/influence.py --quick --sizes 300 --lissa-depth 100 --json x.json

``--sizes`` sets section 2's training-set sizes (default 300 3000 30000; 300 3000 with
``--quick``), ``--lissa-depth`` LiSSA's recursion depth (default: the library's; a smaller one
only shortens a smoke run). ``--json PATH`` writes the figures printed, unrounded (peak memory
in MiB, as the tables' "MB" are): {"benchmark", "quick", "settings", "parameters", "lambda",
"train_s", "train_grad_max", "loo_points", "loo_s", "n_train", "n_test", "methods" (section 1):
{method: {"s", "over_exact", "peak_mib", "loo_pearson", "loo_spearman", "cos_vs_exact"}},
"memory_vs_n_train" (section 2): [{"n_train", "gradient_matrix_mib", "score_matrix_mib",
"peak_mib": {method: MiB}, "s": {method: seconds}}]}.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from results_json import add_json_argument, write_json

from genlab.analyses.influence.exact import exact_influence, loss_function, per_example_gradients
from genlab.analyses.influence.exact import inverse_hvp as _inverse_hvp
from genlab.analyses.influence.ground_truth import compare_with_loo, leave_one_out
from genlab.analyses.influence.kfac import kronfluence_influence
from genlab.data.logistic_teacher import LogisticTeacherSettings, logistic_teacher
from genlab.models.registry import build_seeded_model
from genlab.seeding import torch_generator
from genlab.settings import MLPSettings
from genlab.train.full_batch import (
    NewtonSystem,
    RegularisedObjective,
    fit,
    flat_parameters,
    load_flat,
)

D = torch.float64
LAMBDA = 1e-2
BCE = loss_function("binary_cross_entropy")


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _child(job: Callable[[], torch.Tensor], pipe: Any) -> None:
    torch.set_num_threads(1)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset the peak-RSS high-water mark
    before = _status_kb("VmRSS")
    start = time.perf_counter()
    scores = job()
    seconds = time.perf_counter() - start
    peak = _status_kb("VmHWM") - before
    pipe.send((seconds, peak * 1024, scores.detach().to("cpu", D).numpy()))
    pipe.close()


def measure(job: Callable[[], torch.Tensor]) -> tuple[float, int, np.ndarray]:
    """(seconds, peak bytes above the starting resident size, scores) of ``job`` in a fork."""
    context = mp.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(job, send))
    process.start()
    send.close()
    result = receive.recv()
    process.join()
    if process.exitcode != 0:
        raise RuntimeError(f"measurement child exited with {process.exitcode}")
    return result


def tensors(settings: LogisticTeacherSettings) -> tuple[torch.Tensor, ...]:
    data = logistic_teacher(settings)
    return tuple(torch.from_numpy(np.asarray(a, dtype=np.float64))
                 for a in (data.train.x, data.train.y, data.test.x, data.test.y))


def trained_model(X: torch.Tensor, y: torch.Tensor) -> tuple[torch.nn.Module, Any]:
    model = build_seeded_model("mlp", MLPSettings(hidden=(32,), activation="tanh"), X.shape[1],
                               1, 0).to(D).eval()
    result = fit(RegularisedObjective(model, BCE, X, y, LAMBDA), flat_parameters(model))
    if not result.converged:
        raise RuntimeError(f"the model did not converge (max|∇| = {result.grad_max:.2e})")
    return load_flat(model, result.theta), result


def warm_loo(model: torch.nn.Module, theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor,
             X_test: torch.Tensor, y_test: torch.Tensor, k: int) -> Any:
    """Leave-one-out of k random training points, each retrained from θ̂ (chord steps with the
    full Hessian, as the influence study does), measured on every test loss."""
    import copy

    from torch.nn import functional as F

    system = NewtonSystem(RegularisedObjective(model, BCE, X, y, LAMBDA).hessian(theta))
    probe = copy.deepcopy(model)

    def train_fn(mask: torch.Tensor, warm: bool) -> torch.Tensor:
        result = fit(RegularisedObjective(model, BCE, X, y, LAMBDA, mask), theta, hessian=system,
                     max_lbfgs=1000)
        load_flat(probe, result.theta)
        with torch.no_grad():
            return F.binary_cross_entropy_with_logits(probe(X_test).reshape(-1), y_test,
                                                      reduction="none")

    order = torch.randperm(len(X), generator=torch_generator(0, "benchmark", "loo"))
    return leave_one_out(train_fn, order[:k], n_train=len(X), warm_start=True)


def methods(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, X_test: torch.Tensor,
            y_test: torch.Tensor, chunk: int,
            lissa_depth: int | None = None) -> dict[str, Callable[[], torch.Tensor]]:
    def exact(solver: str) -> Callable[[], torch.Tensor]:
        options = {"depth": lissa_depth} if solver == "lissa" else {}
        return lambda: exact_influence(model, BCE, X, y, X_test, y_test, LAMBDA, "ggn", solver,
                                       chunk_size=chunk, batch_size=chunk, **options)

    def materialised() -> torch.Tensor:
        # the reference: every training gradient held at once, (n_train, P)
        G = per_example_gradients(model, BCE, X, y, chunk_size=chunk)
        G_test = per_example_gradients(model, BCE, X_test, y_test, chunk_size=chunk)
        solution = _inverse_hvp(model, BCE, X, y, G_test, LAMBDA, batch_size=chunk).solution
        return -(solution @ G.T)

    return {
        "ekfac": lambda: kronfluence_influence(model, "binary_cross_entropy", X, y, X_test,
                                               y_test, "ekfac", LAMBDA, batch_size=chunk),
        "exact": exact("dense"), "cg": exact("cg"), "lissa": exact("lissa"),
        "exact, materialised G": materialised,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, a smoke run")
    parser.add_argument("--chunk", type=int, default=256, help="examples per gradient chunk")
    parser.add_argument("--sizes", type=int, nargs="+",
                        help="section 2's n_train values (default 300 3000 30000; with --quick "
                        "300 3000)")
    parser.add_argument("--lissa-depth", type=int,
                        help="LiSSA's depth (default: the library's, ⌈(s/λ) ln 10³⌉)")
    add_json_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    loo_points = 20 if args.quick else 60
    sizes = args.sizes or ((300, 3000) if args.quick else (300, 3000, 30_000))

    base = LogisticTeacherSettings(input_dim=10, anisotropy=0.5, signal=3.0, bias=0.3,
                                   n_train=300, n_test=50, seed=0)
    X, y, X_test, y_test = tensors(base)
    start = time.perf_counter()
    model, trained = trained_model(X, y)
    train_s = time.perf_counter() - start
    P = sum(p.numel() for p in model.parameters())
    print(f"model: MLP 10-32-1 tanh, P = {P}, "
          f"λ = {LAMBDA}, trained to max|∇| = {trained.grad_max:.1e} in "
          f"{train_s:.1f} s; chunk = {args.chunk}, 1 thread")
    start = time.perf_counter()
    loo = warm_loo(model, flat_parameters(model), X, y, X_test, y_test, loo_points)
    loo_s = time.perf_counter() - start
    print(f"ground truth: warm-started leave-one-out of {loo_points} points × 50 test points "
          f"in {loo_s:.1f} s\n")
    record: dict[str, Any] = {
        "benchmark": "influence", "quick": args.quick,
        "settings": {"chunk": args.chunk, "sizes": list(sizes), "lissa_depth": args.lissa_depth,
                     "threads": 1},
        "parameters": P, "lambda": LAMBDA, "train_s": train_s,
        "train_grad_max": float(trained.grad_max), "loo_points": loo_points, "loo_s": loo_s,
        "n_train": len(X), "n_test": len(X_test), "methods": {}, "memory_vs_n_train": []}

    # every code path once in this process, so that no child pays (and measures) one-time
    # initialisation: imports, kernels, caches
    for job in methods(model, X[:64], y[:64], X_test[:4], y_test[:4], args.chunk,
                       lissa_depth=3).values():
        job()

    print(f"1. n_train = {len(X)}, n_test = {len(X_test)}")
    print(f"{'method':24s} {'seconds':>8s} {'× exact':>8s} {'peak MB':>8s} "
          f"{'LOO Pearson':>12s} {'LOO Spearman':>13s} {'cos vs exact':>13s}")
    results = {name: measure(job) for name, job in
               methods(model, X, y, X_test, y_test, args.chunk, args.lissa_depth).items()}
    exact_seconds, exact_scores = results["exact"][0], results["exact"][2]
    for name, (seconds, peak, scores) in results.items():
        agreement = compare_with_loo(torch.from_numpy(scores), loo, len(X))
        cosine = float((scores * exact_scores).sum()
                       / (np.linalg.norm(scores) * np.linalg.norm(exact_scores)))
        print(f"{name:24s} {seconds:8.2f} {seconds / exact_seconds:8.2f} {peak / 2**20:8.1f} "
              f"{agreement.pearson:12.3f} {agreement.spearman:13.3f} {cosine:13.6f}")
        record["methods"][name] = {
            "s": seconds, "over_exact": seconds / exact_seconds, "peak_mib": peak / 2**20,
            "loo_pearson": float(agreement.pearson), "loo_spearman": float(agreement.spearman),
            "cos_vs_exact": cosine}

    print(f"\n2. peak memory (MB) against n_train, n_test = {len(X_test)} "
          f"(an (n_train, P) float64 matrix: n_train·P·8 bytes; the score matrix "
          f"n_test·n_train·8)")
    names = ["ekfac", "exact", "cg", "lissa", "exact, materialised G"]
    print(f"{'n_train':>8s} {'n·P·8':>8s} {'scores':>8s} "
          + " ".join(f"{name[:14]:>14s}" for name in names))
    for n in sizes:
        Xn, yn, _, _ = tensors(base.model_copy(update={"n_train": n, "seed": 1}))
        jobs = methods(model, Xn, yn, X_test, y_test, args.chunk, args.lissa_depth)
        peaks, times = [], []
        for name in names:
            seconds, peak, _ = measure(jobs[name])
            peaks.append(peak / 2**20)
            times.append(seconds)
        print(f"{n:8d} {n * P * 8 / 2**20:8.1f} {n * len(X_test) * 8 / 2**20:8.1f} "
              + " ".join(f"{p:14.1f}" for p in peaks))
        print(f"{'':8s} {'':8s} {'seconds':>8s} " + " ".join(f"{t:14.2f}" for t in times))
        record["memory_vs_n_train"].append({
            "n_train": n, "gradient_matrix_mib": n * P * 8 / 2**20,
            "score_matrix_mib": n * len(X_test) * 8 / 2**20,
            "peak_mib": dict(zip(names, peaks, strict=True)),
            "s": dict(zip(names, times, strict=True))})
    write_json(args.json, record)


if __name__ == "__main__":
    main()
