"""Model averaging (torch.distributed.algorithms.model_averaging): ranks that train their own
copies (local SGD) average their parameters every few steps."""

from . import averagers, utils

__all__ = ["averagers", "utils"]
