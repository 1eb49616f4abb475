"""Benchmark: K seeds, each with its own data draw, trained as one ensemble vs K separate runs.

Seeds as a batch dimension (issue 37): ``train_classifier_ensemble`` with one training and test
set per member against ``train_classifier`` once per seed, for each model family a study trains:
an MLP (SGD with momentum, batched matmuls), MNIST-1D's 1-D CNN (Adam, ``vmap`` over
``functional_call``) and a one-layer transformer on token sequences (Adam, ``vmap``). Both sides
do the same work: a fixed number of steps (no stop rule) with the same evaluations, on K draws
of random inputs and labels (the cost does not depend on what the data say). Both are measured in
the same run, alternating repeat by repeat so that load from other processes hits both alike,
the median of ``--repeats`` after a warm-up. The separate runs' cost per model does not depend on
K, so they are timed on at most ``--loop-models`` seeds and scaled to K.

Agreement is checked apart from the timing, in float64 over ``--check-steps`` (20) steps: each
seed trained alone and in the ensemble of all K, compared in function space (the largest
absolute difference of their test-set logits, printed beside the ratio). Not in float32 at the
end of the timed runs: these recipes amplify any rounding difference until the two
trajectories part, whoever computes them. Measured (1 thread): in float32 a loop run whose
initial weights are scaled by 1 + 1e-7·N(0, 1) departs from the unperturbed loop by 3e-4 (the
transformer, after 5 steps), 3e-2 (transformer, 20 steps) and 10 (CNN, 300 steps, where the
ensemble's gap is 19); in float64 the ensemble's gap is 1e-14 for the transformer after 20
steps and 7e-13 for the CNN after 300, while a float64 transformer nudged by 1e-14 relative
still departs by 3.9 by step 300 (the ensemble's gap there: 4.0). So the float32 gaps are
rounding, amplified; float64 over a short run is where a real mistake (another minibatch, step
or moment, >1e-3) would show. Nor in parameter space: a transformer's key bias has an exactly
zero gradient in exact arithmetic, the softmax being shift-invariant, so its float gradient is
rounding noise that Adam scales to lr-sized steps, and the two sides' key biases differ by ~1e-3
where their outputs agree.

    .venv/bin/python benchmarks/seed_batch.py            # K = 1, 10, 32; every family
    .venv/bin/python benchmarks/seed_batch.py --quick    # a seconds-long smoke run
    python3 benchmarks/seed_batch.py --device cuda       # the same on the GPU

``--json PATH`` writes the figures printed, unrounded: {"benchmark", "device", "quick",
"threads", "settings", "rows": [{"family", "K", "separate_s", "ensemble_s", "speed_up"
(separate / ensemble), "max_abs_logit_diff"}]}.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from results_json import add_json_argument, write_json
from torch import nn

from genlab.models.registry import build_model
from genlab.settings import Conv1DSettings, MLPSettings, TrainSettings, TransformerSettings
from genlab.train.ensemble import train_classifier_ensemble
from genlab.train.loop import train_classifier

Draw = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Family:
    """One model family as a study trains it: the model, its inputs and its recipe."""

    name: str
    build: Callable[[], nn.Module]
    draw: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]]  # (x, y) of n + n_test
    settings: TrainSettings


def families(steps: int) -> list[Family]:
    n_classes = 10

    def series(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(1200, 40, generator=gen), torch.randint(0, n_classes, (1200,),
                                                                   generator=gen)

    def tokens(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        # (a, b, =) over 31 residues, stored as float32 rows as genlab.data.modular does
        x = torch.randint(0, 31, (1200, 3), generator=gen).float()
        x[:, 2] = 31
        return x, torch.randint(0, 31, (1200,), generator=gen)

    sgd = TrainSettings(lr=0.05, momentum=0.9, batch_size=100, max_steps=steps,
                        eval_every=max(1, steps // 4), stop_at_train_acc=None)
    adam = TrainSettings(optimizer="adam", lr=0.01, batch_size=100, max_steps=steps,
                         eval_every=max(1, steps // 4), stop_at_train_acc=None)
    transformer = TransformerSettings(vocab_size=32, max_len=3, d_model=64, n_heads=4,
                                      d_mlp=256)
    return [
        Family("mlp", lambda: build_model("mlp", MLPSettings(hidden=(256, 256)), 40, n_classes),
               series, sgd),
        Family("cnn", lambda: build_model("conv1d", Conv1DSettings(), 40, n_classes), series,
               adam),
        Family("transformer", lambda: build_model("transformer", transformer, 3, 31), tokens,
               adam),
    ]


def draws(family: Family, k: int, device: torch.device) -> list[Draw]:
    """K seeds' own data: 1,000 training and 200 test examples each."""
    out = []
    for seed in range(k):
        x, y = family.draw(torch.Generator().manual_seed(1000 + seed))
        x, y = x.to(device), y.to(device)
        out.append((x[:1000], y[:1000], x[1000:], y[1000:]))
    return out


