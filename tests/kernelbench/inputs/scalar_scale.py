# A KernelBench-format program whose forward() takes a Python number (as level1/5's matrix-scalar
# product does): the import passes it as a one-element tensor, constant across timed calls.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, scale):
        return torch.tanh(x) * scale


def get_inputs():
    return [torch.randn(16, 32), 2.5]


def get_init_inputs():
    return []
