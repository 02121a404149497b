import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    """
    Multi-head causal self-attention written out by hand: one Linear makes q, k and v, every
    position attends to itself and the positions before it, and a Linear projects the heads back.
    """

    def __init__(self, n_embd, n_head):
        """
        :param n_embd: The embedding width
        :param n_head: The number of attention heads (n_embd must be a multiple of it)
        """
        super(CausalSelfAttention, self).__init__()
        assert n_embd % n_head == 0
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head

    def forward(self, x):
        """
        :param x: The input tensor, shape (batch_size, seq_len, n_embd)
        :return: The output tensor, shape (batch_size, seq_len, n_embd)
        """
        B, T, C = x.size()
        hs = C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
        att = att.masked_fill(future, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Model(nn.Module):
    """
    A pre-LayerNorm GPT transformer block without dropout:
    x = x + attn(ln1(x)); x = x + fc2(gelu(fc1(ln2(x)))).
    """

    def __init__(self, n_embd, n_head):
        """
        :param n_embd: The embedding width
        :param n_head: The number of attention heads
        """
        super(Model, self).__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln2 = nn.LayerNorm(n_embd)
        self.fc1 = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.fc2 = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        """
        :param x: The input tensor, shape (batch_size, seq_len, n_embd)
        :return: The output tensor, shape (batch_size, seq_len, n_embd)
        """
        x = x + self.attn(self.ln1(x))
        x = x + self.fc2(self.gelu(self.fc1(self.ln2(x))))
        return x


batch_size = 4
seq_len = 64
n_embd = 128
n_head = 4


def get_inputs():
    return [torch.randn(batch_size, seq_len, n_embd)]


def get_init_inputs():
    return [n_embd, n_head]
