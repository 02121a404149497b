# A degenerate program (tests of the import's tolerance audit): clamping to at most -1 after a
# ReLU makes every output -1 whatever the input, so no tolerance can reject a constant answer.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(torch.relu(x), max=-1.0)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
