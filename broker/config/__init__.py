"""The broker's static configuration: every key declared once.

``BrokerConfig`` and ``TopicConfig`` (broker_config.py) are tables assembled from one
part per concern (config_listeners.py, config_log.py, config_replication.py,
config_groups.py, config_transactions.py), each row declared and parsed by
config_keys.py; ``.properties`` files are read by properties.py; how DescribeConfigs
describes a key (source, synonyms, type) is config_describe.py. Dynamic configs (the
DescribeConfigs / AlterConfigs handlers and their ZooKeeper change listeners) are in
admin/.
"""
