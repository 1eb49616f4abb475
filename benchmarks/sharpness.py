"""Benchmark: Hessian-vector products to find λ_max, Lanczos vs power iteration.

On the eos_gd study's model (a 20-100-100-10 tanh MLP, MSE to one-hot labels of a random 20-64-10
tanh teacher, n = 500), trained briefly by full-batch GD, and on its untrained copy, in one run:

1. Products with the Hessian (HVPs) and wall time until the estimate of λ_max is within 1e-3
   relative error, for our Lanczos (:func:`genlab.analyses.curvature.lanczos.lanczos`, as
   ``hessian_top_eigenvalues`` runs it) and for power iteration (PyHessian's method: v ← Hv/‖Hv‖,
   λ = vᵀHv), from the same random starts (median and worst), through one and the same operator
   (``curvature_operator``), so that the algorithms are compared, not the operators. A method's
   count is the first product after which its estimate is within the target of a reference λ_max
   (a long Lanczos run, checked by its explicit residual, by a second run from another start and,
   when P is small, by a dense float64 Hessian). Both estimates are Rayleigh quotients, never
   above λ_max. Also what each method's own stopping rule spends and achieves without the
   reference: ``hessian_top_eigenvalues(tol=1e-3)`` and PyHessian's rule (stop when λ changes by
   less than 1e-3 relatively).
2. The wall time of one HVP relative to one gradient (loss.backward) on the same 500 points, for
   each operator side by side: genlab's (``curvature_operator``: double backward through a kept
   gradient graph), curvlinops' ``HessianLinearOperator`` (its previous operator) and a double
   backward that rebuilds the gradient graph for every product.
3. Sharpness tracked during training: after a few more GD steps, HVPs to 1e-3 for Lanczos (and
   power iteration) warm-started from the previous top eigenvector vs from random starts.

Wall times are medians over the random starts (section 1 and 3, after a warm-up) or over repeats
(section 2, the methods alternating repeat by repeat), at ``--threads`` torch threads.

With ``--device cuda`` the model, data and vectors live on the GPU (random starts are drawn on the
CPU and moved, so they are the same vectors) and every clock read follows
``torch.cuda.synchronize()``.

    .venv/bin/python benchmarks/sharpness.py            # about a minute on 2 cores
    .venv/bin/python benchmarks/sharpness.py --quick    # a smoke run, about 15 s
    python3 benchmarks/sharpness.py --device cuda       # the same on the GPU
    .venv/bin/python benchmarks/sharpness.py --quick --json sharpness.json   # and the figures

``--json PATH`` writes the figures printed, unrounded (null: not reached within the cap, or
undefined): {"benchmark", "device", "quick", "settings", "parameters", "train_s", "points": {point:
{"train_loss", "train_accuracy"}}, "reference": {point: {"lambda_max", "lambda_2", "theta_min",
"lambda_2_over_lambda_1", "steps", "residual", "other_start_rel_diff", "dense_rel_diff"}},
"traced_vs_hessian_top_eigenvalues_max_rel_diff", "to_target" (section 1): [{"point", "method",
"hvps_median", "hvps_worst", "median_s", "worst_s", "rel_err_median", "rel_err_worst"}],
"power_over_lanczos": {point: {"hvps_median", "hvps_worst", "s_median", "s_worst"}} (ratios),
"hvps_power_over_lanczos": {point: the median HVPs' ratio}, "product_costs" (section 2): [{"call",
"ms", "per_float64_gradient"}], "hvp_rel_mismatch", "tracking" (section 3): {point:
{"overlap_abs_cos", "rows": [{"method", "start": "warm" | "cold", ...as to_target}]}}}.
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from curvlinops import HessianLinearOperator
from results_json import add_json_argument, write_json
from torch import Tensor, nn

from genlab.analyses.curvature.hessian import (
    MeanLoss,
    curvature_model,
    curvature_operator,
    hessian_top_eigenvalues,
)
from genlab.analyses.curvature.lanczos import lanczos, ritz_pairs
from genlab.data.teacher_student import TeacherStudentSettings, teacher_student
from genlab.losses import loss_value
from genlab.models.registry import build_seeded_model
from genlab.settings import MLPSettings, TrainSettings
from genlab.train.loop import evaluate, train_classifier

DTYPE = torch.float64
DEVICE = torch.device("cpu")  # set by main() from --device


def synchronize() -> None:
    """Wait for the device's queued work, so that a clock read after it counts that work."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


