"""Reinforcement learning: the MiniGo / AlphaGo Zero policy-value residual network (training step
only, on synthetic positions; self-play and evaluation are not part of the workload)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tracekit.workloads.base import Task
from tracekit.workloads.resnet import conv_bn


class ResBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.body = nn.Sequential(conv_bn(c, c), conv_bn(c, c, relu=False))

    def forward(self, x):
        return F.relu(x + self.body(x))


class PolicyValueNet(nn.Module):
    def __init__(self, s: dict):
        super().__init__()
        n, c = s["board"], s["filters"]
        self.trunk = nn.Sequential(conv_bn(s["planes"], c), *[ResBlock(c) for _ in range(s["blocks"])])
        self.policy = nn.Sequential(conv_bn(c, 2, 1), nn.Flatten(), nn.Linear(2 * n * n, n * n + 1))
        self.value = nn.Sequential(conv_bn(c, 1, 1), nn.Flatten(), nn.Linear(n * n, s["value_fc"]),
                                   nn.ReLU(inplace=True), nn.Linear(s["value_fc"], 1), nn.Tanh())

    def forward(self, x):
        h = self.trunk(x)
        return self.policy(h), self.value(h).squeeze(-1)


def build_minigo(s: dict, batch_size: int, device) -> Task:
    n = s["board"]

    def make_batch(gen):
        planes = (torch.rand(batch_size, s["planes"], n, n, generator=gen, device=device) < 0.3).float()
        # Search probabilities (a distribution over moves + pass) and game outcomes (+1 / -1).
        pi = torch.softmax(torch.randn(batch_size, n * n + 1, generator=gen, device=device) * 3, -1)
        z = torch.randint(0, 2, (batch_size,), generator=gen, device=device).float() * 2 - 1
        return planes, pi, z

    def loss(m, batch):
        planes, pi, z = batch
        logits, value = m(planes)
        policy_loss = -(pi * torch.log_softmax(logits.float(), -1)).sum(-1).mean()
        return policy_loss + F.mse_loss(value.float(), z)

    return Task(model=PolicyValueNet(s), make_batch=make_batch, loss=loss,
                optimizer=lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, weight_decay=1e-4),
                convolutional=True)
