package dev.delayd.client;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;

/**
 * Works off the ready records a consumer reads, with status reports (docs/consuming.md, "Job
 * lifecycle"): for each one it reports running, calls the handler, and reports finished, or
 * failed with the handler's exception ({@link Retry}: with its retry time). The record's offset is
 * committed once Kafka has the reports.
 *
 * <pre>{@code
 * try (Client client = new Client(bootstrap);
 *      KafkaConsumer<byte[], byte[]> consumer = Consumers.create(bootstrap, "orders-workers")) {
 *     consumer.subscribe(List.of("ready.orders"));
 *     Work.work(client, consumer, ready -> charge(ready.value()), new WorkOptions().heartbeat(Duration.ofSeconds(10)));
 * }
 * }</pre>
 */
public final class Work {
    private Work() {}

    /**
     * Runs handler over the records consumer reads (subscribed to the ready topics, with
     * enable.auto.commit false: {@link Consumers} makes one) in the calling thread, until
     * options' count records are done or its stop says so, or consumer.wakeup() is called;
     * returns the number done. Records read but not done then are sought back to, so that the
     * consumer (or the group) reads them again. A report Kafka did not take, or a commit that
     * failed, ends it with that exception, the record not committed. A handler that runs longer
     * than the consumer's max.poll.interval.ms (5 min by default) loses its partitions.
     */
    public static int work(Client client, Consumer<byte[], byte[]> consumer, Handler handler, WorkOptions options) {
        int done = 0;
        ScheduledExecutorService beats = options.heartbeat == null ? null
                : Executors.newSingleThreadScheduledExecutor(r -> {
                    Thread t = new Thread(r, "delayd-heartbeat");
                    t.setDaemon(true);
                    return t;
                });
        try {
            while ((options.count == 0 || done < options.count) && !options.stop.getAsBoolean()) {
                List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
                try {
                    consumer.poll(options.pollTimeout).forEach(records::add);
                } catch (WakeupException e) {
                    break;
                }
                for (int i = 0; i < records.size(); i++) {
                    ConsumerRecord<byte[], byte[]> r = records.get(i);
                    if ((options.count > 0 && done >= options.count) || options.stop.getAsBoolean()) {
                        rewind(consumer, records.subList(i, records.size()));
                        return done;
                    }
                    if (!ReadyRecord.isReady(r)) {
                        continue; // not one of delayd's ready records
                    }
                    try {
                        workOne(client, consumer, r, handler, beats, options);
                    } catch (RuntimeException e) {
                        rewind(consumer, records.subList(i, records.size()));
                        throw e;
                    }
                    done++;
                }
            }
        } finally {
            if (beats != null) {
                beats.shutdownNow();
            }
        }
        return done;
    }

    private static void workOne(Client client, Consumer<byte[], byte[]> consumer, ConsumerRecord<byte[], byte[]> r,
            Handler handler, ScheduledExecutorService beats, WorkOptions options) {
        client.report(r, Status.RUNNING);
        client.flush();
        ScheduledFuture<?> beat = null;
        if (beats != null) {
            long every = options.heartbeat.toMillis();
            // A lost heartbeat is not the job's failure: the next one follows.
            beat = beats.scheduleAtFixedRate(() -> client.producer().send(Records.reportRecord(
                    ReadyRecord.headersOf(r), Status.RUNNING).toProducerRecord(client.ingestTopic(),
                    client.statusTopic())), every, every, TimeUnit.MILLISECONDS);
        }
        String status = Status.FINISHED;
        ReportOptions outcome = new ReportOptions();
        try {
            handler.handle(r);
        } catch (Retry e) {
            status = Status.FAILED;
            outcome.error(e.getMessage() == null ? "retry" : e.getMessage());
            if (e.after() != null) {
                outcome.retryAfter(e.after());
            }
        } catch (Exception e) { // the handler's failure is the job's, reported to delayd
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            status = Status.FAILED;
            String name = e.getClass().getSimpleName();
            outcome.error(e.getMessage() == null ? name : name + ": " + e.getMessage());
        } finally {
            if (beat != null) {
                beat.cancel(false);
                awaitBeats(beats); // the last running report goes before the outcome
            }
        }
        client.report(r, status, outcome);
        client.flush();
        consumer.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1)));
    }

    /** Waits until a heartbeat running on beats (one thread) has been sent. */
    private static void awaitBeats(ScheduledExecutorService beats) {
        try {
            beats.submit(() -> {}).get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Seeks each partition still assigned back to the first of records (not done), so that they
     * are read again (a partition taken away meanwhile is read from its committed offset by its
     * new owner).
     */
    private static void rewind(Consumer<byte[], byte[]> consumer, List<ConsumerRecord<byte[], byte[]>> records) {
        Map<TopicPartition, Long> first = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            first.merge(new TopicPartition(r.topic(), r.partition()), r.offset(), Math::min);
        }
        first.keySet().retainAll(consumer.assignment());
        first.forEach(consumer::seek);
    }
}
