"""Language: BERT pre-training (masked-LM and next-sentence heads over a post-norm encoder)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tracekit.workloads.base import Task


class Bert(nn.Module):
    def __init__(self, s: dict):
        super().__init__()
        h = s["hidden"]
        self.tok = nn.Embedding(s["vocab"], h)
        self.pos = nn.Embedding(s["seq"], h)
        self.seg = nn.Embedding(2, h)
        self.norm = nn.LayerNorm(h, eps=1e-12)
        layer = nn.TransformerEncoderLayer(h, s["heads"], s["ffn"], dropout=0.1, activation="gelu",
                                           batch_first=True, layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, s["layers"], enable_nested_tensor=False)
        self.mlm_transform = nn.Sequential(nn.Linear(h, h), nn.GELU(), nn.LayerNorm(h, eps=1e-12))
        self.mlm_bias = nn.Parameter(torch.zeros(s["vocab"]))
        self.pooler = nn.Sequential(nn.Linear(h, h), nn.Tanh())
        self.nsp = nn.Linear(h, 2)
        for e in (self.tok, self.pos, self.seg):
            nn.init.normal_(e.weight, std=0.02)

    def forward(self, tokens, segments, positions):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = F.dropout(self.norm(self.tok(tokens) + self.pos(pos) + self.seg(segments)), 0.1, self.training)
        x = self.encoder(x)
        # MLM head only on the masked positions (as the reference does), decoder tied to embeddings.
        picked = torch.gather(x, 1, positions[..., None].expand(-1, -1, x.shape[-1]))
        mlm = self.mlm_transform(picked) @ self.tok.weight.t() + self.mlm_bias
        return mlm, self.nsp(self.pooler(x[:, 0]))


def build_bert(s: dict, batch_size: int, device) -> Task:
    def make_batch(gen):
        def ints(hi, *shape):
            return torch.randint(0, hi, shape, generator=gen, device=device)

        tokens = ints(s["vocab"], batch_size, s["seq"])
        segments = (torch.arange(s["seq"], device=device) >= s["seq"] // 2).long().expand(batch_size, -1)
        positions = torch.rand(batch_size, s["seq"], generator=gen, device=device).argsort(1)[:, : s["predictions"]]
        labels = ints(s["vocab"], batch_size, s["predictions"])
        next_sentence = ints(2, batch_size)
        return tokens, segments, positions, labels, next_sentence

    def loss(m, batch):
        tokens, segments, positions, labels, next_sentence = batch
        mlm, nsp = m(tokens, segments, positions)
        return (F.cross_entropy(mlm.float().flatten(0, 1), labels.flatten())
                + F.cross_entropy(nsp.float(), next_sentence))

    return Task(model=Bert(s), make_batch=make_batch, loss=loss,
                optimizer=lambda p: torch.optim.AdamW(p, lr=4e-4, weight_decay=0.01))
