"""Kafka's own binary wire protocol (sans-IO): message declarations, a compiled codec,
and the request/response headers. See protocol/kafka/codec.py for the entry points."""
