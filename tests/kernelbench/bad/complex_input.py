# Complex tensors have no stitch dtype.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.abs()


def get_inputs():
    return [torch.randn(4, 4, dtype=torch.complex64)]


def get_init_inputs():
    return []
