import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A small CNN classifier: two Conv2d -> BatchNorm2d -> ReLU stages, the first followed by a
    2x2 max pool and the second by global average pooling, then a Linear classifier.
    """

    def __init__(self, num_classes):
        """
        :param num_classes: The number of output classes
        """
        super(Model, self).__init__()
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.pool = nn.MaxPool2d(kernel_size=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        """
        :param x: The input tensor, shape (batch_size, 3, height, width)
        :return: The output tensor, shape (batch_size, num_classes)
        """
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)
        return x


batch_size = 8
num_classes = 10
height = 32
width = 32


def get_inputs():
    return [torch.randn(batch_size, 3, height, width)]


def get_init_inputs():
    return [num_classes]
