"""Neural-network modules for ember (placeholder; nothing implemented yet)."""

try:
    from ._version import __version__
except ImportError:  # not installed from a git checkout / sdist
    __version__ = "0.0.0"

__all__ = ["__version__"]
