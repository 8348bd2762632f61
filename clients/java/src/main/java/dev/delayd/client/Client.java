package dev.delayd.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Publishes delayd's records through a kafka-clients producer. Each call checks its arguments
 * first ({@link ContractException}, with delayd's own message, before anything is sent), produces
 * the record, and returns the {@link DelaydRecord} it sent; {@link #flush} waits until Kafka has
 * them all and throws {@link DeliveryException} if it refused one. Safe for concurrent use, as
 * kafka-clients' producer is.
 *
 * <pre>{@code
 * try (Client client = new Client("127.0.0.1:19092")) {
 *     client.schedule("orders", "charge order 42", new ScheduleOptions().delay(Duration.ofMinutes(1)).jobId("order-42"));
 *     client.reschedule("order-42", When.delay(Duration.ofSeconds(5)));
 *     client.flush();
 * }
 * }</pre>
 */
public final class Client implements AutoCloseable {
    private final Producer<byte[], byte[]> producer;
    private final boolean owned;
    private final String ingestTopic, statusTopic;
    private final List<Exception> errors = new ArrayList<>();

    /** A client with a producer of its own for the brokers in bootstrap (comma-separated host:port). */
    public Client(String bootstrap) {
        this(bootstrap, new ClientOptions());
    }

    /** A client with a producer of its own, made from {@link #producerConfig} and the options' settings. */
    public Client(String bootstrap, ClientOptions options) {
        Map<String, Object> config = producerConfig(bootstrap);
        config.putAll(options.producerConfig);
        this.producer = new KafkaProducer<>(config);
        this.owned = true;
        this.ingestTopic = options.ingestTopic;
        this.statusTopic = options.statusTopic;
    }

    /**
     * A client that produces through producer, which the caller keeps and closes. Give it the
     * settings of {@link #producerConfig}: idempotence keeps a job's records in order, and
     * {@link LibrdkafkaPartitioner} puts them in the partition other clients put them in.
     */
    public Client(Producer<byte[], byte[]> producer, ClientOptions options) {
        this.producer = producer;
        this.owned = false;
        this.ingestTopic = options.ingestTopic;
        this.statusTopic = options.statusTopic;
    }

    /**
     * The producer settings delayd's records want: byte arrays, idempotence with acks=all (a
     * job's records in the order of the calls, none twice), and {@link LibrdkafkaPartitioner}.
     */
    public static Map<String, Object> producerConfig(String bootstrap) {
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.PARTITIONER_CLASS_CONFIG, LibrdkafkaPartitioner.class.getName());
        return config;
    }

    /** The producer the client sends through. */
    public Producer<byte[], byte[]> producer() {
        return producer;
    }

    /** The deployment's kafka.ingest_topic this client writes to. */
    public String ingestTopic() {
        return ingestTopic;
    }

    /** The deployment's kafka.status_topic this client writes to. */
    public String statusTopic() {
        return statusTopic;
    }

    /** Sends a record built by {@link Records}; {@link #flush} says whether Kafka took it. */
    public DelaydRecord send(DelaydRecord record) {
        producer.send(record.toProducerRecord(ingestTopic, statusTopic), (metadata, e) -> {
            if (e != null) {
                synchronized (errors) {
                    errors.add(e);
                }
            }
        });
        return record;
    }

    /** Schedules value for business (see {@link ScheduleOptions}: the time, job-id, repeats, ...). */
    public DelaydRecord schedule(String business, byte[] value, ScheduleOptions options) {
        return send(Records.scheduleRecord(business, value, options));
    }

    /** schedule with a text value, sent as UTF-8. */
    public DelaydRecord schedule(String business, String value, ScheduleOptions options) {
        return schedule(business, value == null ? null : value.getBytes(StandardCharsets.UTF_8), options);
    }

    /** Cancels the job jobId. */
    public DelaydRecord cancel(String jobId) {
        return send(Records.cancelRecord(jobId));
    }

    /** Moves the waiting job jobId to {@link When#at} an instant, or {@link When#delay} after this record. */
    public DelaydRecord reschedule(String jobId, When... when) {
        return send(Records.rescheduleRecord(jobId, when));
    }

    /**
     * Reports status ({@link Status#RUNNING}, FINISHED, FAILED) about a ready record, echoing its
     * job-id and attempt, so that a report about an earlier delivery cannot settle a later one.
     */
    public DelaydRecord report(ConsumerRecord<?, ?> ready, String status, ReportOptions options) {
        return send(Records.reportRecord(ReadyRecord.headersOf(ready), status, options));
    }

    /** report without options. */
    public DelaydRecord report(ConsumerRecord<?, ?> ready, String status) {
        return report(ready, status, new ReportOptions());
    }

    /**
     * Waits until Kafka has acknowledged every record sent; DeliveryException if it did not take
     * some (each is reported once).
     */
    public void flush() {
        producer.flush();
        List<Exception> failed;
        synchronized (errors) {
            failed = List.copyOf(errors);
            errors.clear();
        }
        if (!failed.isEmpty()) {
            throw new DeliveryException(failed);
        }
    }

    /** Closes the producer the client made (not one given to it), after sending what it holds. */
    @Override
    public void close() {
        if (owned) {
            producer.close();
        }
    }
}
