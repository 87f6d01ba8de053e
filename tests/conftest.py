import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def cuda_gpu():
    """The GpuFacts of CUDA device 0. Skips where this machine has no GPU; fails where `nvidia-smi` lists
    one but detection does not find it (a broken binding must not turn GPU tests into skips)."""
    from tilewright.errors import TilewrightError
    from tilewright.targets.gpu import detect_cuda, nvidia_gpus_listed

    try:
        facts, why = detect_cuda(), "cuda-bindings, the driver or the GPU is missing"
    except TilewrightError as exc:
        facts, why = None, str(exc)
    if facts is None:
        listed = nvidia_gpus_listed()
        if listed:
            pytest.fail(f"nvidia-smi lists {listed[0]!r} but tilewright cannot use it: {why}")
        pytest.skip(f"no CUDA device ({why})")
    return facts
