# Inputs no machine holds (4 TiB of floats): refused with the numbers, not a traceback.
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.rand(1 << 20, 1 << 20)]
def get_init_inputs():
    return []
