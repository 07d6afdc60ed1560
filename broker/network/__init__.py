"""The broker's listeners: sockets, connections, frames in and replies out.

``BrokerServer`` (server.py) binds and accepts; each connection (server_connection.py)
reads frames and writes replies in request order (server_replies.py), bounded by the
connection limits (connection_limits.py) and the broker-wide budget of queued bytes
(queued_bytes.py). The two codecs turn a frame into the dispatcher's header and body
and the answer back into buffers: msgpack (request_codec.py) and Kafka's binary
protocol (kafka_codec.py). server_metrics.py reports the server's limits at scrape time.
Built on requests/ (the handler interface, the dispatcher) and security/ (the SASL gate).
"""
