"""Exploring a schedule space (FlexTensor 5.1): random sampling, the P-method
and the Q-method (simulated-annealing start points + a NumPy Q-network).
Strategies only propose and observe; measuring and recording live above.
Imports `space`. Public names: RandomSearch, PMethod, QMethod, make_strategy."""

from .pmethod import PMethod
from .qmethod import QMethod
from .random_search import RandomSearch
from .strategy import SearchStrategy

METHODS = {"random": RandomSearch, "p": PMethod, "q": QMethod}


def make_strategy(method: str, space, seed: int = 0) -> SearchStrategy:
    if method not in METHODS:
        from ..errors import TilewrightError

        raise TilewrightError(f"unknown search method {method!r}; valid: {', '.join(METHODS)}")
    return METHODS[method](space, seed=seed)


__all__ = ["METHODS", "PMethod", "QMethod", "RandomSearch", "SearchStrategy", "make_strategy"]
