"""What a workload builder returns: the model, its synthetic data and its loss."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Task:
    """One built workload, ready for the training loop in :mod:`tracekit.workloads.loop`.

    - ``model``: the ``torch.nn.Module`` that is trained (wrapped in DDP by the loop).
    - ``make_batch(gen)``: one synthetic batch (tuple of tensors) generated on the model's device
      with the ``torch.Generator`` ``gen`` (seeded per rank: deterministic).
    - ``loss(model, batch)``: the forward pass and the loss (a scalar tensor).
    - ``optimizer(params)``: the optimizer the reference implementation uses (same family).
    - ``convolutional``: True when ``--channels-last`` changes the memory layout.
    - ``ddp_kwargs``: extra DistributedDataParallel arguments (e.g. bucket size).
    """

    model: Any
    make_batch: Callable[[Any], tuple]
    loss: Callable[[Any, tuple], Any]
    optimizer: Callable[[Any], Any]
    convolutional: bool = False
    ddp_kwargs: dict = field(default_factory=dict)
