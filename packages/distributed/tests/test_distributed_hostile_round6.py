"""Hostile input, round 6 (ember.distributed part): env:// with a MASTER_PORT that is not a TCP
port.

``MASTER_PORT=99999`` reached the socket layer, whose ``OverflowError: bind(): port must be
0-65535`` named neither the variable nor init_process_group (PyTorch: a ValueError "port must
have value from 0 to 65535"); it is now a ValueError naming MASTER_PORT and the range, raised
before any socket is made. The rest of round 6 is in
packages/core/tests/test_hostile_input_round6.py.
"""

from __future__ import annotations

import socket

import ember
import ember.distributed as dist
import pytest


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_a_master_port_out_of_range_is_named(monkeypatch, port):
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "RANK": "0",
                 "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match=rf"init_process_group: MASTER_PORT={port} is not a TCP "
                                         r"port \(expected 0 to 65535\)"):
        dist.init_process_group("shm")
    assert not dist.is_initialized()


def test_a_free_master_port_still_initializes(monkeypatch):
    with socket.socket() as s:  # a port nobody listens on now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0",
                 "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(k, v)
    dist.init_process_group("shm")
    try:
        x = ember.ones(2)
        dist.all_reduce(x)
        assert x.tolist() == [1.0, 1.0] and dist.get_world_size() == 1
    finally:
        dist.destroy_process_group()
