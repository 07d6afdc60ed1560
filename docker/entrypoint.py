#!/usr/bin/env python3
"""Container entrypoint: environment variables -> ``minibroker broker`` flags.

How this works: the image's ``CMD`` is ``broker``. For that command the broker's
command line is built from ``MINIBROKER_*`` variables and the process is replaced
(``exec``), so the broker is PID 1 and gets ``docker stop``'s SIGTERM directly (a clean
shutdown: flushed logs, checkpoints, ``.kafka_cleanshutdown``).

    MINIBROKER_BROKER_ID          -> --broker-id
    MINIBROKER_ZOOKEEPER_CONNECT  -> --zookeeper       (host:port[,host:port][/chroot])
    MINIBROKER_LISTENERS          -> --listen          (host:port or PLAINTEXT://host:port)
    MINIBROKER_LOG_DIRS           -> --log-dirs        (comma-separated)
    MINIBROKER_METRICS_PORT       -> --metrics-port
    MINIBROKER_CONFIG             -> --config          (a .properties file)
    MINIBROKER_LOG_LEVEL          -> --log-level
    MINIBROKER_<ANY_OTHER_KEY>    -> --set any.other.key=VALUE

A property name is the variable's suffix in lower case with ``_`` read as ``.``; as in
Confluent's images, ``__`` stands for a literal ``_`` and ``___`` for ``-`` (Kafka keys
have neither today, but the escape keeps every key expressible). Empty values are
ignored, so a compose file can pass ``${VAR:-}`` through. Arguments after ``broker``
are appended and win over the environment (argparse keeps the last value).

Any other command runs as given when it is an executable on PATH (``sh``,
``spark-submit``), otherwise as a ``minibroker`` sub-command (``zookeeper ...``,
``analyze ...``, ``topic ...``).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence

PREFIX = "MINIBROKER_"
# Variables with a dedicated broker flag (the broker CLI's own names for them).
FLAGS: dict[str, str] = {
    "BROKER_ID": "--broker-id",
    "ZOOKEEPER_CONNECT": "--zookeeper",
    "LISTENERS": "--listen",
    "LOG_DIRS": "--log-dirs",
    "METRICS_PORT": "--metrics-port",
    "CONFIG": "--config",
    "LOG_LEVEL": "--log-level",
}
# The order flags are emitted in: stable, so the command line is reproducible.
FLAG_ORDER = tuple(FLAGS)
_ESCAPES = re.compile(r"_{1,3}")
_ESCAPED = {"_": ".", "__": "_", "___": "-"}


class EntrypointError(Exception):
    """A variable that cannot be turned into a broker property (one-line message)."""


def property_name(suffix: str) -> str:
    """``LOG_RETENTION_MS`` -> ``log.retention.ms`` (``__`` -> ``_``, ``___`` -> ``-``)."""
    if not suffix or suffix.startswith("_") or suffix.endswith("_") or "____" in suffix:
        raise EntrypointError(f"{PREFIX}{suffix}: not a property name")
    return _ESCAPES.sub(lambda match: _ESCAPED[match.group(0)], suffix.lower())


def broker_argv(env: Mapping[str, str], extra: Sequence[str] = ()) -> list[str]:
    """The ``minibroker broker ...`` argument vector that ``env`` describes."""
    argv = ["minibroker", "broker"]
    for name in FLAG_ORDER:
        value = env.get(PREFIX + name, "").strip()
        if value:
            argv += [FLAGS[name], value]
    for variable in sorted(env):
        if not variable.startswith(PREFIX):
            continue
        suffix = variable[len(PREFIX) :]
        value = env[variable].strip()
        if suffix in FLAGS or not value:
            continue
        argv += ["--set", f"{property_name(suffix)}={value}"]
    return argv + list(extra)


def command_argv(args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """What the container runs for ``args`` (the image's CMD or the user's command)."""
    if not args or args[0] == "broker":
        return broker_argv(env, args[1:])
    if args[0].startswith("-"):  # `docker run IMAGE --set k=v`: flags for the broker
        return broker_argv(env, args)
    if shutil.which(args[0]) is not None:
        return list(args)
    return ["minibroker", *args]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        command = command_argv(args, os.environ)
    except EntrypointError as exc:
        print(f"minibroker-entrypoint: error: {exc}", file=sys.stderr)
        return 2
    print("minibroker-entrypoint: exec " + " ".join(command), file=sys.stderr, flush=True)
    os.execvp(command[0], command)  # replaces this process; returns only by raising


if __name__ == "__main__":
    sys.exit(main())
