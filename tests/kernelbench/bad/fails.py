# A model whose forward fails: its Linear expects 16 features, get_inputs gives 8.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(2, 8)]


def get_init_inputs():
    return []
