package dev.delayd.client;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * One Kafka record as a client sends it: the role of its topic, its key, its headers in the order
 * they are sent, its value (a null key or value is a null one). Equal when every part is, bytes
 * compared by content.
 */
public record DelaydRecord(Topic topic, byte[] key, List<Header> headers, byte[] value) {
    public DelaydRecord {
        Objects.requireNonNull(topic, "topic");
        headers = List.copyOf(headers);
    }

    /** The first header called name as text, or null (see {@link Records#headerOf}). */
    public String header(String name) {
        return Records.headerOf(headers, name);
    }

    /**
     * This record for kafka-clients, to the topic of its role: ingestTopic or statusTopic, the
     * deployment's kafka.ingest_topic and kafka.status_topic (for a KafkaTemplate, say).
     */
    public ProducerRecord<byte[], byte[]> toProducerRecord(String ingestTopic, String statusTopic) {
        RecordHeaders kafkaHeaders = new RecordHeaders();
        for (Header h : headers) {
            kafkaHeaders.add(new RecordHeader(h.key(), h.value()));
        }
        String name = topic == Topic.INGEST ? ingestTopic : statusTopic;
        return new ProducerRecord<>(name, null, key, value, kafkaHeaders);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof DelaydRecord r && topic == r.topic && Arrays.equals(key, r.key)
                && headers.equals(r.headers) && Arrays.equals(value, r.value);
    }

    @Override
    public int hashCode() {
        return Objects.hash(topic, Arrays.hashCode(key), headers, Arrays.hashCode(value));
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("topic ").append(topic.role())
                .append(" key ").append(key == null ? "null" : Texts.quote(key))
                .append(" value ").append(value == null ? "null" : Texts.quote(value))
                .append(" headers");
        for (Header h : headers) {
            b.append(' ').append(h);
        }
        return b.toString();
    }
}