def mse(output: Tensor, target: Tensor) -> Tensor:
    return loss_value("mse", output, target)


def seconds(fn: Callable[[], object]) -> float:
    synchronize()
    start = time.perf_counter()
    fn()
    synchronize()
    return time.perf_counter() - start


class Products:
    """M (P, K) ↦ H M through one curvature operator, a column at a time (Lanczos and power
    iteration each take one per step), stamping the clock after each column since ``reset``."""

    def __init__(self, operator: Callable[[Tensor], Tensor], dim: int) -> None:
        self.operator, self.dim = operator, dim
        self.reset()

    def reset(self) -> None:
        self.stamps: list[float] = []
        synchronize()
        self.start = time.perf_counter()

    def __call__(self, M: Tensor) -> Tensor:
        columns = []
        for column in M.split(1, dim=1):
            columns.append(self.operator(column))
            synchronize()
            self.stamps.append(time.perf_counter() - self.start)
        return torch.cat(columns, dim=1)


@dataclass(frozen=True)
class Trace:
    """One run of a method: its λ_max estimate and the seconds since its start after each HVP."""

    estimates: list[float]
    stamps: list[float]

    def first_within(self, reference: float, rel_err: float) -> int | None:
        """HVPs until the estimate is within rel_err of the reference (None: not in this run)."""
        for i, estimate in enumerate(self.estimates):
            if abs(estimate - reference) <= rel_err * abs(reference):
                return i + 1
        return None


@dataclass(frozen=True)
class Outcome:
    """What one method spent on one start: HVPs, seconds and the estimate's relative error.
    hvps = inf when the method did not get there within its cap."""

    hvps: float
    seconds: float
    rel_err: float


def oracle_outcome(trace: Trace, reference: float, rel_err: float) -> Outcome:
    n = trace.first_within(reference, rel_err)
    if n is None:
        return Outcome(math.inf, math.inf, abs(trace.estimates[-1] / reference - 1))
    return Outcome(n, trace.stamps[n - 1], abs(trace.estimates[n - 1] / reference - 1))


def lanczos_trace(products: Products, start: Tensor, cap: int, reference: float,
                  rel_err: float) -> Trace:
    """Our Lanczos (full reorthogonalisation) from ``start``: the top Ritz value after each step.
    The first m steps of a longer run are exactly an m-step run, so one run gives every m; it is
    rerun with twice the steps (at most ``cap``) until its estimate reaches the target, so the
    stamps are those of a run about as long as needed, not of one that went on to ``cap``."""
    steps = min(16, cap)
    while True:
        products.reset()
        tridiagonal = lanczos(products, start, steps)
        stamps = list(products.stamps)
        t = tridiagonal.matrix()[0]
        estimates = [float(torch.linalg.eigvalsh(t[:m, :m])[-1])
                     for m in range(1, tridiagonal.steps + 1)]
        trace = Trace(estimates, stamps)
        if trace.first_within(reference, rel_err) is not None or steps >= cap:
            return trace
        steps = min(2 * steps, cap)


