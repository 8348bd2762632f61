package dev.delayd.example;

import dev.delayd.client.Dedup;
import dev.delayd.client.ReadyRecord;
import dev.delayd.client.Records;
import dev.delayd.client.ReportOptions;
import dev.delayd.client.Status;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.stereotype.Component;

/**
 * Works off the reminders' ready topic: for each ready record it reports running, sends the
 * reminder, and reports finished (or failed, with the error), each report keyed by the job-id and
 * echoing the record's attempt. The listener returns once Kafka has the outcome's report, and
 * Spring then commits the record's offset (ack-mode record). A record read again (a rebalance, a
 * restart before the commit) is not sent twice: {@link Dedup} remembers the deliveries done.
 */
@Component
public class ReadyListener {
    private final KafkaTemplate<byte[], byte[]> kafka;
    private final RemindersProperties topics;
    private final ReminderSender sender;
    private final Dedup dedup = new Dedup();

    public ReadyListener(KafkaTemplate<byte[], byte[]> kafka, RemindersProperties topics, ReminderSender sender) {
        this.kafka = kafka;
        this.topics = topics;
        this.sender = sender;
    }

    @KafkaListener(topics = "${reminders.ready-topic}")
    public void onReady(ConsumerRecord<byte[], byte[]> record) {
        if (!ReadyRecord.isReady(record)) {
            return; // not one of delayd's ready records
        }
        ReadyRecord ready = ReadyRecord.of(record);
        if (dedup.seen(ready)) {
            return; // done and reported already
        }
        report(ready, Status.RUNNING, new ReportOptions());
        try {
            sender.send(ready, new String(record.value(), StandardCharsets.UTF_8));
        } catch (RuntimeException e) {
            report(ready, Status.FAILED, new ReportOptions().error(e.getClass().getSimpleName() + ": " + e.getMessage()));
            dedup.remember(ready);
            return;
        }
        report(ready, Status.FINISHED, new ReportOptions());
        dedup.remember(ready);
    }

    /** Reports on the ready record and waits until Kafka has the report. */
    private void report(ReadyRecord ready, String status, ReportOptions options) {
        try {
            kafka.send(Records.reportRecord(ready.headers(), status, options)
                    .toProducerRecord(topics.ingestTopic(), topics.statusTopic())).get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while reporting " + ready.jobId(), e);
        } catch (ExecutionException e) {
            throw new IllegalStateException("Kafka did not take the report on " + ready.jobId(), e.getCause());
        }
    }
}
