"""A small decoder-only transformer that classifies the token after a sequence.

Built for algorithmic tasks such as modular arithmetic, ``a ∘ b =`` -> ``c``: the dataset stores
the token ids as float32 rows of ``x`` (shape ``(n, T)``) and the answer as the label, so the
model maps ``(B, T)`` to ``(B, output_dim)`` logits read off the last position and trains in the
same loop as the MLP. Structure follows nanoGPT: learned positional embeddings, pre-LN blocks of
causal self-attention and an MLP, a final LayerNorm and a linear head. There is no dropout: the
curvature analyses need eval-mode outputs that depend on the parameters alone.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch._C._functorch import is_functorch_wrapped_tensor
from torch.nn import functional as F

from genlab.models.mlp import ACTIVATIONS
from genlab.settings import TransformerSettings


def _norm(settings: TransformerSettings) -> nn.Module:
    if settings.layer_norm:
        return nn.LayerNorm(settings.d_model, bias=settings.bias)
    return nn.Identity()


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees only positions <= t."""

    def __init__(self, settings: TransformerSettings) -> None:
        super().__init__()
        d = settings.d_model
        self.n_heads = settings.n_heads
        self.qkv = nn.Linear(d, 3 * d, bias=settings.bias)  # the three projections in one matmul
        self.proj = nn.Linear(d, d, bias=settings.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, T, C)
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, C/H)
        k = k.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, C/H)
        v = v.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, C/H)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, C/H)
        y = y.transpose(1, 2).reshape(B, T, C)  # heads side by side again
        return self.proj(y)


class FeedForward(nn.Module):
    def __init__(self, settings: TransformerSettings) -> None:
        super().__init__()
        self.fc = nn.Linear(settings.d_model, settings.d_mlp, bias=settings.bias)
        self.act = ACTIVATIONS[settings.activation]()
        self.proj = nn.Linear(settings.d_mlp, settings.d_model, bias=settings.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, T, C)
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """Pre-LN residual block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, settings: TransformerSettings) -> None:
        super().__init__()
        self.ln1 = _norm(settings)
        self.attn = CausalSelfAttention(settings)
        self.ln2 = _norm(settings)
        self.mlp = FeedForward(settings)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, T, C)
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    """Causal transformer classifying from the last position.

    Args:
        settings: The architecture.
        input_dim: The sequence length T of the dataset; must be at most ``settings.max_len``.
        output_dim: Number of logits (classes, e.g. the modulus for modular arithmetic).

    Raises:
        ValueError: If ``input_dim`` exceeds ``settings.max_len``.
    """

    def __init__(self, settings: TransformerSettings, input_dim: int, output_dim: int) -> None:
        super().__init__()
        if not 1 <= input_dim <= settings.max_len:
            raise ValueError(f"sequence length (input_dim) {input_dim} must be in "
                             f"[1, max_len={settings.max_len}]")
        self.vocab_size = settings.vocab_size
        self.max_len = settings.max_len
        self.tok_emb = nn.Embedding(settings.vocab_size, settings.d_model)
        self.pos_emb = nn.Embedding(settings.max_len, settings.d_model)
        self.blocks = nn.ModuleList(Block(settings) for _ in range(settings.n_layers))
        self.ln_f = _norm(settings)
        self.head = nn.Linear(settings.d_model, output_dim, bias=settings.bias)
        self._init_weights(settings.n_layers)

    def _init_weights(self, n_layers: int) -> None:
        # GPT-2 / nanoGPT: N(0, 0.02) weights, zero biases (LayerNorm keeps its ones and zeros);
        # the two projections writing into the residual stream get 1/sqrt(2 * n_layers) of that,
        # so the stream's variance at init does not grow with depth.
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for block in self.blocks:
            for proj in (block.attn.proj, block.mlp.proj):
                nn.init.normal_(proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * n_layers))

    def token_ids(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids as int64, checking they are whole numbers in ``[0, vocab_size)``.

        Raises:
            ValueError: On a wrong shape, a fractional id or one out of range.
        """
        if x.ndim != 2:
            raise ValueError(f"expected token ids of shape (B, T), got {tuple(x.shape)}")
        if x.shape[1] > self.max_len:
            raise ValueError(f"sequence length {x.shape[1]} exceeds max_len={self.max_len}")
        ids = x.long()
        # Inside torch.func transforms (vmap over the batch, grad) the values cannot steer Python
        # control flow; callers there pass data validated outside, and the check is skipped.
        if not is_functorch_wrapped_tensor(x):
            if x.is_floating_point() and not torch.equal(ids.to(x.dtype), x):
                raise ValueError("token ids must be whole numbers")
            if ids.numel() and (ids.min() < 0 or ids.max() >= self.vocab_size):
                raise ValueError(f"token ids must lie in [0, {self.vocab_size}), got "
                                 f"[{ids.min().item()}, {ids.max().item()}]")
        return ids

    def hidden_states(self, x: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, C)
        """The final residual stream (after the last LayerNorm) at every position."""
        ids = self.token_ids(x)  # (B, T)
        pos = torch.arange(ids.shape[1], device=ids.device)  # (T,)
        h = self.tok_emb(ids) + self.pos_emb(pos)  # (B, T, C) + (T, C)
        for block in self.blocks:
            h = block(h)
        return self.ln_f(h)

    def all_logits(self, x: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, output_dim)
        """The head applied at every position; position t depends on tokens 0..t only."""
        return self.head(self.hidden_states(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, output_dim)
        # only the last position predicts the answer, so apply the head there alone
        return self.head(self.hidden_states(x)[:, -1, :])
