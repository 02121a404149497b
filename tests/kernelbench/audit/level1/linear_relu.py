# The smallest KernelBench-format program, for the harness's own tests: Linear then ReLU.
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x @ W^T + b)"""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))


batch_size = 16
in_features = 32
out_features = 8


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
