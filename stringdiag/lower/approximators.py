"""What a learnable box becomes: a policy from (inputs, outputs) feature counts to a module.

``linear`` is the engineer's reading of Q, K, V matrices; ``mlp`` (one hidden layer as
wide as its input, App. C) is the paper's universal approximator and the default. A
user may pass any callable ``factory(in_features, out_features) -> nn.Module``. A box whose
declaration says ``via linear(bias = false)`` (or ``via mlp(hidden = 64)``) is built by that
instead, whatever the policy.
"""
from __future__ import annotations

from typing import Callable, Union

import torch
from torch import nn

from ..errors import DiagError
from ..graph.decls import Approximator

Factory = Callable[[int, int], nn.Module]
Policy = Union[str, Factory]


def linear(n_in: int, n_out: int, bias: bool = True) -> nn.Module:
    return nn.Linear(n_in, n_out, bias=bias)


def mlp(n_in: int, n_out: int, hidden: int | None = None, bias: bool = True) -> nn.Module:
    h = hidden or n_in
    return nn.Sequential(nn.Linear(n_in, h, bias=bias), nn.ReLU(), nn.Linear(h, n_out, bias=bias))


POLICIES: dict[str, Factory] = {"linear": linear, "mlp": mlp}


def factory(policy: Policy) -> Factory:
    if callable(policy):
        return policy
    if policy not in POLICIES:
        raise DiagError(f"unknown approximator '{policy}': use one of {', '.join(POLICIES)} or a callable")
    return POLICIES[policy]


def per_box(via: Approximator | None, default: Factory) -> Factory:
    """The factory of one learnable box: its ``via`` clause if the file gives one, else the
    policy the compiler was given."""
    if via is None:
        return default
    if via.policy == "linear":
        return lambda i, o: linear(i, o, bias=via.bias)
    return lambda i, o: mlp(i, o, hidden=via.hidden, bias=via.bias)


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
