import socket

import pytest

from memvault_devstack.ports import free_port, free_ports, port_accepts, port_is_free, wait_until_accepting

pytestmark = pytest.mark.unit


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(8)

    assert len(set(ports)) == 8
    assert all(port_is_free(port) for port in ports)


def test_a_listening_port_is_not_free_and_accepts() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        assert not port_is_free(port)
        assert port_accepts(port)
        assert wait_until_accepting(port, timeout=1.0)


def test_a_free_port_accepts_nothing() -> None:
    port = free_port()

    assert not port_accepts(port)
    assert not wait_until_accepting(port, timeout=0.2)
