"""Where a dev cluster is and what runs in it: ``<data-dir>/dev.json`` and how it is found.

``dev.json`` records the supervisor's pid, ZooKeeper's and every broker's pid, ports and
log, and the ``--set`` properties the brokers run with (so ``dev start-broker`` starts a
broker exactly as ``dev up`` did). ``dev up`` also writes the data dir's absolute path
to ``~/.minibroker/dev-cluster`` (``$MINIBROKER_HOME`` instead of ``~/.minibroker``),
so the other ``dev`` commands find the cluster from any directory:

1. ``--data-dir D`` when given;
2. ``./.minibroker`` when it holds a dev.json (the default data dir, run where it was);
3. the data dir ``~/.minibroker/dev-cluster`` names, when it holds a dev.json;

and otherwise fail with an error that says what to pass.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from minibroker.protocol.errors import MinibrokerError

STATE_FILE = "dev.json"
DEFAULT_DATA_DIR = Path(".minibroker")
POINTER_FILE = "dev-cluster"


class DevError(MinibrokerError):
    """A dev command could not do what was asked (the message says why and where to look)."""


@dataclass
class ChildInfo:
    name: str
    pid: int
    port: int
    log: str
    metrics_port: int | None = None
    kafka_port: int | None = None


@dataclass
class DevState:
    supervisor_pid: int
    data_dir: str
    zookeeper: ChildInfo | None = None
    brokers: dict[int, ChildInfo] = field(default_factory=dict)
    ready: bool = False
    settings: list[str] = field(default_factory=list)  # every broker's --set KEY=VALUE
    client_config: str | None = None
    """``dev up --secure``: the client.properties clients log in with (None: plaintext)."""

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values())

    @property
    def kafka_bootstrap(self) -> str:
        """Kafka clients' bootstrap.servers ("" when no broker has a Kafka listener)."""
        return ",".join(
            f"127.0.0.1:{b.kafka_port}" for b in self.brokers.values() if b.kafka_port is not None
        )

    def save(self) -> None:
        path = Path(self.data_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        if self.client_config is not None:
            tmp.chmod(0o600)  # the brokers' settings hold their SASL login
        tmp.replace(path)

    @classmethod
    def load(cls, data_dir: Path) -> DevState | None:
        try:
            raw = json.loads((data_dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        zk = ChildInfo(**raw["zookeeper"]) if raw.get("zookeeper") else None
        brokers = {int(k): ChildInfo(**v) for k, v in raw.get("brokers", {}).items()}
        return cls(
            raw["supervisor_pid"],
            raw["data_dir"],
            zk,
            brokers,
            raw.get("ready", False),
            list(raw.get("settings", [])),
            raw.get("client_config"),
        )


def pid_running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: an orphan's zombie lingers where init does not reap (containers)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


# --- finding the cluster ---------------------------------------------------------------


def pointer_path() -> Path:
    home = os.environ.get("MINIBROKER_HOME")
    return (Path(home) if home else Path.home() / ".minibroker") / POINTER_FILE


def record_location(data_dir: Path) -> None:
    """Remember ``data_dir`` as the latest dev cluster's (best effort: a read-only home
    only means the user passes --data-dir)."""
    pointer = pointer_path()
    with contextlib.suppress(OSError):
        pointer.parent.mkdir(parents=True, exist_ok=True)
        pointer.write_text(f"{data_dir.resolve()}\n")


def forget_location(data_dir: Path) -> None:
    """Drop the pointer if it still names ``data_dir`` (a later `dev up` elsewhere wins)."""
    if recorded_location() == data_dir.resolve():
        pointer_path().unlink(missing_ok=True)


def recorded_location() -> Path | None:
    try:
        text = pointer_path().read_text().strip()
    except OSError:
        return None
    return Path(text) if text else None


def find_data_dir(explicit: Path | None) -> Path:
    """The data dir of the cluster a `dev` command (other than `up`) is about."""
    if explicit is not None:
        return explicit
    if (DEFAULT_DATA_DIR / STATE_FILE).exists():
        return DEFAULT_DATA_DIR
    recorded = recorded_location()
    if recorded is not None and (recorded / STATE_FILE).exists():
        return recorded
    raise DevError(
        f"no dev cluster found (no {DEFAULT_DATA_DIR / STATE_FILE} here, none recorded in "
        f"{pointer_path()}); pass --data-dir DIR, the directory `dev up` used"
    )


def load_state(data_dir: Path) -> DevState:
    state = DevState.load(data_dir)
    if state is None:
        raise DevError(f"no dev cluster recorded in {data_dir / STATE_FILE}")
    return state
