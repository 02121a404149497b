# A KernelBench-format program with more params than inputs and outputs together could ever
# need (80: forty layers' weights and biases), as KernelBench's level-3 networks have (ResNet101:
# 626), for the harness's own tests: x <- x + tanh(W_i x + b_i), forty times. In a folder of its
# own: tests/host/test_kb_folder imports every program directly under tests/kernelbench/.
import torch
import torch.nn as nn


class Model(nn.Module):
    """Forty residual tanh layers of one width."""

    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = x + torch.tanh(layer(x))
        return x


batch_size = 8
width = 16
depth = 40


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return [width, depth]
