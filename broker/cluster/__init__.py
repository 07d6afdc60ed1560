"""What this broker knows of the cluster, and what it asks ZooKeeper for on a
client's behalf.

The ``MetadataCache`` the controller fills (metadata_cache.py), the rules for topic names
and replica placement (assignment.py), topics created because a client named them
(topic_auto_creation.py), where a coordinator lives (coordinator_locator.py) and
producer id blocks for InitProducerId (producer_ids.py).
"""
