# Not a KernelBench program: it has inputs but no Model.
import torch


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