def power_trace(products: Products, start: Tensor, cap: int, reference: float, rel_err: float,
                stop_tol: float) -> tuple[Trace, int | None]:
    """Power iteration as PyHessian runs it: Hv, λ = vᵀHv, v ← Hv/‖Hv‖ (one HVP a step), until
    both the target and PyHessian's own stop (|λ_k − λ_{k−1}| < stop_tol·(|λ_{k−1}| + 1e-6)) are
    reached or ``cap`` HVPs; also returns the step PyHessian would have stopped at."""
    products.reset()
    v = start / torch.linalg.vector_norm(start)
    estimates: list[float] = []
    stop, reached = None, False
    while len(estimates) < cap:
        w = products(v[:, None])[:, 0]
        estimates.append(float(v @ w))
        if stop is None and len(estimates) > 1 and (
                abs(estimates[-1] - estimates[-2]) < stop_tol * (abs(estimates[-2]) + 1e-6)):
            stop = len(estimates)
        reached = reached or abs(estimates[-1] - reference) <= rel_err * abs(reference)
        if reached and stop is not None:
            break
        v = w / torch.linalg.vector_norm(w)
    return Trace(estimates, list(products.stamps)), stop


@dataclass(frozen=True)
class Reference:
    value: float  # λ_max
    vector: Tensor  # its eigenvector (P,)
    second: float  # λ_2 (the second Ritz value)
    bottom: float  # the smallest Ritz value, ≥ λ_min
    steps: int
    residual: float  # ‖Hv − λv‖ from an explicit product
    other_start: float | None  # λ_max from hessian_top_eigenvalues on another random start
    dense: float | None  # λ_max of the dense float64 Hessian, when P is small enough


def dense_top_eigenvalue(net: nn.Module, X: Tensor, y: Tensor, chunk: int = 64) -> float:
    """λ_max of the Hessian built row by row by double backward (torch.autograd, not curvlinops),
    symmetrised, in float64."""
    params = [p for p in net.parameters() if p.requires_grad]
    grads = torch.autograd.grad(mse(net(X), y), params, create_graph=True)
    flat = torch.cat([g.reshape(-1) for g in grads])
    dim = flat.numel()
    rows = []
    for lo in range(0, dim, chunk):
        eye = torch.eye(dim, dtype=flat.dtype, device=flat.device)[lo:lo + chunk]
        block = torch.autograd.grad(flat, params, grad_outputs=eye, is_grads_batched=True,
                                    retain_graph=True)
        rows.append(torch.cat([b.reshape(len(eye), -1) for b in block], dim=1))
    hessian = torch.cat(rows)
    return float(torch.linalg.eigvalsh((hessian + hessian.T) / 2)[-1])


def reference(products: Products, model: nn.Module, net: nn.Module, X: Tensor, y: Tensor,
              steps: int, tol: float, dense_max_params: int, other_start: bool) -> Reference:
    start = torch.randn(products.dim, generator=torch.Generator().manual_seed(12345),
                        dtype=DTYPE).to(X.device)
    tridiagonal = lanczos(products, start, steps, tol=tol, k=2)
    values, vectors, _ = ritz_pairs(tridiagonal, 2)
    value, vector = float(values[0, 0]), vectors[0, 0]
    residual = products(vector[:, None])[:, 0] - value * vector
    other = (hessian_top_eigenvalues(model, mse, X, y, k=1, max_iter=steps, tol=tol,
                                     seed=1).eigenvalues[0] if other_start else None)
    bottom = float(torch.linalg.eigvalsh(tridiagonal.matrix()[0])[0])
    dense = (dense_top_eigenvalue(net, X.to(DTYPE), y) if products.dim <= dense_max_params
             else None)
    return Reference(value, vector, float(values[0, 1]), bottom, tridiagonal.steps,
                     float(torch.linalg.vector_norm(residual)), other, dense)


@dataclass
class Point:
    """Every measurement at one point of parameter space."""

    name: str
    ref: Reference
    lanczos: list[Outcome]
    power: list[Outcome]
    practical_lanczos: list[Outcome]  # hessian_top_eigenvalues(tol=rel_err), its num_matvecs
    practical_power: list[Outcome]  # PyHessian's stopping rule
    warm: dict[str, Outcome]  # method ↦ outcome from the warm start (section 3)
    consistency: float  # |our Lanczos trace − hessian_top_eigenvalues(max_iter=m, tol=0)| / λ


