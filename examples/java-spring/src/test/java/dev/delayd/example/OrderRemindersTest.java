package dev.delayd.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.delayd.client.Consumers;
import dev.delayd.client.Header;
import dev.delayd.client.ReadyRecord;
import dev.delayd.client.Records;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.DisabledIfSystemProperty;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Primary;

/**
 * The service against a real delayd on the local stack (tests/examples/java_spring_test.sh starts
 * delayd and gives the topics as -Dreminders.*): it schedules five reminders through the
 * KafkaTemplate and cancels a sixth; the @KafkaListener must send each of the five once, never
 * before its time, with the order's header carried, and report it; the status topic must then
 * hold running and finished for each, keyed by its job-id with attempt 1 echoed, and delayd's
 * Redis (delayctl get) must show the five finished and the sixth cancelled.
 */
@SpringBootTest
@DisabledIfSystemProperty(named = "delayd.fetchOnly", matches = "true",
        disabledReason = "scripts/maven.sh fetch: compiled and loaded, not run (no stack)")
class OrderRemindersTest {
    private static final int REMINDERS = 5;

    /** The work, recorded: each reminder sent, and when. */
    static final class RecordingSender extends ReminderSender {
        final Map<String, List<Long>> sentAt = new ConcurrentHashMap<>();
        final Map<String, ReadyRecord> ready = new ConcurrentHashMap<>();

        @Override
        public void send(ReadyRecord r, String text) {
            long now = System.currentTimeMillis();
            super.send(r, text);
            sentAt.computeIfAbsent(r.jobId(), id -> new ArrayList<>()).add(now);
            ready.put(r.jobId(), r);
        }
    }

    @TestConfiguration
    static class Recording {
        @Bean
        @Primary
        RecordingSender recordingSender() {
            return new RecordingSender();
        }
    }

    @Autowired
    Reminders reminders;
    @Autowired
    RecordingSender sender;
    @Autowired
    RemindersProperties topics;
    @Value("${spring.kafka.bootstrap-servers}")
    String bootstrap;

    private static void waitFor(String what, BooleanSupplier cond, Duration limit) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!cond.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(100);
        }
    }

    /** The job's state in Redis, as `delayctl get` prints it. */
    private static String state(String jobId) {
        try {
            Process p = new ProcessBuilder(System.getProperty("reminders.test.delayctl"), "get", jobId)
                    .redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            Matcher m = Pattern.compile("\"state\": \"([a-z]+)\"").matcher(out);
            return p.waitFor() == 0 && m.find() ? m.group(1) : "";
        } catch (IOException e) {
            throw new IllegalStateException("delayctl get " + jobId, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "";
        }
    }

    @Test
    void remindersAreSentOnTimeOnceAndReported() throws InterruptedException {
        String run = "o" + System.nanoTime();
        Instant t0 = Instant.now();
        Map<String, Instant> due = new HashMap<>();
        for (int i = 0; i < REMINDERS; i++) {
            Instant at = t0.plusMillis(2000 + 250L * i);
            due.put("reminder-" + run + "-" + i, at);
            reminders.schedule(run + "-" + i, at, "your order " + run + "-" + i + " ships today");
        }
        String cancelled = "reminder-" + run + "-cancelled";
        reminders.schedule(run + "-cancelled", t0.plusMillis(2500), "never sent");
        reminders.cancel(run + "-cancelled");

        waitFor(REMINDERS + " reminders sent", () -> sender.sentAt.keySet().containsAll(due.keySet()),
                Duration.ofSeconds(60));
        // The cancelled reminder was due 2.5 s after t0: by now it would have come.
        Thread.sleep(Math.max(0, t0.plusMillis(4000).toEpochMilli() - System.currentTimeMillis()));
        assertEquals(due.keySet(), sender.sentAt.keySet(), "the reminders sent: the five, not the cancelled one");

        long maxLate = 0;
        for (Map.Entry<String, Instant> e : due.entrySet()) {
            String job = e.getKey();
            List<Long> sent = sender.sentAt.get(job);
            ReadyRecord r = sender.ready.get(job);
            assertEquals(1, sent.size(), job + ": sent once");
            Instant at = e.getValue(); // a part of a millisecond rounds up: never early
            long atMs = at.toEpochMilli() + (at.getNano() % 1_000_000 == 0 ? 0 : 1);
            assertEquals(atMs, r.deliverAt().toEpochMilli(), job + ": its deliver-at");
            long late = sent.get(0) - r.deliverAt().toEpochMilli();
            assertTrue(late >= 0, job + ": sent " + late + " ms after its deliver-at: early");
            maxLate = Math.max(maxLate, late);
            assertEquals(1, r.attempt(), job + ": attempt");
            assertEquals(topics.business(), r.business(), job + ": business");
            assertEquals(job.substring("reminder-".length()), r.header("order-id"), job + ": the order's header");
        }

        // The listener's reports, as Kafka has them: running then finished, attempt 1, keyed by the job-id.
        Map<String, List<String>> reports = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = Consumers.create(bootstrap, run + ".reports")) {
            c.subscribe(List.of(topics.statusTopic()));
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (reports.values().stream().mapToInt(List::size).sum() < 2 * REMINDERS && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    List<Header> h = ReadyRecord.headersOf(r);
                    String job = Records.headerOf(h, "job-id");
                    if (due.containsKey(job)) {
                        assertEquals(job, new String(r.key(), StandardCharsets.UTF_8), "a report's key");
                        reports.computeIfAbsent(job, id -> new ArrayList<>())
                                .add(Records.headerOf(h, "status") + "/" + Records.headerOf(h, "attempt"));
                    }
                }
            }
        }
        for (String job : due.keySet()) {
            assertEquals(List.of("running/1", "finished/1"), reports.get(job), job + ": its reports");
        }

        Map<String, String> expected = new HashMap<>();
        due.keySet().forEach(job -> expected.put(job, "finished"));
        expected.put(cancelled, "cancelled");
        waitFor("every job's final state in Redis", () -> expected.entrySet().stream()
                .allMatch(e -> state(e.getKey()).equals(e.getValue())), Duration.ofSeconds(20));
        System.out.printf("java spring example: %d reminders scheduled and 1 cancelled through KafkaTemplate; %d sent"
                + " by the @KafkaListener, none early (at most %d ms late), none twice; %d running and %d finished"
                + " reports; delayctl get: %d finished, 1 cancelled%n", REMINDERS, due.size(), maxLate, REMINDERS,
                REMINDERS, REMINDERS);
    }
}
