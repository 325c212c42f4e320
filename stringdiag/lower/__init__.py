"""Lowering: typed graph to trainable PyTorch modules."""
from .lower import compile

__all__ = ["compile"]