def measure(name: str, model: nn.Module, X: Tensor, y: Tensor, starts: Sequence[Tensor],
            args: argparse.Namespace, warm_start: Tensor | None = None) -> Point:
    with curvature_model(model, DTYPE) as net:
        operator = curvature_operator(net, mse, X.to(DTYPE), y)
        products = Products(lambda M: operator @ M, operator.shape[0])
        ref = reference(products, model, net, X, y, args.reference_steps, args.reference_tol,
                        args.dense_max_params, args.other_start)
        lam = ref.value

        def practical(v0: Tensor) -> Outcome:
            synchronize()
            start_time = time.perf_counter()
            result = hessian_top_eigenvalues(model, mse, X, y, k=1, max_iter=args.lanczos_cap,
                                             v0=v0, tol=args.rel_err)
            synchronize()
            return Outcome(result.num_matvecs, time.perf_counter() - start_time,
                           abs(result.eigenvalues[0] / lam - 1))

        def power(start: Tensor) -> tuple[Outcome, Outcome]:
            trace, stop = power_trace(products, start, args.power_cap, lam, args.rel_err,
                                      args.rel_err)
            stopped = (Outcome(math.inf, math.inf, math.nan) if stop is None else
                       Outcome(stop, trace.stamps[stop - 1], abs(trace.estimates[stop - 1] / lam
                                                                 - 1)))
            return oracle_outcome(trace, lam, args.rel_err), stopped

        point = Point(name, ref, [], [], [], [], {}, math.nan)
        for start in starts:  # alternating, so that load from other processes hits both alike
            trace = lanczos_trace(products, start, args.lanczos_cap, lam, args.rel_err)
            point.lanczos.append(oracle_outcome(trace, lam, args.rel_err))
            oracle, stopped = power(start)
            point.power.append(oracle)
            point.practical_power.append(stopped)
            point.practical_lanczos.append(practical(start))
        # the traced Lanczos is hessian_top_eigenvalues' own: the same estimate after as many
        # steps from the same start (the last one's trace)
        same = hessian_top_eigenvalues(model, mse, X, y, k=1, max_iter=len(trace.estimates),
                                       v0=starts[-1], tol=0.0)
        point.consistency = abs(same.eigenvalues[0] - trace.estimates[-1]) / lam
        if warm_start is not None:
            trace = lanczos_trace(products, warm_start, args.lanczos_cap, lam, args.rel_err)
            point.warm["Lanczos"] = oracle_outcome(trace, lam, args.rel_err)
            point.warm["power"] = power(warm_start)[0]
            point.warm["hessian_top_eigenvalues"] = practical(warm_start)
    return point


