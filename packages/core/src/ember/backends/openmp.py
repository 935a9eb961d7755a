"""ember.backends.openmp: OpenMP (ember runs its own thread pool; see ember.set_num_threads), which ember does not use.

>>> import ember
>>> ember.backends.openmp.is_available()
False
"""


def is_available() -> bool:
    """Whether ember uses OpenMP (ember runs its own thread pool; see ember.set_num_threads) (no)."""
    return False
