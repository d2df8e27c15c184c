import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from memvault_devstack.nats import EmbeddedNats, JetStreamProbe
from memvault_devstack.ports import free_port, port_accepts

pytestmark = pytest.mark.integration


@pytest.fixture
def directory() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="memvault-devstack-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def published_count(url: str, publish: bool) -> int:
    client = await nats.connect(url)
    try:
        jetstream = client.jetstream()
        if publish:
            await jetstream.add_stream(name="DEVSTACK_TEST", subjects=["devstack.test.>"])
            ack = await jetstream.publish("devstack.test.created", b"{}", headers={"Nats-Msg-Id": "one"})
            assert ack.stream == "DEVSTACK_TEST"
        info = await jetstream.stream_info("DEVSTACK_TEST")
        return int(info.state.messages)
    finally:
        await client.close()


async def test_jetstream_streams_survive_a_restart(directory: Path) -> None:
    server = EmbeddedNats(directory / "store")
    url = server.start()
    try:
        assert await published_count(url, publish=True) == 1
    finally:
        server.stop()
    assert not port_accepts(int(url.rsplit(":", 1)[1]))

    port = free_port()
    with EmbeddedNats(directory / "store", port=port) as restarted:
        assert restarted.url == f"nats://127.0.0.1:{port}"
        assert await published_count(restarted.url, publish=False) == 1


def test_probe_is_not_ready_without_a_server() -> None:
    assert not JetStreamProbe(free_port()).ready()
