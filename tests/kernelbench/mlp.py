import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A two-layer MLP: Linear -> GELU -> Linear -> ReLU.
    """

    def __init__(self, input_size, hidden_size, output_size):
        """
        :param input_size: The number of input features
        :param hidden_size: The width of the hidden layer
        :param output_size: The number of output features
        """
        super(Model, self).__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.gelu = nn.GELU()
        self.fc2 = nn.Linear(hidden_size, output_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        """
        :param x: The input tensor, shape (batch_size, input_size)
        :return: The output tensor, shape (batch_size, output_size)
        """
        x = self.gelu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return x


batch_size = 64
input_size = 512
hidden_size = 1024
output_size = 256


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
