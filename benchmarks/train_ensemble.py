"""Benchmark: K small MLPs trained together (train_classifier_ensemble) vs one by one (the loop).

Both sides do the same work: a fixed number of SGD steps (stop_at_train_acc=None) with the same
evaluations, on a Gaussian mixture. Both are measured in the same run, alternating repeat by repeat
so that load from other processes hits both alike, as the median of a few repeats after a warm-up,
at each thread count. Each of the loop's models does the same work, so the loop is timed on at most
``--loop-models`` of the K models and reported per model-step like the vectorised trainer.
Also reports the vectorised trainer's achieved FLOP/s as a fraction of a large float32 matmul's,
measured in the same run at the same thread count.

With ``--device cuda`` the models and data live on the GPU (the minibatch generators stay on the
CPU, as in the studies), every timer reads the clock after ``torch.cuda.synchronize()``, and the
matmul is a larger one on the GPU; ``--threads`` still sets the CPU side's torch threads.

    .venv/bin/python benchmarks/train_ensemble.py            # K = 1, 8, 32, 128; 1 and 2 threads
    .venv/bin/python benchmarks/train_ensemble.py --quick    # a seconds-long smoke run
    python3 benchmarks/train_ensemble.py --device cuda       # the same on the GPU
    .venv/bin/python benchmarks/train_ensemble.py --quick --json ensemble.json   # and the figures

``--json PATH`` writes the figures printed, unrounded: {"benchmark", "device", "quick",
"settings", "mflop_per_model_step", "matmul": [{"threads", "size", "gflop_per_s"}], "rows":
[{"threads", "K", "method", "loop_us_per_model_step", "vectorised_us_per_model_step",
"speed_up" (loop / vectorised), "vectorised_gflop_per_s", "fraction_of_matmul"}]}.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import torch
from results_json import add_json_argument, write_json
from torch import nn

from genlab.data.gaussian_mixture import gaussian_mixture
from genlab.models.registry import build_model
from genlab.settings import GaussianMixtureSettings, MLPSettings, TrainSettings
from genlab.train.ensemble import train_classifier_ensemble
from genlab.train.loop import train_classifier


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a clock read after it counts that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds(fn: Callable[[], object], device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def matmul_flops(size: int, repeats: int, device: torch.device) -> float:
    """FLOP/s of one large float32 matmul: the device's practical peak (on the CPU, at this
    thread count)."""
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    a @ b  # warm-up
    return 2 * size**3 / statistics.median(seconds(lambda: a @ b, device)
                                           for _ in range(repeats))


def forward_flops_per_example(model: nn.Module) -> int:
    """Two FLOPs per multiply-add of the Linear layers (activations and biases are noise)."""
    return sum(2 * m.in_features * m.out_features for m in model.modules()
               if isinstance(m, nn.Linear))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--methods", nargs="+", default=["bmm", "vmap"],
                        choices=["auto", "bmm", "vmap"], help="ensemble methods to time")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--n", type=int, default=1000, help="training and test points each")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loop-models", type=int, default=32,
                        help="time the loop on at most this many of the K models")
    parser.add_argument("--matmul-size", type=int, default=None,
                        help="the peak's matmul: default 2048 on cpu (512 with --quick), 8192 on "
                        "cuda (4096 with --quick)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where the models and data live (default cpu)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: K = 1, 4; 10 steps; one repeat; 1 thread")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    device = torch.device(args.device)
    if args.quick:
        args.ks, args.threads, args.steps, args.eval_every = [1, 4], [1], 10, 5
        args.repeats = 1
    if args.matmul_size is None:
        args.matmul_size = {("cpu", False): 2048, ("cpu", True): 512,
                            ("cuda", False): 8192, ("cuda", True): 4096}[args.device, args.quick]

    data = gaussian_mixture(GaussianMixtureSettings(
        n_classes=args.classes, dim=args.dim, mean_scale=1.0, n_train=args.n, n_test=args.n,
        seed=0))
    x, y, x_test, y_test = (torch.from_numpy(a).to(device) for a in (
        data.train.x, data.train.y, data.test.x, data.test.y))
    mlp = MLPSettings(hidden=tuple(args.hidden), activation="relu")

    def make(k_models: int, steps: int) -> tuple[list[nn.Module], list[TrainSettings]]:
        models = []
        for k in range(k_models):
            torch.manual_seed(k)
            models.append(build_model("mlp", mlp, args.dim, args.classes).to(device))
        settings = [TrainSettings(lr=0.01 * (1 + k % 4), momentum=0.9, batch_size=args.batch_size,
                                  max_steps=steps, eval_every=args.eval_every,
                                  stop_at_train_acc=None) for k in range(k_models)]
        return models, settings

    def generators(k_models: int) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(1000 + k) for k in range(k_models)]

    def run_loop(models: list[nn.Module], settings: list[TrainSettings]) -> float:
        models = copy.deepcopy(models)
        synchronize(device)
        start = time.perf_counter()
        for model, s, g in zip(models, settings, generators(len(models)), strict=True):
            train_classifier(model, x, y, x_test, y_test, s, g)
        synchronize(device)
        return time.perf_counter() - start

    def run_ensemble(models: list[nn.Module], settings: list[TrainSettings],
                     method: str) -> float:
        models = copy.deepcopy(models)
        synchronize(device)
        start = time.perf_counter()
        train_classifier_ensemble(models, x, y, x_test, y_test, settings,
                                  generators(len(models)), method=method)  # type: ignore[arg-type]
        synchronize(device)
        return time.perf_counter() - start

    # Training FLOPs: forward + backward of a matmul layer is ~3x its forward (the forward, the
    # input's gradient, the weight's gradient); evaluations are forward only, on train and test.
    per_example = forward_flops_per_example(make(1, 1)[0][0])
    n_evals = 1 + args.steps // args.eval_every + (args.steps % args.eval_every != 0)
    flops_per_model = per_example * (3 * args.batch_size * args.steps + 2 * args.n * n_evals)

    where = "cpu" if device.type == "cpu" else (
        f"cuda ({torch.cuda.get_device_name(device)}, float32 matmul precision "
        f"'{torch.get_float32_matmul_precision()}')")
    print(f"device {where}")
    print(f"MLP {args.dim}-{'-'.join(map(str, args.hidden))}-{args.classes} (ReLU), {args.n} "
          f"train / {args.n} test points, batch {args.batch_size}, {args.steps} SGD steps, "
          f"evaluation every {args.eval_every}; median of {args.repeats} after a warm-up; loop "
          f"timed on min(K, {args.loop_models}) models; "
          f"{flops_per_model / args.steps / 1e6:.2f} MFLOP per model-step (training ~3x "
          "forward, plus evaluations)")
    record = {"benchmark": "train_ensemble", "device": where, "quick": args.quick,
              "settings": {k: getattr(args, k) for k in (
                  "ks", "threads", "methods", "steps", "eval_every", "batch_size", "hidden", "dim",
                  "classes", "n", "repeats", "loop_models", "matmul_size")},
              "mflop_per_model_step": flops_per_model / args.steps / 1e6, "matmul": [],
              "rows": []}
    for threads in args.threads:
        torch.set_num_threads(threads)
        peak = matmul_flops(args.matmul_size, args.repeats, device)
        on = "" if device.type == "cpu" else " on the GPU"
        print(f"\n{threads} thread(s): {args.matmul_size}^2 float32 matmul{on} "
              f"{peak / 1e9:.1f} GFLOP/s; times in microseconds per model-step")
        record["matmul"].append({"threads": threads, "size": args.matmul_size,
                                 "gflop_per_s": peak / 1e9})
        print(f"{'threads':>7} {'K':>4} {'method':>6} {'loop us':>9} {'vec us':>9} "
              f"{'speed-up':>8} {'vec GFLOP/s':>11} {'of matmul':>9}", flush=True)
        warm_models, warm_settings = make(2, args.eval_every)
        run_loop(warm_models[:1], warm_settings[:1])
        for k_models in args.ks:
            models, settings = make(k_models, args.steps)
            n_loop = min(k_models, args.loop_models)
            for method in args.methods:  # warm-up at this K: allocator, kernels, vmap tracing
                run_ensemble(*make(k_models, min(args.steps, args.eval_every)), method)
            loop_times: list[float] = []
            vec_times: dict[str, list[float]] = {method: [] for method in args.methods}
            for _ in range(args.repeats):
                loop_times.append(run_loop(models[:n_loop], settings[:n_loop]) / n_loop)
                for method in args.methods:
                    vec_times[method].append(run_ensemble(models, settings, method) / k_models)
            loop_s = statistics.median(loop_times)  # seconds per model
            for method in args.methods:
                vec_s = statistics.median(vec_times[method])
                achieved = flops_per_model / vec_s
                print(f"{threads:>7} {k_models:>4} {method:>6} {loop_s / args.steps * 1e6:>9.1f} "
                      f"{vec_s / args.steps * 1e6:>9.1f} {loop_s / vec_s:>7.1f}x "
                      f"{achieved / 1e9:>11.2f} {achieved / peak:>9.1%}", flush=True)
                record["rows"].append({
                    "threads": threads, "K": k_models, "method": method,
                    "loop_us_per_model_step": loop_s / args.steps * 1e6,
                    "vectorised_us_per_model_step": vec_s / args.steps * 1e6,
                    "speed_up": loop_s / vec_s, "vectorised_gflop_per_s": achieved / 1e9,
                    "fraction_of_matmul": achieved / peak})
    write_json(args.json, record)


if __name__ == "__main__":
    main()
