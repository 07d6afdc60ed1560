"""The group coordinator: consumer groups, their rebalances and committed offsets.

Kafka's classic group protocol served on both listeners, state kept in the internal
topic ``__consumer_offsets`` written through the broker's ReplicaManager. A layer
above ``broker/`` (it builds on the broker's parts) and below ``node/`` (which starts
it); it never imports the controller. docs/architecture.md, "The group coordinator".
"""
