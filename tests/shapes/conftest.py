import pytest
import torch

import stenograph
from stenograph.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    stenograph.reset()
    torch.manual_seed(0)
    yield
    stenograph.reset()


@pytest.fixture
def cnt():
    return CompileCounter()
