"""Model averaging (torch.distributed.algorithms.model_averaging): ranks that train their own
copies (local SGD) average their parameters every few steps."""

from . import averagers, hierarchical_model_averager, utils

__all__ = ["averagers", "hierarchical_model_averager", "utils"]
