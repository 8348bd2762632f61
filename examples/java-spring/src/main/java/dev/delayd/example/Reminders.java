package dev.delayd.example;

import dev.delayd.client.DelaydRecord;
import dev.delayd.client.Records;
import dev.delayd.client.ScheduleOptions;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.concurrent.ExecutionException;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.stereotype.Service;

/**
 * Schedules and cancels reminders. delayd's Java client builds and checks each record (a bad
 * job-id or time fails here, with delayd's own message, not as a dead letter); Spring's
 * KafkaTemplate sends it to the ingest topic.
 */
@Service
public class Reminders {
    private final KafkaTemplate<byte[], byte[]> kafka;
    private final RemindersProperties topics;

    public Reminders(KafkaTemplate<byte[], byte[]> kafka, RemindersProperties topics) {
        this.kafka = kafka;
        this.topics = topics;
    }

    /** A reminder of order orderId at the instant at; the job-id is the reminder's id. Returns once Kafka has it. */
    public DelaydRecord schedule(String orderId, Instant at, String text) {
        DelaydRecord record = Records.scheduleRecord(topics.business(), text.getBytes(StandardCharsets.UTF_8),
                new ScheduleOptions().at(at).jobId("reminder-" + orderId).header("order-id", orderId));
        return send(record);
    }

    /** Cancels the reminder of order orderId, if it has not been delivered. */
    public DelaydRecord cancel(String orderId) {
        return send(Records.cancelRecord("reminder-" + orderId));
    }

    DelaydRecord send(DelaydRecord record) {
        try {
            kafka.send(record.toProducerRecord(topics.ingestTopic(), topics.statusTopic())).get();
            return record;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while Kafka took " + record, e);
        } catch (ExecutionException e) {
            throw new IllegalStateException("Kafka did not take " + record, e.getCause());
        }
    }
}
