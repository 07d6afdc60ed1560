"""The transaction coordinator's keys of ``BrokerConfig``: the ``__transaction_state``
topic, transaction timeouts and the expiry of idle transactional ids (Kafka's names and
defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.broker.config.config_keys import at_least, config_key


@dataclass(frozen=True)
class TransactionSettings:
    """The transaction coordinator's keys of ``BrokerConfig``."""

    __slots__ = ()  # BrokerConfig holds the slots

    transaction_state_log_num_partitions: int = config_key(
        "transaction.state.log.num.partitions",
        50,
        "Partitions of __transaction_state (fixed once it is created).",
        at_least(1),
    )
    transaction_state_log_replication_factor: int = config_key(
        "transaction.state.log.replication.factor",
        3,
        "Replicas of __transaction_state, capped by the brokers alive when it is created.",
        at_least(1),
    )
    transaction_state_log_min_isr: int = config_key(
        "transaction.state.log.min.isr",
        2,
        "min.insync.replicas of __transaction_state (capped by its replication factor).",
        at_least(1),
    )
    transaction_max_timeout_ms: int = config_key(
        "transaction.max.timeout.ms",
        900000,
        "Longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT).",
        at_least(1),
    )
    transactional_id_expiration_ms: int = config_key(
        "transactional.id.expiration.ms",
        604800000,
        "A transactional id with no transaction for this long is forgotten.",
        at_least(1),
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = config_key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        10000,
        "How often the coordinator aborts transactions open past their timeout.",
        at_least(1),
    )
