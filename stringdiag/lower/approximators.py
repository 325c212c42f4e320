"""What a learnable box becomes: a policy from (inputs, outputs) feature counts to a module.

``linear`` is the engineer's reading of Q, K, V matrices; ``mlp`` (one hidden layer as
wide as its input, App. C) is the paper's universal approximator and the default. A
user may pass any callable ``factory(in_features, out_features) -> nn.Module``.
"""
from __future__ import annotations

from typing import Callable, Union

import torch
from torch import nn

from ..errors import DiagError

Factory = Callable[[int, int], nn.Module]
Policy = Union[str, Factory]


def linear(n_in: int, n_out: int) -> nn.Module:
    return nn.Linear(n_in, n_out)


def mlp(n_in: int, n_out: int) -> nn.Module:
    return nn.Sequential(nn.Linear(n_in, n_in), nn.ReLU(), nn.Linear(n_in, n_out))


POLICIES: dict[str, Factory] = {"linear": linear, "mlp": mlp}


def factory(policy: Policy) -> Factory:
    if callable(policy):
        return policy
    if policy not in POLICIES:
        raise DiagError(f"unknown approximator '{policy}': use one of {', '.join(POLICIES)} or a callable")
    return POLICIES[policy]


class LearnableTensor(nn.Module):
    """A learnable box with no inputs: a tensor of parameters (an embedding matrix, say)."""

    def __init__(self, shape: tuple[int, ...], init: str = "normal"):
        super().__init__()
        if init == "ones":
            data = torch.ones(shape)
        elif init == "zeros":
            data = torch.zeros(shape)
        else:
            data = torch.randn(shape) * (1.0 / max(shape[-1], 1) ** 0.5 if shape else 1.0)
        self.weight = nn.Parameter(data)

    def forward(self) -> torch.Tensor:
        return self.weight[None]
