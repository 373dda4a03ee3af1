import pytest
import torch

torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


#: A small encoder configuration that keeps unit tests fast.
TINY = dict(emb_dim=32, depth=1, n_heads=4, ff_dim=32)
