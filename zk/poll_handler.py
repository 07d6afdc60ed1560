"""kazoo's threading handler with a ``select`` that costs one poll(2) call.

kazoo's connection thread calls ``handler.select`` once per request sent and once per
response read. The stock handler makes, registers, waits on and closes a new epoll
selector each time (four system calls and a few dozen Python calls), which made the
connection thread, not ZooKeeper, the limit on pipelined requests: reading the 10,000
partition states a new controller loads took seconds. ``poll`` needs no object to set
up or tear down in the kernel and, unlike ``select.select``, takes descriptors above
1024 (a broker with thousands of partitions holds that many files).
"""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR
"""What select(2) reports as readable: hang-ups and errors too, so the reader sees them."""
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR


class PollHandler(SequentialThreadingHandler):  # type: ignore[misc]  # kazoo is untyped
    """``SequentialThreadingHandler`` whose ``select`` is one ``poll``."""

    def select(
        self,
        rlist: Sequence[Any],
        wlist: Sequence[Any],
        xlist: Sequence[Any],
        timeout: float | None = None,
    ) -> tuple[list[Any], list[Any], list[Any]]:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be non-negative")
        poller = select.poll()
        masks: dict[int, int] = {}
        for fileobj in rlist:
            fd = fileobj_to_fd(fileobj)
            masks[fd] = masks.get(fd, 0) | select.POLLIN | select.POLLPRI
        for fileobj in wlist:
            fd = fileobj_to_fd(fileobj)
            masks[fd] = masks.get(fd, 0) | select.POLLOUT
        for fd, mask in masks.items():
            poller.register(fd, mask)
        ready = dict(poller.poll(None if timeout is None else timeout * 1000))
        readable = [f for f in rlist if ready.get(fileobj_to_fd(f), 0) & _READABLE]
        writable = [f for f in wlist if ready.get(fileobj_to_fd(f), 0) & _WRITABLE]
        return readable, writable, []
