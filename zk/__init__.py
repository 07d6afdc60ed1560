"""The ZooKeeper layer: the session, Kafka's znode layout and formats, the local server."""
