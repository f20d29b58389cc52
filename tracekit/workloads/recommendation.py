"""Recommendation: NCF (NeuMF) and a DLRM-style model (embeddings, bottom/top MLP, dot interaction)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tracekit.workloads.base import Task


def mlp(sizes: list[int], last_relu: bool = True) -> nn.Sequential:
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class NeuMF(nn.Module):
    """NeuMF (He et al. 2017), the MLPerf NCF model: GMF and MLP towers, fused by a linear layer."""

    def __init__(self, s: dict):
        super().__init__()
        self.mf_user = nn.Embedding(s["users"], s["mf_dim"])
        self.mf_item = nn.Embedding(s["items"], s["mf_dim"])
        half = s["mlp"][0] // 2
        self.mlp_user = nn.Embedding(s["users"], half)
        self.mlp_item = nn.Embedding(s["items"], half)
        for e in (self.mf_user, self.mf_item, self.mlp_user, self.mlp_item):
            nn.init.normal_(e.weight, std=0.01)
        self.mlp = mlp(s["mlp"])
        self.out = nn.Linear(s["mf_dim"] + s["mlp"][-1], 1)

    def forward(self, user, item):
        gmf = self.mf_user(user) * self.mf_item(item)
        deep = self.mlp(torch.cat([self.mlp_user(user), self.mlp_item(item)], -1))
        return self.out(torch.cat([gmf, deep], -1)).squeeze(-1)


def build_ncf(s: dict, batch_size: int, device) -> Task:
    def make_batch(gen):
        user = torch.randint(0, s["users"], (batch_size,), generator=gen, device=device)
        item = torch.randint(0, s["items"], (batch_size,), generator=gen, device=device)
        # One positive per four sampled negatives, as in the reference's training set.
        label = (torch.rand(batch_size, generator=gen, device=device) < 0.2).float()
        return user, item, label

    def loss(m, batch):
        user, item, label = batch
        return F.binary_cross_entropy_with_logits(m(user, item).float(), label)

    return Task(model=NeuMF(s), make_batch=make_batch, loss=loss,
                optimizer=lambda p: torch.optim.Adam(p, lr=4.5e-3, betas=(0.25, 0.5)))


class DLRM(nn.Module):
    """DLRM (Naumov et al. 2019): a bottom MLP over dense features, one embedding per categorical
    feature, pairwise dot products of all those vectors, and a top MLP to one logit."""

    def __init__(self, s: dict):
        super().__init__()
        d = s["embedding_dim"]
        self.tables = nn.ModuleList(nn.Embedding(n, d) for n in s["tables"])
        for t in self.tables:
            nn.init.uniform_(t.weight, -(t.num_embeddings ** -0.5), t.num_embeddings ** -0.5)
        self.bottom = mlp([s["dense"]] + s["bottom_mlp"])
        f = len(s["tables"]) + 1
        self.register_buffer("triu", torch.triu_indices(f, f, 1), persistent=False)
        self.top = mlp([d + f * (f - 1) // 2] + s["top_mlp"], last_relu=False)

    def forward(self, dense, sparse):
        x = self.bottom(dense)  # [B, d]
        vecs = torch.stack([x] + [t(sparse[:, i]) for i, t in enumerate(self.tables)], 1)  # [B, F, d]
        inter = vecs @ vecs.transpose(1, 2)
        return self.top(torch.cat([x, inter[:, self.triu[0], self.triu[1]]], 1)).squeeze(-1)


def build_dlrm(s: dict, batch_size: int, device) -> Task:
    sizes = torch.tensor(s["tables"], device=device)

    def make_batch(gen):
        dense = torch.rand(batch_size, s["dense"], generator=gen, device=device)
        u = torch.rand(batch_size, len(s["tables"]), generator=gen, device=device)
        sparse = (u * sizes).long().clamp(max=sizes - 1)
        label = (torch.rand(batch_size, generator=gen, device=device) < 0.25).float()
        return dense, sparse, label

    def loss(m, batch):
        dense, sparse, label = batch
        return F.binary_cross_entropy_with_logits(m(dense, sparse).float(), label)

    return Task(model=DLRM(s), make_batch=make_batch, loss=loss,
                optimizer=lambda p: torch.optim.SGD(p, lr=1.0))
