import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A one-layer LSTM over a batch of sequences, followed by a Linear layer on the hidden state of
    the last time step.
    """

    def __init__(self, input_size, hidden_size, num_layers, output_size):
        """
        :param input_size: The number of features of each time step
        :param hidden_size: The width of the LSTM's hidden state
        :param num_layers: The number of stacked LSTM layers
        :param output_size: The number of output features
        """
        super(Model, self).__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        """
        :param x: The input tensor, shape (batch_size, seq_len, input_size)
        :return: The output tensor, shape (batch_size, output_size)
        """
        out, _ = self.lstm(x)  # h0 and c0 default to zeros
        return self.fc(out[:, -1, :])


batch_size = 8
seq_len = 32
input_size = 64
hidden_size = 128
num_layers = 1
output_size = 16


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, output_size]
