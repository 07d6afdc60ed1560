package dev.minibroker.judges;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka's Admin client as a judge: {@code AdminJudge BOOTSTRAP TOPIC} makes each Admin
 * call an operator's tooling makes, in an order where each has something to act on, and
 * prints one JSON object: per call "ok" or the exception's class and message, plus what
 * some calls returned. The Python test (tests/judges/test_java_client.py) holds each
 * call to what minibroker serves; the calls of APIs not served yet are reported too, so
 * serving one shows up as a change there.
 */
public final class AdminJudge {
    interface Call {
        Object run() throws Exception;
    }

    static ObjectNode calls = ClientJudge.JSON.createObjectNode();
    static ObjectNode values = ClientJudge.JSON.createObjectNode();

    static Object call(String name, Call body) {
        try {
            Object result = body.run();
            calls.put(name, "ok");
            return result;
        } catch (ExecutionException exc) {
            Throwable cause = exc.getCause();
            calls.put(name, cause.getClass().getSimpleName() + ": " + cause.getMessage());
        } catch (Exception exc) {
            calls.put(name, exc.getClass().getSimpleName() + ": " + exc.getMessage());
        }
        return null;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = topic + "-group";
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        TopicPartition p0 = new TopicPartition(topic, 0);
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = Admin.create(props)) {
            call("createTopics", () -> {
                NewTopic created = new NewTopic(topic, 2, (short) 3)
                        .configs(Map.of("retention.ms", "3600000"));
                var result = admin.createTopics(List.of(created));
                values.put("created_partitions", result.numPartitions(topic).get());
                Config config = result.config(topic).get();
                values.put("created_retention_ms", config.get("retention.ms").value());
                return null;
            });
            try (KafkaProducer<byte[], byte[]> producer =
                    new KafkaProducer<>(ClientJudge.producerProps(bootstrap))) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, ClientJudge.bytes("v" + i)));
                }
            }
            call("listTopics", () -> {
                values.put("listed", admin.listTopics().names().get().contains(topic));
                return null;
            });
            call("describeTopics", () -> {
                DescribeTopicsOptions options =
                        new DescribeTopicsOptions().includeAuthorizedOperations(true);
                TopicDescription d = admin.describeTopics(List.of(topic), options)
                        .allTopicNames().get().get(topic);
                values.put("described_partitions", d.partitions().size());
                values.put("described_operations", d.authorizedOperations().size());
                return null;
            });
            call("describeCluster", () -> {
                var cluster = admin.describeCluster(
                        new DescribeClusterOptions().includeAuthorizedOperations(true));
                values.put("cluster_nodes", cluster.nodes().get().size());
                values.put("cluster_has_controller", cluster.controller().get() != null);
                values.put("cluster_id_set", !cluster.clusterId().get().isEmpty());
                values.put("cluster_operations", cluster.authorizedOperations().get().size());
                return null;
            });
            call("describeConfigs", () -> {
                ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
                var found = admin.describeConfigs(List.of(topicResource, broker)).all().get();
                values.put("config_retention_ms", found.get(topicResource).get("retention.ms").value());
                values.put("broker_config_entries", found.get(broker).entries().size());
                return null;
            });
            call("alterConfigs", () -> {
                Config config = new Config(List.of(new ConfigEntry("retention.ms", "7200000")));
                @SuppressWarnings("deprecation")
                var altered = admin.alterConfigs(Map.of(topicResource, config));
                return altered.all().get();
            });
            call("incrementalAlterConfigs", () -> admin.incrementalAlterConfigs(Map.of(
                    topicResource,
                    List.of(new AlterConfigOp(
                            new ConfigEntry("retention.ms", "9000000"), AlterConfigOp.OpType.SET))))
                    .all().get());
            call("createPartitions", () ->
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get());
            call("deleteRecords", () ->
                    admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(2))).all().get());
            call("listOffsets", () -> {
                var latest = admin.listOffsets(Map.of(p0, OffsetSpec.latest())).all().get();
                var earliest = admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).all().get();
                values.put("latest_offset", latest.get(p0).offset());
                values.put("earliest_offset", earliest.get(p0).offset());
                return null;
            });
            call("describeLogDirs", () -> {
                var dirs = admin.describeLogDirs(List.of(1, 2, 3)).allDescriptions().get();
                values.put("log_dir_brokers", dirs.size());
                return null;
            });
            call("describeReplicaLogDirs", () -> admin.describeReplicaLogDirs(
                    List.of(new TopicPartitionReplica(topic, 0, 1))).all().get());
            call("electLeaders", () -> {
                try {
                    return admin.electLeaders(ElectionType.PREFERRED, Set.of(p0)).all().get();
                } catch (ExecutionException exc) {
                    // already led by its preferred replica: what Kafka answers then
                    if (exc.getCause() instanceof org.apache.kafka.common.errors.ElectionNotNeededException) {
                        return null;
                    }
                    throw exc;
                }
            });
            call("alterPartitionReassignments", () -> admin.alterPartitionReassignments(Map.of(
                    new TopicPartition(topic, 1),
                    Optional.of(new NewPartitionReassignment(List.of(3, 1, 2))))).all().get());
            call("listPartitionReassignments", () ->
                    admin.listPartitionReassignments().reassignments().get());
            call("alterConsumerGroupOffsets", () -> admin.alterConsumerGroupOffsets(
                    group, Map.of(p0, new OffsetAndMetadata(4))).all().get());
            call("listConsumerGroups", () -> {
                Collection<?> groups = admin.listConsumerGroups().all().get();
                values.put("groups_listed", groups.size());
                return null;
            });
            call("describeConsumerGroups", () -> {
                ConsumerGroupDescription d =
                        admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                values.put("group_state", d.state().toString());
                return null;
            });
            call("listConsumerGroupOffsets", () -> {
                var offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                values.put("group_offset", offsets.get(p0).offset());
                return null;
            });
            call("deleteConsumerGroupOffsets", () ->
                    admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all().get());
            call("deleteConsumerGroups", () -> admin.deleteConsumerGroups(List.of(group)).all().get());
            call("describeAcls", () -> admin.describeAcls(AclBindingFilter.ANY).values().get());
            call("describeProducers", () -> admin.describeProducers(List.of(p0)).all().get());
            call("listTransactions", () -> admin.listTransactions().all().get());
            call("deleteTopics", () -> admin.deleteTopics(List.of(topic)).all().get());
        }
        ObjectNode report = ClientJudge.JSON.createObjectNode();
        report.set("calls", calls);
        report.set("values", values);
        System.out.println(ClientJudge.JSON.writeValueAsString(report));
        System.exit(0);
    }
}
