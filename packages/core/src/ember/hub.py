"""``ember.hub``: the checkpoint half of ``torch.hub``. ``load_state_dict_from_url`` downloads a
checkpoint once into ``<hub dir>/checkpoints`` (``$TORCH_HOME/hub``, else
``$XDG_CACHE_HOME/torch/hub``, else ``~/.cache/torch/hub``: the same cache PyTorch uses, so
files it downloaded are found) and loads it with :func:`ember.load`, which reads PyTorch's zip
checkpoints without running code from them. ``check_hash`` verifies the SHA-256 prefix that
PyTorch's naming convention puts in the file name (``name-<hash>.pth``). ``hub.load`` (running a
repository's ``hubconf.py``) is not offered: it would execute downloaded code.

>>> import ember.hub
>>> ember.hub.get_dir().endswith("hub")
True
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["get_dir", "set_dir", "download_url_to_file", "load_state_dict_from_url", "load",
           "list", "help"]

_hub_dir: str | None = None
_HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")


def get_dir() -> str:
    """The hub cache directory (see the module docstring); :func:`set_dir` overrides it."""
    if _hub_dir is not None:
        return _hub_dir
    torch_home = os.environ.get("TORCH_HOME")
    if torch_home is None:
        cache = os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
        torch_home = os.path.join(cache, "torch")
    return os.path.join(os.path.expanduser(torch_home), "hub")


def set_dir(d: str | os.PathLike) -> None:
    """Sets the hub cache directory for this process."""
    global _hub_dir
    _hub_dir = os.path.expanduser(os.fspath(d))


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None,
                         progress: bool = True) -> None:
    """Downloads ``url`` (http(s) or file) to ``dst`` through a temporary file in the same folder,
    checking the SHA-256 digest starts with ``hash_prefix`` when given."""
    dst = os.path.expanduser(dst)
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    sha = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".partial-")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url) as response:
            total = response.headers.get("Content-Length") if hasattr(response, "headers") \
                else None
            done = 0
            while True:
                chunk = response.read(1 << 20)
                if not chunk:
                    break
                out.write(chunk)
                sha.update(chunk)
                done += len(chunk)
                if progress:
                    size = f"/{int(total) / 1e6:.1f}" if total else ""
                    sys.stderr.write(f"\rDownloading {url}: {done / 1e6:.1f}{size} MB")
            if progress:
                sys.stderr.write("\n")
        if hash_prefix is not None and not sha.hexdigest().startswith(hash_prefix):
            raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got '
                               f'"{sha.hexdigest()}")')
        shutil.move(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location: Any = None,
                             progress: bool = True, check_hash: bool = False,
                             file_name: str | None = None,
                             weights_only: bool = False) -> dict[str, Any]:
    """The object (usually a state dict) of the checkpoint at ``url``, downloaded once into
    ``model_dir`` (``<hub dir>/checkpoints`` by default) and loaded with :func:`ember.load`
    (``map_location`` as there). ``file_name`` names the cached file (default: the URL's last
    path part); ``check_hash`` checks the hash prefix in that name. Example::

        sd = ember.hub.load_state_dict_from_url("https://example.org/resnet18-f37072fd.pth")
        model.load_state_dict(sd)
    """
    import ember

    model_dir = model_dir if model_dir is not None else os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    if not filename:
        raise ValueError(f"load_state_dict_from_url: no file name in {url!r}; pass file_name=")
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        hash_prefix = None
        if check_hash:
            m = _HASH_REGEX.search(filename)
            hash_prefix = m.group(1) if m else None
        download_url_to_file(url, cached, hash_prefix, progress=progress)
    return ember.load(cached, map_location=map_location, weights_only=weights_only)


def load(repo_or_dir: str, model: str, *args: Any, **kwargs: Any) -> Any:
    """Not offered: loading a hub model runs the repository's ``hubconf.py``."""
    raise NotImplementedError(
        "ember.hub.load is not supported: it would download and run a repository's hubconf.py. "
        "Build the model in your code and load its weights with "
        "ember.hub.load_state_dict_from_url(url)")


def list(github: str, *args: Any, **kwargs: Any) -> Any:  # noqa: A001  (PyTorch's name)
    """Not offered (see :func:`load`)."""
    raise NotImplementedError("ember.hub.list is not supported: it runs a repository's "
                              "hubconf.py")


def help(github: str, model: str, *args: Any, **kwargs: Any) -> Any:  # noqa: A001
    """Not offered (see :func:`load`)."""
    raise NotImplementedError("ember.hub.help is not supported: it runs a repository's "
                              "hubconf.py")
