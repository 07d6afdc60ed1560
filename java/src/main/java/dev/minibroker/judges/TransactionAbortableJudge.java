package dev.minibroker.judges;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client (3.x: transaction version 1, Produce v11, which knows
 * TRANSACTION_ABORTABLE) as the judge of a write outside its transaction (KIP-890):
 * {@code TransactionAbortableJudge BOOTSTRAP TOPIC TRANSACTIONAL_ID}.
 *
 * <p>A transactional KafkaProducer writes "first" to partition 0 and prints one JSON line
 * with its producer id and epoch (from DescribeTransactions) and the coordinator's id;
 * the test then ends that transaction under it (an EndTxn abort at the same epoch, as a
 * coordinator-side end would) and writes a line to stdin. The producer's next record to
 * partition 0 would open a transaction nobody ends; the broker refuses it. The judge
 * reports what the send failed with, then aborts, commits "after" in a new transaction
 * and reads partition 0 read_committed. Its last stdout line is the report.</p>
 */
public final class TransactionAbortableJudge {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Duration POLL = Duration.ofMillis(200);
    static final long READ_DEADLINE_MS = 60_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String transactionalId = args[2];
        SentVersions produces = SentVersions.watch("PRODUCE");
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        ObjectNode report = JSON.createObjectNode();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props);
                Admin admin = Admin.create(adminProps(bootstrap))) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "first")).get();
            TransactionDescription described = admin.describeTransactions(List.of(transactionalId))
                    .description(transactionalId).get();
            ObjectNode ready = JSON.createObjectNode();
            ready.put("producer_id", described.producerId());
            ready.put("producer_epoch", described.producerEpoch());
            ready.put("coordinator", described.coordinatorId());
            System.out.println(JSON.writeValueAsString(ready));
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();

            try {
                producer.send(new ProducerRecord<>(topic, 0, null, "stray")).get();
                report.put("send_error", "none");
            } catch (ExecutionException e) {
                report.put("send_error", e.getCause().getClass().getSimpleName());
            }
            try {
                producer.commitTransaction();
                report.put("commit_error", "none");
            } catch (KafkaException e) {
                report.put("commit_error", e.getClass().getSimpleName());
            }
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "after")).get();
            producer.commitTransaction();
        }
        report.set("read_committed", readCommitted(bootstrap, topic));
        ArrayNode versions = report.putArray("produce_versions");
        produces.versions().forEach(versions::add);
        System.out.println(JSON.writeValueAsString(report));
    }

    static Properties adminProps(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return props;
    }

    /** Partition 0's values read_committed, up to its last stable offset. */
    static ArrayNode readCommitted(String bootstrap, String topic) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        ArrayNode values = JSON.createArrayNode();
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + READ_DEADLINE_MS;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                    values.add(record.value());
                }
            }
        }
        return values;
    }
}
