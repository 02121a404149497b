# Dropout in train mode (KernelBench runs models as constructed): not deterministic.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.fc(x))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
