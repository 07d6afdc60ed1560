"""The errors a broker answers: counted as Kafka counts them, and refusals logged.

Counting. Kafka's ``kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=R,
error=E`` counts every error code of every response, NONE included: a Produce answer
for three partitions counts three. ``error_codes`` finds them in a response body (every
``error_code`` field, at the top and in lists of entries, as Kafka's schemas name them);
``BrokerMetrics`` exports the counts as the JMX exporter names that MBean,
``kafka_network_requestmetrics_errors_total{request, error}``. A request refused as a
whole counts its error once.

Logging. A client that asks for something this broker does not serve (an API version,
FindCoordinator for transactions, a KIP-848 group heartbeat) gets UNSUPPORTED_VERSION
or INVALID_REQUEST and, without a trace on the broker, hangs or fails where its
operator cannot see why. Such answers (``REFUSALS``, in a response or as its whole) and
every request refused as a whole are logged, rate-limited (broker/requests/log_limiter.py),
naming the API, its version and the client id.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.requests.log_limiter import LogRateLimiter
from minibroker.protocol.api import ApiKey, RequestHeader
from minibroker.protocol.errors import (
    InvalidRequestError,
    KafkaError,
    UnsupportedVersionError,
    error_for_code,
)

log = logging.getLogger(__name__)

REFUSALS = frozenset({UnsupportedVersionError.code, InvalidRequestError.code})
"""Answers that mean "not served here": logged even inside an otherwise fine response."""


FEW_ENTRIES = 16
"""Shorter lists of entries are walked one entry at a time (cheaper for a few)."""


def error_codes(body: Mapping[str, Any]) -> dict[int, int]:
    """Every ``error_code`` in a response body, with how often it occurs."""
    counts: dict[int, int] = {}
    _count(body, counts)
    return counts


def _count(node: Mapping[str, Any], counts: dict[int, int]) -> None:
    code = node.get("error_code")
    if code is not None:
        counts[code] = counts.get(code, 0) + 1
    for value in node.values():
        if type(value) is list and value and type(value[0]) is dict:
            if len(value) < FEW_ENTRIES:
                for entry in value:
                    _count(entry, counts)
            else:
                _count_entries(value, counts)


def _count_entries(entries: list[dict[str, Any]], counts: dict[int, int]) -> None:
    """The codes of a list of entries (one schema's: the same fields in each). Entries
    with no entries below them, the usual case (a response's partitions), are counted
    in one pass over their codes rather than a call each, which stalled every client
    with thousands of partitions (docs/performance.md, "Figures behind the code")."""
    if any(map(_holds_entries, _fields_below(entries))):
        for entry in entries:
            _count(entry, counts)
        return
    for code, n in Counter([entry.get("error_code") for entry in entries]).items():
        if code is not None:
            counts[code] = counts.get(code, 0) + n


def _fields_below(entries: list[dict[str, Any]]) -> list[Any]:
    """The values of ``entries``' fields that may hold entries: each field that holds a
    non-empty list in the first entry, and of a field that is None or empty there (it
    may hold entries in another) every entry's non-empty value."""
    found = [v for v in entries[0].values() if type(v) is list and v]
    for key, value in entries[0].items():
        if not value and (value is None or type(value) is list):
            found += [v for v in [entry.get(key) for entry in entries] if v]
    return found


def _holds_entries(value: Any) -> bool:
    return type(value) is list and type(value[0]) is dict


def _refusal_message(node: Mapping[str, Any]) -> str | None:
    """The error message of the first refusal in a response body, "" if it has none."""
    if node.get("error_code") in REFUSALS:
        return str(node.get("error_message") or "")
    for value in node.values():
        if type(value) is list:
            for item in value:
                if type(item) is not dict:
                    break
                found = _refusal_message(item)
                if found is not None:
                    return found
    return None


def describe(header: RequestHeader) -> str:
    """``FIND_COORDINATOR v4 #7 from client 'rdkafka'``: a request named for a log line."""
    try:
        name = ApiKey(header.api_key).name
    except ValueError:
        name = f"api key {header.api_key}"
    return f"{name} v{header.api_version} #{header.correlation_id} from client {header.client_id!r}"


class RequestErrors:
    """What the dispatcher and the codecs report each answer's errors to."""

    def __init__(self, metrics: BrokerMetrics, limiter: LogRateLimiter | None = None) -> None:
        self.metrics = metrics
        self.limiter = limiter if limiter is not None else LogRateLimiter(log)

    def answered(self, header: RequestHeader, body: Mapping[str, Any]) -> None:
        """``body`` answers ``header``'s request: count its error codes, log a refusal."""
        counts = error_codes(body)
        self.metrics.record_errors(header.api_key, counts)
        if not REFUSALS.isdisjoint(counts):
            code = next(c for c in counts if c in REFUSALS)
            message = _refusal_message(body) or ""
            self._log(header, error_for_code(code).name, message)

    def refused(self, header: RequestHeader, error: KafkaError) -> None:
        """``header``'s request was refused as a whole with ``error``."""
        self.metrics.record_errors(header.api_key, {error.code: 1})
        self._log(header, error.name, error.message if error.message != error.name else "")

    def _log(self, header: RequestHeader, name: str, message: str) -> None:
        why = f"{name} ({message})" if message else name
        self.limiter.info("refused %s: %s", describe(header), why)
