"""net/socket_io: the direct socket reads and writes behave as Trio's stream methods do."""

from __future__ import annotations

import pytest
import trio

from minibroker.net import socket_io


def _pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    left, right = trio.socket.socketpair()
    return trio.SocketStream(left), trio.SocketStream(right)


async def test_bytes_already_there_are_read_without_waiting() -> None:
    a, b = _pair()
    async with a, b:
        assert socket_io.receive_now(b, 10) is None
        await socket_io.send_all(a, b"hello")
        assert socket_io.receive_now(b, 10) == b"hello"


async def test_more_than_the_socket_buffer_takes_is_sent_whole() -> None:
    a, b = _pair()
    data = bytes(range(256)) * 40_000  # 10 MB: far more than a socket buffer
    received = bytearray()
    async with a, b, trio.open_nursery() as nursery:

        async def read_all() -> None:
            while len(received) < len(data):
                received.extend(await socket_io.receive_some(b, 1 << 20))

        nursery.start_soon(read_all)
        await socket_io.send_all(a, data)
    assert received == data


async def test_end_of_stream_reads_as_empty_bytes() -> None:
    a, b = _pair()
    async with b:
        await a.aclose()
        assert await socket_io.receive_some(b, 10) == b""


async def test_a_closed_socket_raises_closed_resource_error() -> None:
    a, b = _pair()
    async with b:
        await a.aclose()
        with pytest.raises(trio.ClosedResourceError):
            socket_io.write_now(a, b"x")


async def test_buffers_are_written_in_order_in_one_call() -> None:
    a, b = _pair()
    async with a, b:
        left = socket_io.write_buffers_now(a, [b"ab", memoryview(b"cd"), bytearray(b"ef")])
        assert left == []
        assert socket_io.receive_now(b, 100) == b"abcdef"


async def test_buffers_the_socket_does_not_take_now_are_returned_cut_where_it_stopped() -> None:
    a, b = _pair()
    big = bytes(range(256)) * 40_000  # 10 MB: far more than a socket buffer
    buffers = [b"head", big, b"tail"]
    async with a, b:
        left = socket_io.write_buffers_now(a, buffers)
        assert left[1:] == [b"tail"]
        written = len(b"head") + len(big) - len(left[0])
        received = bytearray()
        while len(received) < written:
            received.extend(await socket_io.receive_some(b, 1 << 20))
        while left:
            left = socket_io.write_buffers_now(a, left)
            received.extend(await socket_io.receive_some(b, 1 << 20))
        while len(received) < len(big) + 8:
            received.extend(await socket_io.receive_some(b, 1 << 20))
    assert received == b"head" + big + b"tail"


async def test_no_buffers_write_nothing() -> None:
    a, b = _pair()
    async with a, b:
        assert socket_io.write_buffers_now(a, []) == []
        assert socket_io.receive_now(b, 10) is None


async def test_receive_into_now_fills_the_given_buffer_with_what_is_there() -> None:
    a, b = _pair()
    buffer = bytearray(10)
    async with a:
        assert socket_io.receive_into_now(b, memoryview(buffer)) is None
        await socket_io.send_all(a, b"hello")
        assert socket_io.receive_into_now(b, memoryview(buffer)[2:]) == 5
        assert buffer == b"\0\0hello\0\0\0"
        await a.aclose()
        assert socket_io.receive_into_now(b, memoryview(buffer)) == 0  # end of stream
    await b.aclose()
    with pytest.raises(trio.ClosedResourceError):
        socket_io.receive_into_now(b, memoryview(buffer))
