package dev.delayd.client;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * What delayd wrote on a ready record (docs/consuming.md, "The ready record"): the job's id, the
 * delivery attempt (from 1), the due time, the business, and for a repeating job the occurrence
 * (from 1). delayd appends these after the producer's headers, and the first header of a name is
 * the one that counts.
 *
 * <pre>{@code
 * ReadyRecord ready = ReadyRecord.of(consumerRecord);
 * if (!dedup.seen(ready)) { work(consumerRecord.value()); client.report(consumerRecord, Status.FINISHED); dedup.remember(ready); }
 * }</pre>
 *
 * @param jobId     header job-id
 * @param attempt   header attempt; 0 when absent or not a number
 * @param deliverAt header deliver-at (epoch ms); null when absent or not a number
 * @param business  header business; null when absent
 * @param repeat    header repeat, the occurrence of a repeating job; 0 for a job that does not repeat
 * @param headers   every header of the record, in order
 */
public record ReadyRecord(String jobId, long attempt, Instant deliverAt, String business, long repeat,
        List<Header> headers) {
    public ReadyRecord {
        headers = List.copyOf(headers);
    }

    /** A Kafka record's headers as this package's Header list, in order. */
    public static List<Header> headersOf(ConsumerRecord<?, ?> record) {
        List<Header> out = new ArrayList<>();
        for (org.apache.kafka.common.header.Header h : record.headers()) {
            out.add(new Header(h.key(), h.value()));
        }
        return out;
    }

    /** Whether record is one of delayd's ready records: it has a job-id. */
    public static boolean isReady(ConsumerRecord<?, ?> record) {
        return Records.headerOf(headersOf(record), Contract.JOB_ID) != null;
    }

    /** The delayd headers of record; IllegalArgumentException when it has no job-id (not delayd's). */
    public static ReadyRecord of(ConsumerRecord<?, ?> record) {
        return of(headersOf(record));
    }

    /** The delayd headers among headers; IllegalArgumentException when there is no job-id. */
    public static ReadyRecord of(List<Header> headers) {
        String jobId = Records.headerOf(headers, Contract.JOB_ID);
        if (jobId == null) {
            throw new IllegalArgumentException("not a ready record of delayd's: no header 'job-id'");
        }
        long deliverAt = decimalOr(Records.headerOf(headers, Contract.DELIVER_AT), Contract.MAX_EPOCH_MS, -1);
        return new ReadyRecord(jobId, decimalOr(Records.headerOf(headers, Contract.ATTEMPT), Contract.MAX_ATTEMPT, 0),
                deliverAt < 0 ? null : Instant.ofEpochMilli(deliverAt), Records.headerOf(headers, Contract.BUSINESS),
                decimalOr(Records.headerOf(headers, Contract.REPEAT), Long.MAX_VALUE, 0), headers);
    }

    /** The first header called name as text, or null. */
    public String header(String name) {
        return Records.headerOf(headers, name);
    }

    /**
     * What names one delivery: the job-id, the occurrence and its time (a repeating job's attempts
     * start at 1 for each occurrence, and a job-id used again after its job ended starts at 1
     * again, at another time), and the attempt. The same record read twice has the same key; a
     * retry, a redelivery after an ack timeout or delayd's own duplicate after a crash has a higher
     * attempt, and so another key.
     */
    public String deliveryKey() {
        return jobId + ' ' + (deliverAt == null ? "-" : deliverAt.toEpochMilli()) + ' ' + repeat + ' ' + attempt;
    }

    /** A header's decimal value up to limit, or otherwise when it is absent or no such number. */
    private static long decimalOr(String text, long limit, long otherwise) {
        long v = text == null ? -1 : Texts.decimal(text, limit);
        return v < 0 ? otherwise : v;
    }
}
