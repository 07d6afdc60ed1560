"""The admin APIs any broker answers, writing to ZooKeeper.

Topics (admin_manager.py: CreateTopics, DeleteTopics; create_partitions.py;
delete_records.py), dynamic configs (topic_configs.py, broker_configs.py,
incremental_configs.py: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and the
change listeners that apply them), client quotas (client_quota_apis.py), SCRAM users
(scram_apis.py) and DescribeProducers (describe_producers.py).
"""
