"""DeepBench-style kernels as one-layer training steps: GEMM, convolution, LSTM, all-reduce.

Each is a real forward + backward + optimizer step, so its kernels appear in the same phases as
the full models': GEMM computes C = A W (forward) and dW = A^T dC (backward); the convolution and
the LSTM layer are cuDNN calls on a GPU; all-reduce trains one flat parameter whose gradient DDP
reduces in a single bucket (communication only exists with more than one rank).
"""

from __future__ import annotations

import torch
from torch import nn

from tracekit.workloads.base import Task


def _sgd(p):
    return torch.optim.SGD(p, lr=1e-3)


class Gemm(nn.Module):
    def __init__(self, s: dict):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(s["k"], s["n"]) / s["k"] ** 0.5)

    def forward(self, a):
        return a @ self.weight


def build_gemm(s: dict, batch_size: int, device) -> Task:
    # The batch size is M, the rows of A.
    def make_batch(gen):
        return (torch.randn(batch_size, s["k"], generator=gen, device=device),)

    return Task(model=Gemm(s), make_batch=make_batch,
                loss=lambda m, b: m(b[0]).float().pow(2).mean(), optimizer=_sgd)


def build_conv(s: dict, batch_size: int, device) -> Task:
    model = nn.Conv2d(s["c"], s["k"], s["r"], stride=s["stride"], padding=s["pad"], bias=False)

    def make_batch(gen):
        return (torch.randn(batch_size, s["c"], s["h"], s["w"], generator=gen, device=device),)

    return Task(model=model, make_batch=make_batch,
                loss=lambda m, b: m(b[0]).float().pow(2).mean(), optimizer=_sgd, convolutional=True)


def build_rnn(s: dict, batch_size: int, device) -> Task:
    model = nn.LSTM(s["input"], s["hidden"], batch_first=False)

    def make_batch(gen):
        return (torch.randn(s["seq"], batch_size, s["input"], generator=gen, device=device),)

    return Task(model=model, make_batch=make_batch,
                loss=lambda m, b: m(b[0])[0].float().pow(2).mean(), optimizer=_sgd)


class Flat(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        return (self.weight * x).sum()


def build_allreduce(s: dict, batch_size: int, device) -> Task:
    n = s["elements"]

    def make_batch(gen):
        # Gradient of the loss below is x: the all-reduced buffer holds n float32 values.
        return (torch.randn(n, generator=gen, device=device) / n,)

    return Task(model=Flat(n), make_batch=make_batch, loss=lambda m, b: m(b[0]).float(),
                optimizer=_sgd, ddp_kwargs={"bucket_cap_mb": n * 4 / 2**20 + 1})
