#!/usr/bin/env python3
"""Container HEALTHCHECK: exit 0 when the container's server answers, 1 otherwise.

How this works: the entrypoint execs the real process, so PID 1's command line says
what this container runs and on which port (``/proc/1/cmdline``):

- ``minibroker broker ... --listen HOST:PORT``: send one ApiVersions request (the
  project's own framing and msgpack codec) and expect error_code 0. That proves the
  broker's loop serves requests, not merely that a port is open.
- ``minibroker zookeeper --port N [--host H]``: ZooKeeper's ``srvr`` four-letter word
  must answer with its version (``ruok`` answers before the database has loaded).
- anything else (a one-shot ``analyze`` job, a shell): healthy while it runs.

A listener on all interfaces (``0.0.0.0``, ``::`` or no host) is probed on 127.0.0.1.
"""

from __future__ import annotations

import socket
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

# Docker's own --timeout (4 s in the Dockerfile) kills a hung probe; stay below it.
PROBE_TIMEOUT_S = 3.0
DEFAULT_BROKER_PORT = 9092
DEFAULT_ZOOKEEPER_PORT = 2181
# Any id will do: the probe sends exactly one request per connection.
CORRELATION_ID = 1
_WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of the last ``--flag V`` or ``--flag=V`` in ``argv`` (argparse's rule)."""
    value: str | None = None
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
    return value


def probe_address(host: str) -> str:
    return "127.0.0.1" if host in _WILDCARD_HOSTS else host.strip("[]")


def broker_endpoint(argv: Sequence[str]) -> tuple[str, int]:
    """(host, port) to probe for a broker started with ``argv``."""
    listen = flag_value(argv, "--listen")
    if listen is None:
        return "127.0.0.1", DEFAULT_BROKER_PORT
    spec = listen.split("://", 1)[-1]
    host, _, port = spec.rpartition(":")
    return probe_address(host), int(port)


def zookeeper_endpoint(argv: Sequence[str]) -> tuple[str, int]:
    port = flag_value(argv, "--port")
    host = flag_value(argv, "--host") or "127.0.0.1"
    return probe_address(host), int(port) if port else DEFAULT_ZOOKEEPER_PORT


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed before a whole response")
        data += chunk
    return bytes(data)


def check_broker(host: str, port: int) -> str:
    """Send ApiVersions; return a one-line description or raise."""
    from minibroker.protocol.api import ApiKey, decode_response, encode_request
    from minibroker.protocol.frames import encode_frame

    request = encode_request(ApiKey.API_VERSIONS, 0, CORRELATION_ID, "healthcheck", {})
    with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as sock:
        sock.sendall(encode_frame(request))
        (size,) = struct.unpack(">i", _read_exactly(sock, 4))
        payload = _read_exactly(sock, size)
    correlation_id, body = decode_response(payload, ApiKey.API_VERSIONS, 0)
    if correlation_id != CORRELATION_ID or body.get("error_code") != 0:
        raise RuntimeError(f"ApiVersions answered {body.get('error_code')}")
    return f"broker {host}:{port} answers ApiVersions ({len(body['api_keys'])} APIs)"


def check_zookeeper(host: str, port: int) -> str:
    with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as sock:
        sock.sendall(b"srvr")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    first = answer.decode("utf-8", "replace").splitlines()[:1]
    if not first or not first[0].startswith("Zookeeper version"):
        raise RuntimeError(f"srvr answered {answer[:80]!r}")
    return f"zookeeper {host}:{port}: {first[0]}"


def minibroker_command(argv: Sequence[str]) -> str | None:
    """The sub-command of a ``[python] .../minibroker COMMAND ...`` command line."""
    for index, arg in enumerate(argv[:-1]):
        if arg == "minibroker" or arg.endswith("/minibroker"):
            return argv[index + 1]
    return None


def check(argv: Sequence[str]) -> str:
    """Probe what a process started with ``argv`` serves; raise if it does not answer."""
    command = minibroker_command(argv)
    if command == "broker":
        return check_broker(*broker_endpoint(argv))
    if command == "zookeeper":
        return check_zookeeper(*zookeeper_endpoint(argv))
    return "no server to probe: " + " ".join(argv[:3])


def main() -> int:
    argv = Path("/proc/1/cmdline").read_bytes().split(b"\0")
    args = [arg.decode("utf-8", "replace") for arg in argv if arg]
    try:
        print(check(args))
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"unhealthy: {exc}")
        return 1
    except Exception as exc:  # a malformed answer is unhealthy too, never a traceback
        print(f"unhealthy: {type(exc).__name__}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