def product_costs(model: nn.Module, X: Tensor, y: Tensor, repeats: int,
                  inner: int) -> tuple[dict[str, float], float]:
    """Median seconds per call of a gradient and of an HVP on all of (X, y) by each operator,
    and how far the HVPs differ relatively (the largest of genlab's and the rebuilt double
    backward's distance to curvlinops')."""
    net32 = copy.deepcopy(model)
    X64 = X.to(DTYPE)
    with curvature_model(model, DTYPE) as net:
        operator = curvature_operator(net, mse, X64, y)
        params = [p for p in net.parameters() if p.requires_grad]
        curvlinops = HessianLinearOperator(net, MeanLoss(mse), params, [(X64, y)], num_data=len(X),
                                           check_deterministic=False)
        v = torch.randn(operator.shape[0], 1, generator=torch.Generator().manual_seed(7),
                        dtype=DTYPE).to(X.device)

        def gradient64() -> None:
            net.zero_grad(set_to_none=True)
            mse(net(X64), y).backward()

        def gradient32() -> None:
            net32.zero_grad(set_to_none=True)
            mse(net32(X), y).backward()

        def hvp_genlab() -> Tensor:
            return operator @ v

        def hvp_curvlinops() -> Tensor:
            return curvlinops @ v

        def hvp_double_backward() -> Tensor:
            grads = torch.autograd.grad(mse(net(X64), y), params, create_graph=True)
            flat = torch.cat([g.reshape(-1) for g in grads])
            hv = torch.autograd.grad(flat @ v[:, 0], params)
            return torch.cat([h.reshape(-1) for h in hv])[:, None]

        calls = {"gradient, float64": gradient64, "gradient, float32 (training)": gradient32,
                 "HVP, curvature_operator (genlab, kept gradient graph)": hvp_genlab,
                 "HVP, curvlinops HessianLinearOperator": hvp_curvlinops,
                 "HVP, double backward rebuilt per product": hvp_double_backward}
        a = hvp_curvlinops()
        mismatch = max(float(torch.linalg.vector_norm(b - a) / torch.linalg.vector_norm(a))
                       for b in (hvp_genlab(), hvp_double_backward()))
        for fn in calls.values():  # warm-up
            fn()
            fn()
        times: dict[str, list[float]] = {label: [] for label in calls}
        for _ in range(repeats):
            for label, fn in calls.items():
                times[label].append(seconds(lambda fn=fn: [fn() for _ in range(inner)]) / inner)
    return {label: statistics.median(t) for label, t in times.items()}, mismatch


# ----------------------------------------------------------------------------------- printing


def median_worst(values: Sequence[float]) -> tuple[float, float]:
    return statistics.median(values), max(values)


def count(x: float, cap: int) -> str:
    return f">{cap}" if math.isinf(x) else f"{x:g}"


def secs(x: float) -> str:
    return "n/r" if math.isinf(x) else f"{x:.3f}"


def err(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1e}"


def ratio(num: float, den: float) -> str:
    if math.isinf(num) and math.isinf(den):
        return "n/r"
    if math.isinf(num):
        return "inf"
    return f"{num / den:.1f}x"


def print_row(point: str, method: str, outcomes: Sequence[Outcome], cap: int) -> dict:
    """Print one row of a table; return its figures (inf, nan: not reached, undefined)."""
    hvps = median_worst([o.hvps for o in outcomes])
    secs_ = median_worst([o.seconds for o in outcomes])
    errs = [o.rel_err for o in outcomes if not math.isnan(o.rel_err)]
    errs_ = median_worst(errs) if errs else (math.nan, math.nan)
    print(f"{point:<10} {method:<42} {count(hvps[0], cap):>6} {count(hvps[1], cap):>6} "
          f"{secs(secs_[0]):>7} {secs(secs_[1]):>7} {err(errs_[0]):>8} {err(errs_[1]):>8}",
          flush=True)
    return {"point": point, "method": method, "hvps_median": hvps[0], "hvps_worst": hvps[1],
            "median_s": secs_[0], "worst_s": secs_[1], "rel_err_median": errs_[0],
            "rel_err_worst": errs_[1]}


def ratio_value(num: float, den: float) -> float:
    """The ratio ``ratio`` prints, as a number (nan where it prints n/r)."""
    if math.isinf(num):
        return math.nan if math.isinf(den) else math.inf
    return num / den


def print_ratio(point: str, power: Sequence[Outcome], lanczos_: Sequence[Outcome]) -> dict:
    hp, hl = median_worst([o.hvps for o in power]), median_worst([o.hvps for o in lanczos_])
    sp, sl = median_worst([o.seconds for o in power]), median_worst([o.seconds for o in lanczos_])
    print(f"{point:<10} {'  power / Lanczos':<42} {ratio(hp[0], hl[0]):>6} "
          f"{ratio(hp[1], hl[1]):>6} {ratio(sp[0], sl[0]):>7} {ratio(sp[1], sl[1]):>7}",
          flush=True)
    return {"hvps_median": ratio_value(hp[0], hl[0]), "hvps_worst": ratio_value(hp[1], hl[1]),
            "s_median": ratio_value(sp[0], sl[0]), "s_worst": ratio_value(sp[1], sl[1])}


