"""Shared fixtures: small Tag configurations and a device list that includes the GPU only when there is one."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch

# Keep generated kernels of the test run out of the user's cache, but share them between test processes.
os.environ.setdefault("GPU_VECENV_CACHE_DIR", os.path.join(tempfile.gettempdir(), "gpu_vecenv_test_cache"))

HAS_GPU = torch.cuda.is_available()

SMALL_TAG = dict(num_taggers=2, num_runners=5, num_other_agents_observed=3, episode_length=15,
                 grid_length=5.0, tagging_distance=0.1)  # fmt: skip


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip_gpu)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request):
    """Every test taking ``device`` runs on the CPU backend, and on the GPU when there is one."""
    return request.param
