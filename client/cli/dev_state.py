"""Where a dev cluster is and what runs in it: ``<data-dir>/dev.json`` and how it is found.

``dev.json`` records the supervisor's pid, ZooKeeper's and every broker's pid, ports and
log, and the ``--set`` properties the brokers run with (so ``dev start-broker`` starts a
broker exactly as ``dev up`` did). Each cluster is recorded under its own data dir, so
one user may run several (one per clone, each on its own ports). So that the other
``dev`` commands find one from any directory, ``dev up`` also adds an entry to
``~/.minibroker/dev-clusters/`` (``$MINIBROKER_HOME`` instead of ``~/.minibroker``): the
data dir's absolute path and the directory it ran in; ``dev down`` removes it. A
command finds its cluster by:

1. ``--data-dir D`` when given;
2. the repository it runs in: ``.minibroker/dev.json`` here or in a parent directory,
   else a recorded cluster whose ``dev up`` ran here or in a parent;
3. the only recorded cluster that runs (or, none running, the only one recorded);

and otherwise fails with an error that says what to pass (several clusters: `dev status
--all` lists them).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from minibroker.protocol.errors import MinibrokerError

STATE_FILE = "dev.json"
DEFAULT_DATA_DIR = Path(".minibroker")
REGISTRY_DIR = "dev-clusters"
LEGACY_POINTER_FILE = "dev-cluster"  # one pointer per user, as `dev up` kept it before


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
        tmp = path.with_name(f"{STATE_FILE}.{os.getpid()}.tmp")  # one per writing process
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


def minibroker_home() -> Path:
    home = os.environ.get("MINIBROKER_HOME")
    return Path(home) if home else Path.home() / ".minibroker"


def registry_dir() -> Path:
    """One file per cluster this user started (REGISTRY_DIR under minibroker_home)."""
    return minibroker_home() / REGISTRY_DIR


def _entry_path(data_dir: Path) -> Path:
    digest = hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return registry_dir() / f"{digest}.json"


@dataclass(frozen=True)
class Recorded:
    """A cluster's entry in the registry: its data dir, and where `dev up` ran."""

    data_dir: Path
    started_from: Path | None


def record_location(data_dir: Path, started_from: Path | None = None) -> None:
    """Add ``data_dir`` to this user's clusters (best effort: a read-only home only
    means the user passes --data-dir)."""
    entry = {"data_dir": str(data_dir.resolve()), "started_from": str(started_from or "")}
    path = _entry_path(data_dir)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry) + "\n")
        tmp.replace(path)


def forget_location(data_dir: Path) -> None:
    """Drop ``data_dir`` from this user's clusters (and from an older `dev up`'s pointer)."""
    with contextlib.suppress(OSError):
        _entry_path(data_dir).unlink(missing_ok=True)
        legacy = minibroker_home() / LEGACY_POINTER_FILE
        if legacy.exists() and Path(legacy.read_text().strip()) == data_dir.resolve():
            legacy.unlink()


def recorded_locations() -> list[Recorded]:
    """Every cluster recorded for this user, newest first (with the one an older
    `dev up` wrote to LEGACY_POINTER_FILE)."""
    found: list[tuple[float, Recorded]] = []
    with contextlib.suppress(OSError):
        for path in registry_dir().glob("*.json"):
            try:
                entry = json.loads(path.read_text())
                started = entry.get("started_from") or None
                recorded = Recorded(Path(entry["data_dir"]), Path(started) if started else None)
                found.append((path.stat().st_mtime, recorded))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    with contextlib.suppress(OSError):
        legacy = minibroker_home() / LEGACY_POINTER_FILE
        text = legacy.read_text().strip()
        if text and all(r.data_dir != Path(text) for _, r in found):
            found.append((legacy.stat().st_mtime, Recorded(Path(text), None)))
    return [r for _, r in sorted(found, key=lambda item: -item[0])]


def recorded_clusters() -> list[DevState]:
    """The recorded clusters whose dev.json is still there (running, or left by a
    supervisor that died)."""
    states = (DevState.load(r.data_dir) for r in recorded_locations())
    return [state for state in states if state is not None]


def is_running(state: DevState) -> bool:
    """Whether any process of the cluster still runs."""
    pids = [state.supervisor_pid, *(b.pid for b in state.brokers.values())]
    if state.zookeeper is not None:
        pids.append(state.zookeeper.pid)
    return any(pid_running(pid) for pid in pids)


def _repository_cluster(cwd: Path) -> Path | None:
    """The data dir of the cluster the repository around ``cwd`` started: its default
    ``.minibroker`` (in ``cwd`` or a parent), else a recorded cluster whose `dev up` ran
    there (``--data-dir`` elsewhere), the nearest first."""
    if (DEFAULT_DATA_DIR / STATE_FILE).exists():
        return DEFAULT_DATA_DIR
    for parent in cwd.parents:
        if (parent / DEFAULT_DATA_DIR / STATE_FILE).exists():
            return parent / DEFAULT_DATA_DIR
    started_here = [
        r
        for r in recorded_locations()
        if r.started_from is not None
        and (r.started_from == cwd or r.started_from in cwd.parents)
        and (r.data_dir / STATE_FILE).exists()
    ]
    if not started_here:
        return None
    return max(
        started_here, key=lambda r: len(r.started_from.parts) if r.started_from else 0
    ).data_dir


def find_data_dir(explicit: Path | None) -> Path:
    """The data dir of the cluster a `dev` command (other than `up`) is about."""
    if explicit is not None:
        return explicit
    cwd = Path.cwd().resolve()
    here = _repository_cluster(cwd)
    if here is not None:
        return here
    clusters = recorded_clusters()
    running = [c for c in clusters if is_running(c)]
    candidates = running or clusters
    if len(candidates) == 1:
        return Path(candidates[0].data_dir)
    if candidates:
        names = ", ".join(c.data_dir for c in candidates)
        raise DevError(
            f"{len(candidates)} dev clusters are recorded ({names}) and none belongs to "
            f"{cwd}; pass --data-dir DIR (`minibroker dev status --all` lists them)"
        )
    raise DevError(
        f"no dev cluster found (no {DEFAULT_DATA_DIR / STATE_FILE} here, none recorded in "
        f"{registry_dir()}); pass --data-dir DIR, the directory `dev up` used"
    )


def cluster_using_port(port: int) -> DevState | None:
    """A running recorded cluster one of whose processes was given ``port``."""
    for state in recorded_clusters():
        ports = {b.port for b in state.brokers.values()}
        ports |= {p for b in state.brokers.values() for p in (b.metrics_port, b.kafka_port) if p}
        if state.zookeeper is not None:
            ports.add(state.zookeeper.port)
        if port in ports and is_running(state):
            return state
    return None


@contextlib.contextmanager
def updating_state(data_dir: Path) -> Iterator[DevState]:
    """dev.json read, changed by the caller and written back while no other ``dev``
    command does the same: two ``dev start-broker`` run at once each record their own
    broker's pid instead of the later one writing back the other's old one."""
    with (Path(data_dir) / f"{STATE_FILE}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = load_state(data_dir)
        yield state
        state.save()


def load_state(data_dir: Path) -> DevState:
    state = DevState.load(data_dir)
    if state is None:
        raise DevError(f"no dev cluster recorded in {data_dir / STATE_FILE}")
    return state
