"""One BERT-base encoder layer (post-norm, as in Devlin et al.): multi-head
self-attention written out with nn.Linear, view/permute, matmul and softmax,
then residual + LayerNorm, a GELU feed-forward, residual + LayerNorm. No
attention mask, no dropout (eval). Input [N, seq, hidden]."""

from __future__ import annotations

import math

from .seeded_weights import init_weights


def bert_layer(hidden=768, heads=12, ffn=3072, eps=1e-12, seed=0):
    """A BERT encoder layer; input [N, seq, hidden] (BERT-base: seq 128, hidden 768)."""
    import torch
    from torch import nn

    from ..errors import ShapeError

    if hidden % heads:
        raise ShapeError(f"bert_layer: hidden {hidden} is not a multiple of heads {heads}")

    class EncoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
            self.attn_out = nn.Linear(hidden, hidden)
            self.attn_norm = nn.LayerNorm(hidden, eps=eps)
            self.ffn_in = nn.Linear(hidden, ffn)
            self.ffn_out = nn.Linear(ffn, hidden)
            self.out_norm = nn.LayerNorm(hidden, eps=eps)
            self.head_dim = hidden // heads
            self.num_heads, self.hidden_size = heads, hidden  # read by ONNX Runtime's BERT optimizer baseline

        def _heads(self, t):
            n, s, _ = t.shape
            return t.view(n, s, heads, self.head_dim).permute(0, 2, 1, 3)

        def forward(self, x):
            n, s, _ = x.shape
            q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
            ctx = ctx.permute(0, 2, 1, 3).reshape(n, s, hidden)
            x = self.attn_norm(x + self.attn_out(ctx))
            return self.out_norm(x + self.ffn_out(nn.functional.gelu(self.ffn_in(x))))

    return init_weights(EncoderLayer(), seed)
