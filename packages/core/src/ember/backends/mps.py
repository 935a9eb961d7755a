"""ember.backends.mps: Apple's Metal backend, which ember does not have.

>>> import ember
>>> ember.backends.mps.is_available(), ember.backends.mps.is_built()
(False, False)
"""


def is_available() -> bool:
    """Whether an MPS device can be used (never in ember)."""
    return False


def is_built() -> bool:
    """Whether ember was built with MPS support (no)."""
    return False
