"""Generalization measures and rank statistics against exact, independently computed references.

- Norms, margins and products/sums over layers: numpy float64 on the weights of a tiny MLP
  (numpy's SVD for the spectral norm, next to ``torch.linalg.matrix_norm(ord=2)``).
- Path norm: the explicit sum over every input-to-output path of a 1-hidden-layer network, and
  f_{w²}(𝟏) of a ReLU network.
- σ′ and α′: linear regression under the square loss, L(θ) = (1/2n)‖X̃θ − y‖², is exactly
  quadratic with Hessian A = X̃ᵀX̃/n, so at the least-squares solution
  E L(θ + u) − L(θ) = ½ E uᵀAu = ½ Σ_i A_ii Var u_i: σ²Tr A/2 for u ~ N(0, σ²I), and
  ½ Σ_i A_ii(σ²θ_i² + ε²) magnitude-aware; so σ′ = √(2Δ/Tr A) and
  σ′_mag = √((2Δ − ε²Tr A)/Σ_i A_ii θ_i²). The worst case over ‖T⁻¹ε‖ ≤ α is α²λ_max(TAT)/2,
  so α′ = √(2Δ/λ_max(TAT)).
- Neural collapse: features collapsed exactly onto a simplex ETF, and numpy loops on random ones.
- Kendall τ: ``scipy.stats.kendalltau``; Ψ: hand-built grids and per-group scipy τ; CMI: tables
  whose mutual information is known.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math

import numpy as np
import pytest
import scipy.stats
import torch
from torch import Tensor, nn
from torch.nn.utils import vector_to_parameters

from genlab.analyses.measures.collapse import neural_collapse
from genlab.analyses.measures.flatness import largest_below, pac_bayes_sigma, worst_case_alpha
from genlab.analyses.measures.norms import layer_norms, layer_rotations, margins, path_norm
from genlab.analyses.measures.ranking import (
    conditional_mutual_information,
    granulated_kendall,
    kendall_tau,
    normalized_cmi,
)
from genlab.analyses.measures.registry import (
    MEASURES,
    MeasureInputs,
    MeasureSettings,
    compute_measure,
    compute_measures,
)
from genlab.losses import loss_value
from genlab.models.conv1d import Conv1DNet
from genlab.models.mlp import MLP
from genlab.settings import Conv1DSettings, MLPSettings

mse = functools.partial(loss_value, "mse")
cross_entropy = functools.partial(loss_value, "cross_entropy")
DELTA = 0.1


def _mlp(hidden: tuple[int, ...], activation: str = "relu", seed: int = 0, input_dim: int = 3,
         classes: int = 3) -> MLP:
    torch.manual_seed(seed)
    return MLP(MLPSettings(hidden=hidden, activation=activation), input_dim, classes)


def _weights(model: nn.Module) -> list[np.ndarray]:
    return [m.weight.detach().double().numpy() for m in model.modules()
            if isinstance(m, nn.Linear)]


@functools.cache
def _classifier() -> tuple[MLP, MLP, Tensor, Tensor]:
    """A 3-5-4-3 ReLU MLP fitted to 3 separated Gaussian clusters of 14 points (every training
    margin positive), its initialisation, and the data."""
    generator = torch.Generator().manual_seed(2)
    centres = 3.0 * torch.eye(3)
    y = torch.arange(3).repeat(14)
    X = centres[y] + torch.randn(len(y), 3, generator=generator)
    init = _mlp((5, 4), seed=1)
    model = copy.deepcopy(init)
    for _ in range(150):  # full-batch GD by hand: torch.optim's first use imports torch._dynamo
        gradients = torch.autograd.grad(cross_entropy(model(X), y), list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), gradients, strict=True):
                p.sub_(0.5 * g)
    return model, init, X, y


# ------------------------------------------------------------------------------------- norms


def test_norm_measures_match_numpy_float64() -> None:
    model, init, X, y = _classifier()
    W, W0 = _weights(model), _weights(init)
    fro = np.array([np.sum(w ** 2) for w in W])
    spec = np.array([np.linalg.svd(w, compute_uv=False)[0] ** 2 for w in W])
    dist_fro = np.array([np.sum((w - w0) ** 2) for w, w0 in zip(W, W0, strict=True)])
    dist_spec = np.array([np.linalg.svd(w - w0, compute_uv=False)[0] ** 2
                          for w, w0 in zip(W, W0, strict=True)])
    logits = copy.deepcopy(model).double()(X.double()).detach().numpy()
    true = logits[np.arange(len(y)), y.numpy()]
    others = logits.copy()
    others[np.arange(len(y)), y.numpy()] = -np.inf
    gamma = np.quantile(true - others.max(axis=1), 0.1)
    assert gamma > 0
    d = len(W)
    expected = {
        "num_params": sum(p.numel() for p in model.parameters()),
        "inverse_margin": 1 / gamma ** 2,
        "spec_init": np.prod(spec) * np.sum(dist_fro / spec) / gamma ** 2,
        "spec_orig": np.prod(spec) * np.sum(fro / spec) / gamma ** 2,
        "prod_of_spec_over_margin": np.prod(spec) / gamma ** 2,
        "prod_of_spec": np.prod(spec),
        "fro_over_spec": np.sum(fro / spec),
        "sum_of_spec_over_margin": d * (np.prod(spec) / gamma ** 2) ** (1 / d),
        "sum_of_spec": d * np.prod(spec) ** (1 / d),
        "prod_of_fro_over_margin": np.prod(fro) / gamma ** 2,
        "prod_of_fro": np.prod(fro),
        "sum_of_fro_over_margin": d * (np.prod(fro) / gamma ** 2) ** (1 / d),
        "sum_of_fro": d * np.prod(fro) ** (1 / d),
        "frobenius_distance": np.sum(dist_fro),
        "spectral_distance": np.sum(dist_spec),
        "param_norm": np.sum(fro),
    }
    inputs = MeasureInputs(model, X, y, init_model=init)
    for name, value in expected.items():
        assert compute_measure(name, inputs).value == pytest.approx(value, rel=1e-10), name


def test_spectral_norm_matches_torch_matrix_norm() -> None:
    model, _, _, _ = _classifier()
    norms = layer_norms(model)
    for squared, m in zip(norms.spec, [m for m in model.modules() if isinstance(m, nn.Linear)],
                          strict=True):
        reference = torch.linalg.matrix_norm(m.weight.detach().double(), ord=2)
        assert float(squared) == pytest.approx(float(reference) ** 2, rel=1e-12)


def test_margins_of_an_identity_network() -> None:
    model = nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(3))
    X = torch.tensor([[3.0, 1.0, 0.0], [0.0, 2.0, 5.0], [1.0, 1.0, 1.0]])
    y = torch.tensor([0, 1, 2])
    assert margins(model, X, y).tolist() == [2.0, -3.0, 0.0]


def test_path_norm_is_the_sum_over_paths() -> None:
    model = _mlp((4,), seed=3)
    (W1, W2), (b1, b2) = _weights(model), [model.net[i].bias.detach().double().numpy()
                                           for i in (0, 2)]
    total = 0.0
    for k, j in itertools.product(range(W2.shape[0]), range(W2.shape[1])):
        total += sum((W2[k, j] * W1[j, i]) ** 2 for i in range(W1.shape[1]))  # input paths
        total += (W2[k, j] * b1[j]) ** 2  # paths from the hidden bias units
    total += np.sum(b2 ** 2)  # paths from the output bias units
    assert path_norm(model) == pytest.approx(total, rel=1e-12)


def test_path_norm_is_f_of_squared_weights_on_ones_and_ignores_the_activation() -> None:
    relu = _mlp((6, 5), seed=4)
    squared = copy.deepcopy(relu).double()
    with torch.no_grad():
        for p in squared.parameters():
            p.square_()
        reference = float(squared(torch.ones(1, 3, dtype=torch.float64)).sum())
    assert path_norm(relu) == pytest.approx(reference, rel=1e-12)
    tanh = _mlp((6, 5), "tanh", seed=4)
    tanh.load_state_dict(relu.state_dict())
    assert path_norm(tanh) == pytest.approx(reference, rel=1e-12)


def _unrolled(conv: torch.nn.Conv1d, length: int) -> torch.Tensor:
    """The dense matrix of a Conv1d without its bias on (C_in, length) inputs, flattened
    channel-major as torch flattens: column j is the layer applied to the j-th basis input."""
    basis = torch.eye(conv.in_channels * length, dtype=torch.float64).reshape(
        -1, conv.in_channels, length)
    weight = conv.weight.detach().double()
    out = torch.nn.functional.conv1d(basis, weight, stride=conv.stride, padding=conv.padding)
    return out.reshape(len(basis), -1).T


def test_the_path_norm_of_a_cnn_is_that_of_its_unrolled_dense_network() -> None:
    """A 1-D CNN is an MLP whose weight matrices are its unrolled convolutions (zeros where a
    kernel does not reach, each bias repeated over positions): the path norm computed on the CNN
    equals the linear recursion over those dense matrices, and is independent of the
    activation."""
    settings = Conv1DSettings(channels=(3, 4), kernel_sizes=(5, 3), stride=2, padding=1)
    torch.manual_seed(0)
    cnn = Conv1DNet(settings, input_dim=12, output_dim=3)
    v, length = torch.ones(12, dtype=torch.float64), 12
    for conv in (m for m in cnn.modules() if isinstance(m, torch.nn.Conv1d)):
        dense = _unrolled(conv, length)
        length = dense.shape[0] // conv.out_channels
        bias = conv.bias.detach().double().repeat_interleave(length)
        v = dense.square() @ v + bias.square()
    v = cnn.head.weight.detach().double().square() @ v + cnn.head.bias.detach().double().square()
    assert path_norm(cnn, (12,)) == pytest.approx(float(v.sum()), rel=1e-12)
    tanh = Conv1DNet(settings.model_copy(update={"activation": "tanh"}), 12, 3)
    tanh.load_state_dict(cnn.state_dict())
    assert path_norm(tanh, (12,)) == pytest.approx(float(v.sum()), rel=1e-12)
    with pytest.raises(ValueError, match="without one"):
        path_norm(cnn)  # a CNN needs the input shape
    pooled = torch.nn.Sequential(torch.nn.Conv1d(1, 2, 3), torch.nn.MaxPool1d(2))
    with pytest.raises(ValueError, match="MaxPool1d"):
        path_norm(pooled, (1, 8))


def test_layer_rotation_of_scaled_turned_and_flipped_layers() -> None:
    init = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        init.weight.copy_(torch.eye(2))
    turned = copy.deepcopy(init)
    with torch.no_grad():
        turned.weight.copy_(torch.tensor([[0.0, 1.0], [-1.0, 0.0]]))
    scaled, flipped = copy.deepcopy(init), copy.deepcopy(init)
    with torch.no_grad():
        scaled.weight.mul_(3.0)
        flipped.weight.mul_(-1.0)
    assert layer_rotations(scaled, init).tolist() == pytest.approx([0.0], abs=1e-15)
    assert layer_rotations(turned, init).tolist() == pytest.approx([1.0], abs=1e-15)
    assert layer_rotations(flipped, init).tolist() == pytest.approx([2.0], abs=1e-15)


# ---------------------------------------------------------------------------------- flatness


def test_largest_below_finds_the_threshold_of_a_monotone_function() -> None:
    calls: list[float] = []

    def quadratic(r: float) -> float:
        calls.append(r)
        return 3.0 * r ** 2

    found = largest_below(quadratic, 0.5, start=0.01, depth=40)
    assert 3.0 * found ** 2 <= 0.5
    assert found == pytest.approx(math.sqrt(0.5 / 3.0), rel=1e-10)
    assert largest_below(lambda r: 0.0, 0.5, max_doublings=5) == math.inf
    assert largest_below(lambda r: math.nan, 0.5, depth=5) == 0.0


@functools.cache
def _regression() -> tuple[nn.Linear, Tensor, Tensor, Tensor]:
    """A linear model at the least-squares solution of 50 examples in 4 dimensions; A = X̃ᵀX̃/n."""
    generator = torch.Generator().manual_seed(5)
    X = torch.randn(50, 4, generator=generator, dtype=torch.float64) * torch.tensor(
        [2.0, 1.0, 0.7, 0.4], dtype=torch.float64)
    y = X @ torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64) + 0.2 * torch.randn(
        50, generator=generator, dtype=torch.float64)
    design = torch.cat([X, torch.ones(50, 1, dtype=torch.float64)], dim=1)
    model = nn.Linear(4, 1).double()
    vector_to_parameters(torch.linalg.lstsq(design, y[:, None]).solution[:, 0],
                         model.parameters())
    return model, X, y, design.T @ design / 50


def test_pac_bayes_sigma_on_linear_regression() -> None:
    model, X, y, A = _regression()
    samples = 200
    sigma = pac_bayes_sigma(model, X, y, mse, target=DELTA, num_samples=samples, depth=30)
    trace = float(torch.trace(A))
    exact = math.sqrt(2 * DELTA / trace)
    # the K-sample mean of zᵀAz has relative std √(2‖A‖_F²/K)/Tr A; σ′ moves by half of it
    relative_std = math.sqrt(2 * float(A.square().sum()) / samples) / trace / 2
    assert abs(sigma / exact - 1) < 4 * relative_std


def test_magnitude_aware_pac_bayes_sigma_on_linear_regression() -> None:
    model, X, y, A = _regression()
    theta = torch.cat([model.weight.detach().reshape(-1), model.bias.detach()])
    samples, eps = 200, 0.05
    sigma = pac_bayes_sigma(model, X, y, mse, target=DELTA, magnitude_eps=eps,
                            num_samples=samples, depth=30)
    diagonal = torch.diagonal(A)
    exact = math.sqrt((2 * DELTA - eps ** 2 * float(diagonal.sum()))
                      / float((diagonal * theta.square()).sum()))
    scaled = A * torch.outer(theta.abs(), theta.abs())  # D A D with D = diag(|θ|)
    relative_std = math.sqrt(2 * float(scaled.square().sum()) / samples) / float(
        torch.trace(scaled)) / 2
    assert abs(sigma / exact - 1) < 4 * relative_std


def test_magnitude_aware_sigma_is_invariant_to_relu_rescaling_and_plain_sigma_is_not() -> None:
    model, _, X, y = _classifier()
    rescaled = copy.deepcopy(model).double()
    with torch.no_grad():  # hidden layer 1 ×4 (weights and bias), layer 2's weights ×1/4
        rescaled.net[0].weight.mul_(4.0)
        rescaled.net[0].bias.mul_(4.0)
        rescaled.net[2].weight.div_(4.0)
    assert torch.allclose(rescaled(X.double()), model(X).double(), atol=1e-5)
    common = {"target": DELTA, "num_samples": 4, "depth": 25}
    plain = [pac_bayes_sigma(m, X, y, cross_entropy, **common) for m in (model, rescaled)]
    mag = [pac_bayes_sigma(m, X, y, cross_entropy, magnitude_eps=0.0, **common)
           for m in (model, rescaled)]
    assert mag[0] == pytest.approx(mag[1], rel=1e-5)
    assert abs(plain[0] / plain[1] - 1) > 0.05


@pytest.mark.parametrize("adaptive", [False, True])
def test_worst_case_alpha_on_linear_regression(adaptive: bool) -> None:
    model, X, y, A = _regression()
    eta0 = 0.01
    theta = torch.cat([model.weight.detach().reshape(-1), model.bias.detach()])
    T = torch.diag(theta.abs() + eta0) if adaptive else torch.eye(len(theta), dtype=A.dtype)
    exact = math.sqrt(2 * DELTA / float(torch.linalg.eigvalsh(T @ A @ T).max()))
    alpha = worst_case_alpha(model, mse, X, y, target=DELTA, adaptive=adaptive, eta0=eta0,
                             steps=60, depth=18, start=0.1)  # λ₂/λ₁ = 0.89 of TAT: slow ascent
    assert alpha == pytest.approx(exact, rel=1e-5)


# ------------------------------------------------------------------------------ neural collapse


def _etf(C: int, p: int, seed: int) -> Tensor:
    """(C, p) rows of a simplex ETF: unit norms, pairwise cosines −1/(C−1), summing to 0."""
    centred = torch.eye(C, dtype=torch.float64) - 1.0 / C
    basis, _ = torch.linalg.qr(torch.randn(p, C, dtype=torch.float64,
                                           generator=torch.Generator().manual_seed(seed)))
    rows = centred @ basis.T
    return rows / torch.linalg.vector_norm(rows, dim=1, keepdim=True)


def test_exactly_collapsed_features_give_zero_collapse_metrics() -> None:
    C, p = 4, 6
    etf = _etf(C, p, 6)
    offset = torch.arange(p, dtype=torch.float64) / 3
    labels = torch.arange(C).repeat_interleave(5)
    features = 2.5 * etf[labels] + offset
    weights = 0.7 * etf
    result = neural_collapse(features, labels, weights, bias=-(weights @ offset))
    assert result.nc1 == pytest.approx(0.0, abs=1e-24)
    assert result.nc2_equinorm == pytest.approx(0.0, abs=1e-12)
    assert result.nc2_equinorm_weights == pytest.approx(0.0, abs=1e-12)
    assert result.nc2_equiangular == pytest.approx(0.0, abs=1e-12)
    assert result.nc2_max_angle == pytest.approx(0.0, abs=1e-12)
    assert result.mean_cosine == pytest.approx(-1 / (C - 1), abs=1e-12)
    assert result.nc3 == pytest.approx(0.0, abs=1e-24)
    assert result.nc4 == 0.0


def test_collapse_metrics_of_random_features_match_numpy() -> None:
    C, p, per_class = 3, 5, 7
    generator = np.random.default_rng(7)
    labels = np.repeat(np.arange(C), per_class)
    features = generator.normal(size=(C * per_class, p)) + 2 * generator.normal(size=(C, p))[labels]
    weights = generator.normal(size=(C, p))
    means = np.stack([features[labels == c].mean(axis=0) for c in range(C)])
    centred = means - features.mean(axis=0)
    sigma_w = sum(np.outer(h - means[c], h - means[c]) for h, c in zip(features, labels,
                                                                         strict=True)) / len(labels)
    sigma_b = sum(np.outer(m, m) for m in centred) / C
    norms = np.linalg.norm(centred, axis=1)
    cosines = [centred[a] @ centred[b] / (norms[a] * norms[b])
               for a in range(C) for b in range(C) if a != b]
    nearest = np.argmin(((features[:, None, :] - means[None]) ** 2).sum(axis=2), axis=1)
    predictions = nearest.copy()
    predictions[:4] = (predictions[:4] + 1) % C  # the network disagrees on exactly 4 points
    result = neural_collapse(torch.tensor(features), torch.tensor(labels), torch.tensor(weights),
                             predictions=torch.tensor(predictions))
    assert result.nc1 == pytest.approx(np.trace(sigma_w @ np.linalg.pinv(sigma_b)) / C, rel=1e-9)
    assert result.nc2_equinorm == pytest.approx(np.std(norms) / np.mean(norms), rel=1e-12)
    assert result.nc2_equiangular == pytest.approx(np.std(cosines), rel=1e-9)
    assert result.nc2_max_angle == pytest.approx(np.mean(np.abs(np.add(cosines, 1 / (C - 1)))),
                                                 rel=1e-12)
    nc3 = np.sum((weights / np.linalg.norm(weights) - centred / np.linalg.norm(centred)) ** 2)
    assert result.nc3 == pytest.approx(nc3, rel=1e-12)
    assert result.nc4 == pytest.approx(4 / len(labels))
    assert result.nc1 > 0.05


# ---------------------------------------------------------------------------------- ranking


@pytest.mark.parametrize("seed", range(4))
def test_kendall_tau_equals_scipy_with_ties_and_nans(seed: int) -> None:
    generator = np.random.default_rng(seed)
    measure = generator.integers(0, 6, size=40).astype(float)  # many ties
    gap = measure + generator.integers(0, 4, size=40)
    measure[[3, 17]] = np.nan
    gap[25] = np.nan
    expected = scipy.stats.kendalltau(measure, gap, nan_policy="omit").statistic
    assert kendall_tau(measure, gap) == pytest.approx(expected, abs=1e-14)
    keep = ~(np.isnan(measure) | np.isnan(gap))
    x, y = measure[keep], gap[keep]
    pairs = list(itertools.combinations(range(len(x)), 2))
    tau_a = sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs) / len(pairs)
    assert kendall_tau(measure, gap, variant="a") == pytest.approx(tau_a, abs=1e-14)
    assert kendall_tau(measure, gap, variant="a") != pytest.approx(kendall_tau(measure, gap))


def test_kendall_tau_without_information_is_nan() -> None:
    assert math.isnan(kendall_tau([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    assert math.isnan(kendall_tau([1.0], [2.0]))


def _grid() -> dict[str, np.ndarray]:
    a, b = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
    return {"a": a.reshape(-1), "b": b.reshape(-1)}


def test_granulated_kendall_on_a_grid_with_a_known_answer() -> None:
    hp = _grid()
    gap = hp["a"] + 10.0 * hp["b"]
    result = granulated_kendall(hp["a"] - hp["b"], gap, hp)  # right in a, wrong in b
    assert result.per_hyperparameter == {"a": 1.0, "b": -1.0}
    assert result.psi == 0.0
    assert result.groups == {"a": 3, "b": 3}
    assert kendall_tau(hp["a"] - hp["b"], gap) < 0
    assert granulated_kendall(gap, gap, hp).psi == 1.0


def test_granulated_kendall_is_the_mean_of_per_group_scipy_taus() -> None:
    generator = np.random.default_rng(8)
    levels = np.array(list(itertools.product(range(3), range(2), range(4))))
    hp = {"depth": levels[:, 0], "lr": levels[:, 1] * 0.1, "width": 2 ** levels[:, 2]}
    measure, gap = generator.normal(size=len(levels)), generator.normal(size=len(levels))
    result = granulated_kendall(measure, gap, hp)
    for name in hp:
        others = [o for o in hp if o != name]
        keys = {tuple(hp[o][k] for o in others) for k in range(len(levels))}
        taus = []
        for key in keys:
            rows = [k for k in range(len(levels)) if tuple(hp[o][k] for o in others) == key]
            taus.append(scipy.stats.kendalltau(measure[rows], gap[rows]).statistic)
        assert result.per_hyperparameter[name] == pytest.approx(np.mean(taus), abs=1e-14)
    assert result.psi == pytest.approx(np.mean(list(result.per_hyperparameter.values())))


def test_normalized_cmi_of_hand_tables() -> None:
    identical = np.array([[[5, 0], [0, 5]]])  # V_μ = V_g: I = H(V_g) = 1 bit
    assert normalized_cmi(identical) == pytest.approx(1.0)
    independent = np.array([[[2, 2], [3, 3]]])
    assert normalized_cmi(independent) == pytest.approx(0.0, abs=1e-15)
    p = np.array([[0.4, 0.1], [0.2, 0.3]])  # one cell, I and H by the textbook formulas
    pg, pm = p.sum(axis=1), p.sum(axis=0)
    mutual = sum(p[i, j] * math.log2(p[i, j] / (pg[i] * pm[j]))
                 for i in range(2) for j in range(2))
    entropy = -sum(q * math.log2(q) for q in pg)
    assert normalized_cmi((p * 10)[None]) == pytest.approx(mutual / entropy, rel=1e-12)
    # cells weighted by their pair counts: (10 · 1 + 20 · 0)/(10 · 1 + 20 · 1) = 1/3 (an
    # unweighted mean of the cells, as the PGDL scorer takes, would give 1/2)
    assert normalized_cmi(np.array([[[5, 0], [0, 5]], [[4, 6], [4, 6]]])) == pytest.approx(1 / 3)


def test_conditional_mutual_information_removes_what_a_hyperparameter_explains() -> None:
    generator = np.random.default_rng(9)
    levels = np.array(list(itertools.product(range(3), range(3), range(2))))
    hp = {"a": levels[:, 0], "b": levels[:, 1], "c": levels[:, 2]}
    gap = hp["a"] + 0.5 * hp["b"] + 0.25 * hp["c"] + 0.01 * generator.normal(size=len(levels))
    perfect = conditional_mutual_information(gap, gap, hp)
    assert perfect.score == pytest.approx(1.0)
    only_a = conditional_mutual_information(hp["a"] + 0.0, gap, hp)
    assert only_a.score == pytest.approx(0.0, abs=1e-12)
    assert "a" in only_a.argmin
    assert only_a.per_set[()] > 0.2  # unconditionally, tracking a says a lot about the gap
    assert len(only_a.per_set) == 1 + 3 + 3
    noisy = conditional_mutual_information(gap + 0.5 * generator.normal(size=len(gap)), gap, hp)
    assert 0.0 <= noisy.score <= 1.0


# --------------------------------------------------------------------------------- registry


def test_every_measure_of_a_trained_mlp_is_a_number_or_nan_with_a_reason() -> None:
    model, init, X, y = _classifier()
    history = {"step": [0, 10, 20, 30], "train_loss": [1.1, 0.4, 0.09, 0.05]}
    settings = MeasureSettings(sigma_samples=3, sigma_depth=8, alpha_steps=3, alpha_depth=6)
    full = MeasureInputs(model, X, y, init_model=init, X_test=X[:10], y_test=y[:10],
                         loss_fn=cross_entropy, num_classes=3, history=history,
                         settings=settings)
    values = compute_measures(full)
    assert set(values) == set(MEASURES)
    # this MLP's layers have < 20 eigenvalues: too few for the power-law fit (test_heavy_tail)
    tails = {"alpha_mean", "alpha_weighted"}
    assert all("20 eigenvalues" in values[name].reason for name in tails)
    assert all(math.isfinite(v.value) and v.reason is None
               for name, v in values.items() if name not in tails), {
        name: v for name, v in values.items() if v.reason or not math.isfinite(v.value)}
    assert values["steps_to_loss"].value == 20.0
    assert all(m.sign in (-1, 1) and m.description for m in MEASURES.values())
    bare = compute_measures(MeasureInputs(model, X, y, settings=settings))
    for name in ("frobenius_distance", "spec_init", "pacbayes_init", "layer_rotation"):
        assert math.isnan(bare[name].value) and "initialisation" in bare[name].reason
    assert "history" in bare["steps_to_loss"].reason
    assert "test set" in bare["jacobian_norm"].reason
    assert "loss_fn" in bare["sharpness_flatness"].reason
    assert bare["param_norm"].value == values["param_norm"].value


def test_unsupported_inputs_give_nan_with_reasons() -> None:
    model, X, y, _ = _regression()
    values = compute_measures(MeasureInputs(model, X, y, loss_fn=mse),
                              ["inverse_margin", "nc1", "last_layer_id", "pacbayes_flatness"])
    assert "class labels" in values["inverse_margin"].reason
    assert "class labels" in values["nc1"].reason
    assert "sequential fully connected" in values["last_layer_id"].reason
    assert "class labels" in values["pacbayes_flatness"].reason
    never = MeasureInputs(model, X, y, history={"step": [0, 5], "train_loss": [1.0, 0.5]})
    assert "never reached" in compute_measure("steps_to_loss", never).reason
    with pytest.raises(ValueError, match="unknown measure"):
        compute_measure("vc_dimension", never)


def test_precomputed_values_are_read_and_curvature_is_computed_otherwise() -> None:
    model, X, y, A = _regression()
    given = MeasureInputs(model, X, y, precomputed={"lambda_max": 7.0, "trace": 9.0,
                                                    "last_layer_id": 2.5})
    assert [compute_measure(n, given).value for n in ("lambda_max", "hessian_trace",
                                                      "last_layer_id")] == [7.0, 9.0, 2.5]
    computed = MeasureInputs(model, X, y, loss_fn=mse)
    assert compute_measure("lambda_max", computed).value == pytest.approx(
        float(torch.linalg.eigvalsh(A).max()), rel=1e-8)
    assert compute_measure("hessian_trace", computed).value == pytest.approx(
        float(torch.trace(A)), rel=1e-8)  # Hutch++ is exact for P = 5 ≤ its sketch


def test_jacobian_norm_of_a_linear_map_and_of_an_mlp() -> None:
    linear = nn.Linear(4, 3)
    X = torch.randn(6, 4, generator=torch.Generator().manual_seed(10))
    inputs = MeasureInputs(linear, X, torch.zeros(6, dtype=torch.long), X_test=X)
    assert compute_measure("jacobian_norm", inputs).value == pytest.approx(
        float(torch.linalg.matrix_norm(linear.weight.detach().double())), rel=1e-12)
    mlp = _mlp((5,), "tanh", seed=11, input_dim=4)
    expected = np.mean([float(torch.autograd.functional.jacobian(
        lambda x: mlp.double()(x), x.double()).norm()) for x in X])
    inputs = MeasureInputs(mlp, X, torch.zeros(6, dtype=torch.long), X_test=X)
    assert compute_measure("jacobian_norm", inputs).value == pytest.approx(expected, rel=1e-10)


def test_last_layer_id_and_collapse_read_the_last_hidden_layer() -> None:
    model, _, X, y = _classifier()
    inputs = MeasureInputs(model, X, y)
    with torch.no_grad():
        hidden = model.net[:-1](X)  # the last activation's output
    head = model.net[-1]
    expected = neural_collapse(hidden, y, head.weight, head.bias)
    assert compute_measure("nc1", inputs).value == pytest.approx(expected.nc1, rel=1e-6)
    assert compute_measure("nc3", inputs).value == pytest.approx(expected.nc3, rel=1e-6)
    assert compute_measure("nc4", inputs).value == pytest.approx(expected.nc4)
