# expect: triton-kernel
import torch


def softmax(x):
    y = torch.empty_like(x)
    return y
