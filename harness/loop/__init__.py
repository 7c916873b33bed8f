"""The shared loop: `train(cfg)` (train.py, the story) and its stages, one module each."""

from .finite import Diverged
from .train import step_seed, train

__all__ = ["Diverged", "step_seed", "train"]
