"""ember.backends.mkl: Intel MKL, which ember does not use.

>>> import ember
>>> ember.backends.mkl.is_available()
False
"""


def is_available() -> bool:
    """Whether ember uses Intel MKL (no)."""
    return False
