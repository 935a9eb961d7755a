"""ember.backends.mkldnn: oneDNN (MKL-DNN), which ember does not use.

>>> import ember
>>> ember.backends.mkldnn.is_available()
False
"""

enabled = True


def is_available() -> bool:
    """Whether ember uses oneDNN (MKL-DNN) (no)."""
    return False
