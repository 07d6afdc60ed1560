"""Client quotas, enforced as Kafka enforces them: produce and fetch bytes per second
and request time per user, client id or both.

How this works (Kafka's ClientQuotaManager, KIP-13 / KIP-55 / KIP-124 / KIP-219):

- **Which quota applies** to a request from user U (the principal's name) with client
  id C, per key, is the first entity holding that key in Kafka's order:
  (U, C), (U, <default client>), U, (<default user>, C), (<default user>, <default
  client>), <default user>, C, <default client>. The entity that matched names the
  metric: its user part is U (or "" when it has none), its client part C (or ""). So a
  default gives every user its own quota, not one shared.
- **Measuring**: each (key, user tag, client tag) has a rate sampled in windows of
  ``quota.window.size.seconds``, the newest ``quota.window.num`` kept; the rate is
  their sum over the time they span, at least (num - 1) windows - so a client just
  starting is measured over that long, as in Kafka. Produce counts the request's record
  bytes, a consumer's Fetch the response's, every other request (but the brokers' own
  and the login steps) its handling time as a percentage of one thread.
- **Throttling**: once a rate is above its quota, the answer is sent at once with
  ``throttle_time_ms`` = (rate - quota) / quota x the measured window (capped at the
  whole window), and the connection is not read for that long
  (``Session.mute``, honoured by broker/network/server_connection.py): a client that ignores
  the hint still cannot go faster.

Nothing is measured while no quota is configured (``active`` False: one attribute read
per request).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import trio
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minibroker.protocol.api import RequestHeader
from minibroker.protocol.messages import ALL_MESSAGES
from minibroker.zk.client_quotas import CLIENT_ID, USER, QuotaEntity

PRODUCE = 0
FETCH = 1

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"

QUOTA_TYPES = {
    PRODUCER_BYTE_RATE: "produce",
    CONSUMER_BYTE_RATE: "fetch",
    REQUEST_PERCENTAGE: "request",
}
"""Each key's sensor type, as Kafka's metrics name it (kafka.server:type=Produce ...)."""

SENSOR_EXPIRY_S = 3600.0
"""A sensor unused this long is dropped when sensors pile up (Kafka expires quota
sensors after an hour idle): default quotas give every client id its own."""
MAX_IDLE_SENSORS = 10_000

Tags = tuple[str, str]
"""(user, client-id) of a quota's metrics; "" where its entity has no such part."""


class SampledRate:
    """Kafka's Rate over ``num`` samples of ``window_s`` seconds each."""

    __slots__ = ("_starts", "_values", "num", "window_s")

    def __init__(self, num: int, window_s: float) -> None:
        self.num = num
        self.window_s = window_s
        self._starts: list[float] = []
        self._values: list[float] = []

    def record(self, value: float, now: float) -> None:
        if not self._starts or now - self._starts[-1] >= self.window_s:
            self._starts.append(now)
            self._values.append(0.0)
            if len(self._starts) > self.num:
                del self._starts[0], self._values[0]
        self._values[-1] += value

    def span(self, now: float) -> float:
        """The seconds the samples cover, at least (num - 1) windows."""
        oldest = self._starts[0] if self._starts else now
        return max(now - oldest, (self.num - 1) * self.window_s, self.window_s)

    def measure(self, now: float) -> float:
        """Per second over the samples still in the window."""
        expired = now - self.num * self.window_s
        while self._starts and self._starts[0] < expired:
            del self._starts[0], self._values[0]
        return sum(self._values) / self.span(now)


