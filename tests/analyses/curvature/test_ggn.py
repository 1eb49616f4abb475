"""The Jacobian-based GGN against curvlinops' GGN operator, the reference."""

from __future__ import annotations

import pytest
import torch
from curvlinops import GGNLinearOperator
from influence_support import BCE, CE, D, logistic, mlp

from genlab.analyses.curvature.ggn import GaussNewton
from genlab.analyses.curvature.hessian import MeanLoss
from genlab.analyses.influence.exact import curvature_matrix


@pytest.mark.parametrize("batch_size", [None, 7])
def test_the_jacobian_ggn_is_curvlinops_ggn(batch_size) -> None:
    """The GGN built from per-chunk Jacobians and output Hessians equals curvlinops' GGN on the
    MLP with cross entropy (C = 3) and on logistic regression (one logit), products and dense."""
    for p, loss_fn in ((mlp(), CE), (logistic(), BCE)):
        params = [q for q in p.model.parameters() if q.requires_grad]
        reference = GGNLinearOperator(p.model, MeanLoss(loss_fn), params, [(p.X, p.y)],
                                      num_data=len(p.X), check_deterministic=False)
        dense = reference @ torch.eye(sum(q.numel() for q in params), dtype=D)
        ours = GaussNewton(p.model, loss_fn, p.X, p.y, batch_size)
        torch.testing.assert_close(ours.dense(), 0.5 * (dense + dense.T), rtol=1e-11,
                                   atol=1e-13)
        torch.testing.assert_close(curvature_matrix(p.model, loss_fn, p.X, p.y, "ggn",
                                                    batch_size=batch_size), ours.dense())
        M = torch.randn(dense.shape[0], 3, generator=torch.Generator().manual_seed(0), dtype=D)
        torch.testing.assert_close(ours @ M, dense @ M, rtol=1e-11, atol=1e-13)
        torch.testing.assert_close(ours @ M[:, 0], dense @ M[:, 0], rtol=1e-11, atol=1e-13)
