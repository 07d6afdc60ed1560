package dev.minibroker.judges4;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client 4.x as a judge of transaction version 2 (KIP-890 part 2):
 * {@code TransactionsV2Judge BOOTSTRAP TOPIC GROUP TRANSACTIONS}.
 *
 * <p>A transactional KafkaProducer writes {@code RECORDS_PER_PARTITION} records to each
 * of the topic's first two partitions per transaction, sends offsets of GROUP in the ones
 * it commits, commits two of every three transactions and aborts the third. After each
 * one the Admin client's DescribeTransactions gives the id's producer epoch. Then a
 * read_committed KafkaConsumer reads both partitions to their last stable offset, and
 * DescribeProducers gives the epoch of the producer's last marker in each partition.
 * Prints one JSON object on its last stdout line: the epochs, what was committed and
 * read, the group's committed offset.</p>
 */
public final class TransactionsV2Judge {
    static final int RECORDS_PER_PARTITION = 5;
    static final int PARTITIONS = 2;
    static final Duration POLL = Duration.ofMillis(200);
    static final long READ_DEADLINE_MS = 60_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        int transactions = Integer.parseInt(args[3]);
        String transactionalId = "judge4-" + topic;
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            partitions.add(new TopicPartition(topic, p));
        }

        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);

        List<Integer> epochs = new ArrayList<>();
        List<String> outcomes = new ArrayList<>();
        Set<String> committed = new TreeSet<>();
        long producerId;
        long lastOffsetCommitted = -1;
        try (Admin admin = Admin.create(adminProps);
                KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            producer.initTransactions();
            producerId = describe(admin, transactionalId).producerId();
            epochs.add(describe(admin, transactionalId).producerEpoch());
            for (int t = 0; t < transactions; t++) {
                boolean commit = t % 3 != 1;
                producer.beginTransaction();
                List<String> values = new ArrayList<>();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (TopicPartition tp : partitions) {
                    for (int r = 0; r < RECORDS_PER_PARTITION; r++) {
                        String value = "t" + t + "-p" + tp.partition() + "-r" + r;
                        values.add(value);
                        sent.add(producer.send(
                                new ProducerRecord<>(topic, tp.partition(), "k" + r, value)));
                    }
                }
                for (Future<RecordMetadata> f : sent) {
                    f.get();
                }
                if (commit) {
                    lastOffsetCommitted = t + 1;
                    producer.sendOffsetsToTransaction(
                            Map.of(partitions.get(0), new OffsetAndMetadata(lastOffsetCommitted)),
                            new ConsumerGroupMetadata(group));
                    producer.commitTransaction();
                    committed.addAll(values);
                } else {
                    producer.abortTransaction();
                }
                outcomes.add(commit ? "commit" : "abort");
                epochs.add(describe(admin, transactionalId).producerEpoch());
            }

            List<String> read = readCommitted(bootstrap, partitions, committed.size());
            // the offsets count once the commit's marker reaches __consumer_offsets
            OffsetAndMetadata groupOffset = null;
            long offsetsDeadline = System.currentTimeMillis() + READ_DEADLINE_MS;
            while (System.currentTimeMillis() < offsetsDeadline) {
                groupOffset = admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata().get().get(partitions.get(0));
                if (groupOffset != null && groupOffset.offset() == lastOffsetCommitted) {
                    break;
                }
                Thread.sleep(POLL.toMillis());
            }
            List<Integer> markerEpochs = new ArrayList<>();
            Map<TopicPartition, List<ProducerState>> producers = new HashMap<>();
            for (TopicPartition tp : partitions) {
                producers.put(tp, admin.describeProducers(List.of(tp)).partitionResult(tp).get()
                        .activeProducers());
            }
            for (TopicPartition tp : partitions) {
                for (ProducerState state : producers.get(tp)) {
                    if (state.producerId() == producerId) {
                        markerEpochs.add(state.producerEpoch());
                    }
                }
            }

            StringBuilder json = new StringBuilder("{");
            json.append("\"producer_id\": ").append(producerId);
            json.append(", \"epochs\": ").append(epochs);
            json.append(", \"outcomes\": ").append(quoted(outcomes));
            json.append(", \"marker_epochs\": ").append(markerEpochs);
            json.append(", \"committed_records\": ").append(committed.size());
            json.append(", \"read_records\": ").append(read.size());
            json.append(", \"read_distinct\": ").append(new TreeSet<>(read).size());
            json.append(", \"read_exactly_committed\": ")
                    .append(new TreeSet<>(read).equals(committed) && read.size() == committed.size());
            json.append(", \"group_offset_expected\": ").append(lastOffsetCommitted);
            json.append(", \"group_offset\": ")
                    .append(groupOffset == null ? -1 : groupOffset.offset());
            json.append("}");
            System.out.println(json);
        }
    }

    static TransactionDescription describe(Admin admin, String transactionalId) throws Exception {
        return admin.describeTransactions(List.of(transactionalId))
                .description(transactionalId).get();
    }

    /** Every value a read_committed consumer reads from the partitions' beginnings, once
     *  it has read {@code expected} and reached their last stable offsets (the end
     *  offsets at that isolation level: the last markers may still be on their way). */
    static List<String> readCommitted(
            String bootstrap, Collection<TopicPartition> partitions, int expected) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.currentTimeMillis() + READ_DEADLINE_MS;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                    values.add(record.value());
                }
                if (values.size() < expected) {
                    continue;
                }
                Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
                boolean done = true;
                for (TopicPartition tp : partitions) {
                    done &= consumer.position(tp) >= end.get(tp);
                }
                if (done) {
                    break;
                }
            }
        }
        return values;
    }

    static String quoted(List<String> items) {
        List<String> out = new ArrayList<>();
        for (String item : items) {
            out.add("\"" + item + "\"");
        }
        return out.toString();
    }
}