class QuotaSensor:
    """One quota's rate, its token bucket and what throttling it cost."""

    __slots__ = ("checked", "rate", "throttled_ms", "throttles", "tokens", "total")

    def __init__(self, num: int, window_s: float, burst: float, now: float) -> None:
        self.rate = SampledRate(num, window_s)
        self.total = 0.0  # bytes, or percent-seconds of handling time
        self.throttled_ms = 0.0
        self.throttles = 0
        self.tokens = burst  # what may still be used now; negative: in debt
        self.checked = now

    def spend(self, value: float, quota: float, burst: float, now: float) -> float:
        """Count ``value`` in the rate and spend it from the bucket (refilled at
        ``quota`` per second up to ``burst``); the throttle (ms) until the bucket is out
        of debt again, 0 when it is not in debt. One call per request and quota: it is
        on every request's path while any quota is configured."""
        self.rate.record(value, now)
        self.total += value
        tokens = min(burst, self.tokens + (now - self.checked) * quota) - value
        self.tokens = tokens
        self.checked = now
        if tokens >= 0:
            return 0.0
        throttle = -tokens / quota * 1000.0
        self.throttled_ms += throttle
        self.throttles += 1
        return throttle


class ClientQuotas:
    """This broker's quotas, as ZooKeeper holds them, and their sensors."""

    def __init__(
        self,
        *,
        window_num: int = 11,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_num = window_num
        self.window_s = window_s
        self.clock = clock
        self.active = False
        self.configs: dict[QuotaEntity, dict[str, float]] = {}
        self.sensors: dict[tuple[str, Tags], QuotaSensor] = {}
        self._resolved: dict[tuple[str, str, str], tuple[float, Tags] | None] = {}
        # (key, user, client id) -> (quota, burst, sensor), or None where no quota
        # applies: what record() needs, found with one lookup
        self._hot: dict[tuple[str, str, str], tuple[float, float, QuotaSensor] | None] = {}

    def update(self, configs: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Replace every quota (a change is applied to the next request)."""
        self.configs = {entity: dict(values) for entity, values in configs.items()}
        self.active = bool(self.configs)
        self._resolved.clear()
        self._hot.clear()

    def quota(self, key: str, user: str, client_id: str) -> tuple[float, Tags] | None:
        """The quota on ``key`` for (user, client id) and its metric tags, or None."""
        cache_key = (key, user, client_id)
        if cache_key in self._resolved:
            return self._resolved[cache_key]
        found: tuple[float, Tags] | None = None
        for entity in _candidates(user, client_id):
            values = self.configs.get(entity)
            if values is not None and key in values:
                kinds = dict(entity)
                tags = (user if USER in kinds else "", client_id if CLIENT_ID in kinds else "")
                found = (values[key], tags)
                break
        self._resolved[cache_key] = found
        return found

    def record(self, key: str, user: str, client_id: str, value: float) -> float:
        """Count ``value`` against (user, client id)'s ``key`` quota; the throttle time
        (ms) it earns, 0 when within the quota or none applies."""
        try:
            hot = self._hot[(key, user, client_id)]
        except KeyError:
            hot = self._hot[(key, user, client_id)] = self._sensor(key, user, client_id)
        if hot is None:
            return 0.0
        bound, burst, sensor = hot
        return sensor.spend(value, bound, burst, self.clock())

    def _sensor(
        self, key: str, user: str, client_id: str
    ) -> tuple[float, float, QuotaSensor] | None:
        quota = self.quota(key, user, client_id)
        if quota is None:
            return None
        bound, tags = quota
        now = self.clock()
        burst = bound * self.window_num * self.window_s
        sensor = self.sensors.get((key, tags))
        if sensor is None:
            if len(self.sensors) >= MAX_IDLE_SENSORS:
                self._drop_idle(now)
            sensor = self.sensors[(key, tags)] = QuotaSensor(
                self.window_num, self.window_s, burst, now
            )
        return max(bound, 1e-9), burst, sensor

    def _drop_idle(self, now: float) -> None:
        idle = [k for k, s in self.sensors.items() if now - s.checked > SENSOR_EXPIRY_S]
        for key in idle:
            del self.sensors[key]
        self._hot.clear()  # it may hold the sensors just dropped


def _candidates(user: str, client_id: str) -> Iterator[QuotaEntity]:
    yield ((USER, user), (CLIENT_ID, client_id))
    yield ((USER, user), (CLIENT_ID, None))
    yield ((USER, user),)
    yield ((USER, None), (CLIENT_ID, client_id))
    yield ((USER, None), (CLIENT_ID, None))
    yield ((USER, None),)
    yield ((CLIENT_ID, client_id),)
    yield ((CLIENT_ID, None),)


class ClientQuotaCollector(Collector):
    """Kafka's quota metrics as the JMX exporter names them, per (user, client-id):

    kafka_server_produce_byte_rate / _throttle_time       (type=Produce)
    kafka_server_fetch_byte_rate / _throttle_time         (type=Fetch)
    kafka_server_request_request_time / _throttle_time    (type=Request)

    plus the totals behind them (``..._total``) for rate() in PromQL.
    """

    def __init__(self, quotas: ClientQuotas) -> None:
        self.quotas = quotas

    def collect(self) -> Iterator[Metric]:
        quotas = self.quotas
        now = quotas.clock()
        families: dict[str, Any] = {}

        def family(name: str, doc: str, counter: bool = False) -> Any:
            if name not in families:
                kind = CounterMetricFamily if counter else GaugeMetricFamily
                families[name] = kind(name, doc, labels=["user", "client_id"])
            return families[name]

        for (key, tags), sensor in sorted(quotas.sensors.items()):
            kind = QUOTA_TYPES[key]
            measured = "request_time" if kind == "request" else "byte_rate"
            family(
                f"kafka_server_{kind}_{measured}",
                "Rate against the client quota (bytes/s, or % of one thread for requests).",
            ).add_metric(list(tags), sensor.rate.measure(now))
            family(
                f"kafka_server_{kind}_throttle_time",
                "Average throttle time (ms) of the throttled responses.",
            ).add_metric(
                list(tags), sensor.throttled_ms / sensor.throttles if sensor.throttles else 0.0
            )
            family(
                f"minibroker_quota_{kind}_throttle_time_ms",
                "Throttle time (ms) given to this quota's clients in all.",
                counter=True,
            ).add_metric(list(tags), sensor.throttled_ms)
        yield from families.values()


EXEMPT_APIS = frozenset({4, 5, 6, 7, 17, 18, 36, 1000, 1001})
"""Never counted: the controller's requests, ApiVersions, the login steps and the
brokers' identity proof (Kafka exempts cluster actions and the handshake)."""

_THROTTLED_ANSWERS = frozenset(
    key
    for key, message in ALL_MESSAGES.items()
    if any(f.name == "throttle_time_ms" for f in message.response.fields)
)
"""APIs whose answer carries throttle_time_ms."""


def enforce(
    quotas: ClientQuotas,
    header: RequestHeader,
    request: Mapping[str, Any],
    response: dict[str, Any] | None,
    handling_s: float,
) -> None:
    """Count one answered request against its client's quotas; when one is exceeded,
    put the throttle in the answer and mute the connection that long."""
    api = header.api_key
    if api in EXEMPT_APIS:
        return
    user = header.session.principal.partition(":")[2]
    client_id = header.client_id or ""
    throttle = 0.0
    if api == PRODUCE:
        topics = request["topics"]
        if len(topics) == 1 and len(topics[0]["partitions"]) == 1:  # no generator
            sent = len(topics[0]["partitions"][0]["records"] or b"")
        else:
            sent = sum(len(p["records"] or b"") for t in topics for p in t["partitions"])
        throttle = quotas.record(PRODUCER_BYTE_RATE, user, client_id, sent)
    elif api == FETCH:
        if request.get("replica_id", -1) >= 0:
            return  # a follower: the replication throttle's business
        if response is not None:
            read = sum(
                len(p.get("records") or b"")
                for t in response.get("topics", ())
                for p in t["partitions"]
            )
            throttle = quotas.record(CONSUMER_BYTE_RATE, user, client_id, read)
    time_throttle = quotas.record(REQUEST_PERCENTAGE, user, client_id, handling_s * 100.0)
    throttle = max(throttle, time_throttle)
    if throttle <= 0.0:
        return
    if response is not None and api in _THROTTLED_ANSWERS:
        response["throttle_time_ms"] = max(int(response.get("throttle_time_ms", 0)), int(throttle))
    mute = header.session.mute
    if mute is not None:
        mute.until = max(mute.until, trio.current_time() + throttle / 1000.0)