def models(family: Family, k: int, device: torch.device) -> list[nn.Module]:
    out = []
    for seed in range(k):
        torch.manual_seed(seed)
        out.append(family.build().to(device))
    return out


def generators(k: int) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(100 + seed) for seed in range(k)]


def seconds(fn: Callable[[], object], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def agreement(family: Family, data: list[Draw], device: torch.device) -> float:
    """The largest test-logit difference between each seed trained alone and in the ensemble,
    both in float64."""
    k = len(data)
    data = [tuple(t.double() if t.is_floating_point() else t for t in d) for d in data]
    x, y, x_test, y_test = (list(t) for t in zip(*data, strict=True))
    alone = [m.double() for m in models(family, k, device)]
    for model, draw, gen in zip(alone, data, generators(k), strict=True):
        train_classifier(model, *draw, family.settings, gen)
    batch = [m.double() for m in models(family, k, device)]
    train_classifier_ensemble(batch, x, y, x_test, y_test, [family.settings] * k, generators(k))
    with torch.no_grad():
        return max((a.eval()(d[2]) - b.eval()(d[2])).abs().max().item()
                   for a, b, d in zip(alone, batch, data, strict=True))


def measure(family: Family, check: Family, k: int, loop_models: int, repeats: int,
            device: torch.device) -> dict[str, float]:
    data = draws(family, k, device)
    timed = min(k, loop_models)
    x, y, x_test, y_test = (list(t) for t in zip(*data, strict=True))
    separate, together = [], []
    for repeat in range(repeats + 1):  # the first of each is a warm-up
        alone = models(family, timed, device)
        t_loop = seconds(lambda alone=alone: [
            train_classifier(m, *d, family.settings, g)
            for m, d, g in zip(alone, data, generators(timed), strict=False)], device)
        batch = models(family, k, device)
        t_ensemble = seconds(lambda batch=batch: train_classifier_ensemble(
            batch, x, y, x_test, y_test, [family.settings] * k, generators(k)), device)
        if repeat:
            separate.append(t_loop * k / timed)
            together.append(t_ensemble)
    sep, ens = statistics.median(separate), statistics.median(together)
    return {"separate_s": sep, "ensemble_s": ens, "speed_up": sep / ens,
            "max_abs_logit_diff": agreement(check, data, device)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 10, 32])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loop-models", type=int, default=4,
                        help="separate runs timed per K (scaled to K: each costs the same)")
    parser.add_argument("--families", nargs="+", default=["mlp", "cnn", "transformer"])
    parser.add_argument("--check-steps", type=int, default=20,
                        help="steps of the agreement check (before chaos parts the trajectories)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="K = 1, 4; 20 steps; 1 repeat")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.quick:
        args.ks, args.steps, args.repeats, args.loop_models = [1, 4], 20, 1, 2
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    chosen = [f for f in families(args.steps) if f.name in args.families]
    checks = {f.name: f for f in families(args.check_steps)}
    print(f"{args.steps} steps of batch 100 per seed, each seed its own 1,000 training and 200 "
          f"test examples; {args.threads} thread(s) on {device}; median of {args.repeats}; "
          f"max |Δf| in float64 after {args.check_steps} steps")
    print(f"{'family':12s} {'K':>3s} {'separate s':>11s} {'ensemble s':>11s} {'speed-up':>9s} "
          f"{'max |Δf|':>9s}")
    rows = []
    for family in chosen:
        for k in args.ks:
            row = {"family": family.name, "K": k, **measure(
                family, checks[family.name], k, args.loop_models, args.repeats, device)}
            rows.append(row)
            print(f"{family.name:12s} {k:3d} {row['separate_s']:11.2f} {row['ensemble_s']:11.2f} "
                  f"{row['speed_up']:8.2f}x {row['max_abs_logit_diff']:9.1e}", flush=True)
    write_json(args.json, {"benchmark": "seed_batch", "device": str(device),
                           "quick": args.quick, "threads": args.threads,
                           "settings": {"ks": args.ks, "steps": args.steps,
                                        "repeats": args.repeats,
                                        "check_steps": args.check_steps,
                                        "loop_models": args.loop_models,
                                        "families": [f.name for f in chosen]},
                           "rows": rows})


if __name__ == "__main__":
    main()