HEADER = (f"{'point':<10} {'method':<42} {'HVPs':>6} {'worst':>6} {'s':>7} {'worst':>7} "
          f"{'rel err':>8} {'worst':>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n", type=int, default=500, help="training (and test) points")
    parser.add_argument("--dim", type=int, default=20)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--teacher-hidden", type=int, nargs="+", default=[64])
    parser.add_argument("--hidden", type=int, nargs="+", default=[100, 100])
    parser.add_argument("--lr", type=float, default=0.3, help="GD step size")
    parser.add_argument("--train-steps", type=int, default=300,
                        help="GD steps from the untrained model to the trained one")
    parser.add_argument("--warm-steps", type=int, nargs="+", default=[10, 50],
                        help="more GD steps after 'trained' before each warm-started estimate "
                        "(section 3; the eos_gd study tracks λ_max every 50)")
    parser.add_argument("--rel-err", type=float, default=1e-3, help="the target on λ_max")
    parser.add_argument("--starts", type=int, default=5, help="random start vectors")
    parser.add_argument("--lanczos-cap", type=int, default=256, help="most Lanczos steps")
    parser.add_argument("--power-cap", type=int, default=2000, help="most power iterations")
    parser.add_argument("--reference-steps", type=int, default=400)
    parser.add_argument("--reference-tol", type=float, default=1e-10,
                        help="the reference's Lanczos stops once its top-2 residuals are below "
                        "this times λ_max")
    parser.add_argument("--dense-max-params", type=int, default=3000,
                        help="cross-check the reference with a dense Hessian up to this P")
    parser.add_argument("--other-start", action=argparse.BooleanOptionalAction, default=True,
                        help="cross-check the reference by a run from another random start")
    parser.add_argument("--repeats", type=int, default=10, help="repeats of section 2")
    parser.add_argument("--inner", type=int, default=5, help="calls per repeat in section 2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where the model, data and vectors live (default cpu)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 100 points, 50 training steps, 1 start, small caps, "
                        "no cross-check from another start")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.quick:
        args.n, args.train_steps, args.starts = 100, 50, 1
        args.lanczos_cap, args.power_cap, args.reference_steps = 64, 150, 60
        args.reference_tol, args.warm_steps = 1e-6, [10]
        args.repeats, args.inner, args.other_start = 3, 2, False
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    global DEVICE
    DEVICE = device = torch.device(args.device)
    torch.set_num_threads(args.threads)

    data = teacher_student(TeacherStudentSettings(
        task="classification", n_classes=args.classes, teacher_hidden=tuple(args.teacher_hidden),
        input_dim=args.dim, n_train=args.n, n_test=args.n, seed=args.seed))
    X, y, X_test, y_test = (torch.from_numpy(a).to(device) for a in (
        data.train.x, data.train.y, data.test.x, data.test.y))
    mlp = MLPSettings(hidden=tuple(args.hidden), activation="tanh")
    untrained = build_seeded_model("mlp", mlp, args.dim, args.classes, args.seed).to(device)
    trained = copy.deepcopy(untrained)

    def gd(model: nn.Module, steps: int) -> None:  # GD is stateless: calls chain exactly
        train_classifier(model, X, y, X_test, y_test, TrainSettings(
            optimizer="gd", loss="mse", lr=args.lr, max_steps=steps, eval_every=steps,
            stop_at_train_acc=None), torch.Generator())

    train_seconds = seconds(lambda: gd(trained, args.train_steps))
    laters = {}
    for steps in args.warm_steps:
        laters[f"+{steps} steps"] = copy.deepcopy(trained)
        gd(laters[f"+{steps} steps"], steps)
    dim = sum(p.numel() for p in trained.parameters())
    starts = [torch.randn(dim, generator=torch.Generator().manual_seed(1000 + i),
                          dtype=DTYPE).to(device) for i in range(args.starts)]

    widths = "-".join(map(str, [args.dim, *args.hidden, args.classes]))
    where = "cpu" if device.type == "cpu" else f"cuda ({torch.cuda.get_device_name(device)})"
    print(f"MLP {widths} (tanh), P = {dim} parameters; teacher-student data "
          f"(teacher {args.dim}-{'-'.join(map(str, args.teacher_hidden))}-{args.classes}), "
          f"{args.n} train points; loss ½‖f − onehot(y)‖², Hessian of the mean over all {args.n} "
          f"points in float64; {torch.get_num_threads()} torch thread(s); device " + where)
    record: dict = {"benchmark": "sharpness", "device": where, "quick": args.quick,
                    "settings": {k: v for k, v in vars(args).items() if k != "json"},
                    "torch_threads": torch.get_num_threads(), "parameters": dim,
                    "train_s": train_seconds, "points": {}}
    for label, model in {"untrained": untrained, "trained": trained, **laters}.items():
        loss, acc = evaluate(model, X, y, "mse")
        print(f"  {label:<9}: train loss {loss:.4f}, train accuracy {acc:.3f}")
        record["points"][label] = {"train_loss": loss, "train_accuracy": acc}
    print(f"  trained = untrained + {args.train_steps} full-batch GD steps at η = {args.lr} "
          f"(2/η = {2 / args.lr:g}; {train_seconds:.1f} s); +k steps = trained + k more",
          flush=True)

    # warm-up: the operator, autograd and the allocator, before anything is timed
    warm_args = copy.copy(args)
    warm_args.starts, warm_args.reference_steps, warm_args.lanczos_cap = 1, 8, 8
    warm_args.power_cap, warm_args.dense_max_params = 8, 0
    measure("warm-up", untrained, X, y, starts[:1], warm_args)

    points = [measure("untrained", untrained, X, y, starts, args),
              measure("trained", trained, X, y, starts, args)]
    later_points = [measure(name, model, X, y, starts, args, warm_start=points[1].ref.vector)
                    for name, model in laters.items()]

    print(f"\nReference λ_max: Lanczos to top-2 residuals ≤ {args.reference_tol:g}·λ_max (at most "
          f"{args.reference_steps} steps); its error is at most residual²/(λ_1 − λ_2). Checked "
          "by hessian_top_eigenvalues from another random start and by a dense float64 Hessian "
          f"(double backward) when P ≤ {args.dense_max_params}. θ_min: the smallest Ritz "
          "value (≥ λ_min). Power iteration's error shrinks about like "
          "(max(λ_2, |λ_min|)/λ_1)^(2k).")
    print(f"{'point':<10} {'λ_max':>10} {'λ_2':>10} {'θ_min':>10} {'λ_2/λ_1':>8} {'steps':>6} "
          f"{'residual':>9} {'other start':>11} {'dense':>9}")
    for point in [*points, *later_points]:
        r = point.ref
        dense = "skipped" if r.dense is None else f"{abs(r.dense / r.value - 1):.1e}"
        other = ("skipped" if r.other_start is None
                 else f"{abs(r.other_start / r.value - 1):.1e}")
        print(f"{point.name:<10} {r.value:>10.6f} {r.second:>10.6f} {r.bottom:>10.6f} "
              f"{r.second / r.value:>8.4f} {r.steps:>6} {r.residual:>9.1e} "
              f"{other:>11} {dense:>9}")
        record.setdefault("reference", {})[point.name] = {
            "lambda_max": r.value, "lambda_2": r.second, "theta_min": r.bottom,
            "lambda_2_over_lambda_1": r.second / r.value, "steps": r.steps,
            "residual": r.residual,
            "other_start_rel_diff": (None if r.other_start is None
                                     else abs(r.other_start / r.value - 1)),
            "dense_rel_diff": None if r.dense is None else abs(r.dense / r.value - 1)}
    print("  (other start, dense: relative difference from the reference λ_max)")
    worst = max(point.consistency for point in [*points, *later_points])
    print(f"Our traced Lanczos vs hessian_top_eigenvalues(max_iter=m, tol=0) from the same start: "
          f"estimates differ by at most {worst:.1e} relatively")
    record["traced_vs_hessian_top_eigenvalues_max_rel_diff"] = worst

    print(f"\n1. HVPs and seconds until |λ̂ − λ_max| ≤ {args.rel_err:g}·λ_max; median and worst of "
          f"{args.starts} random starts (Gaussian, the same for every method); caps: Lanczos "
          f"{args.lanczos_cap}, power {args.power_cap} (>cap, n/r: not reached)")
    print(f"   first 2 rows: the first HVP after which the estimate is within the target; then "
          f"each method's own stop, without the reference: hessian_top_eigenvalues(tol="
          f"{args.rel_err:g}) (its num_matvecs, including 1 for the residual) and PyHessian's "
          f"(|Δλ| < {args.rel_err:g}·|λ|)")
    print(HEADER)
    to_target: list[dict] = []
    over: dict[str, dict] = {}
    record.update(to_target=to_target, power_over_lanczos=over)
    for point in [*points, *later_points]:
        to_target.append(print_row(point.name, "Lanczos", point.lanczos, args.lanczos_cap))
        to_target.append(print_row(point.name, "power iteration", point.power, args.power_cap))
        over[point.name] = print_ratio(point.name, point.power, point.lanczos)
        to_target.append(print_row(point.name, f"hessian_top_eigenvalues(tol={args.rel_err:g})",
                                   point.practical_lanczos, args.lanczos_cap))
        to_target.append(print_row(point.name, "power iteration, PyHessian's stop",
                                   point.practical_power, args.power_cap))
    record["hvps_power_over_lanczos"] = {name: r["hvps_median"] for name, r in over.items()}

    costs, mismatch = product_costs(trained, X, y, args.repeats, args.inner)
    base = costs["gradient, float64"]
    print(f"\n2. One product on all {args.n} points, trained model: median of {args.repeats} "
          f"repeats of {args.inner} calls after a warm-up (the HVPs differ by at most "
          f"{mismatch:.1e} relatively)")
    print(f"{'call':<54} {'ms':>8} {'/ gradient float64':>18}")
    for label, t in costs.items():
        print(f"{label:<54} {t * 1e3:>8.2f} {t / base:>17.2f}x")
    record["product_costs"] = [{"call": label, "ms": t * 1e3, "per_float64_gradient": t / base}
                               for label, t in costs.items()]
    record["hvp_rel_mismatch"] = mismatch

    print("\n3. Tracking during training: k GD steps after 'trained', starting from trained's top "
          "eigenvector (|cos|: its overlap with the new one) vs from the random starts above; "
          f"HVPs until within {args.rel_err:g}")
    print(HEADER)
    record["tracking"] = {}
    for point in later_points:
        overlap = abs(float(points[1].ref.vector @ point.ref.vector))
        print(f"{point.name:<10} |cos| = {overlap:.4f}")
        rows = []
        for key, method, outcomes, cap in (
                ("Lanczos", "Lanczos", point.lanczos, args.lanczos_cap),
                ("power", "power iteration", point.power, args.power_cap),
                ("hessian_top_eigenvalues", f"hessian_top_eigenvalues(tol={args.rel_err:g})",
                 point.practical_lanczos, args.lanczos_cap)):
            for start, used in (("warm", [point.warm[key]]), ("cold", outcomes)):
                row = print_row(point.name, f"{method}, {start}", used, cap)
                rows.append({**row, "method": method, "start": start})
        record["tracking"][point.name] = {"overlap_abs_cos": overlap, "rows": rows}
    write_json(args.json, record)

if __name__ == "__main__":
    main()
