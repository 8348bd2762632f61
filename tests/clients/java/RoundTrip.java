// The Java client (clients/java) against a real delayd and the local stack, as main.go checks the
// Go one: it schedules jobs (at an Instant, after a Duration), cancels one, reschedules one, has
// delayctl cancel one it scheduled (the same partition, through librdkafka's partitioner), and
// works off the ready topics with Work and a read_committed consumer from Consumers, which
// reports each job running and finished, with heartbeats for a business whose ack timeout is
// shorter than the work, and one job failed with a retry time (Retry), which comes again with
// attempt 2. Checked through Kafka (ready records never before their deliver-at, every record of
// a job keyed by its job-id and in the partition librdkafka picks, reports echoing the attempt,
// nothing delivered for the cancelled jobs, every delivery seen again by Dedup when the topic is
// read again) and through Redis (`delayctl get`: each job's final state, and no redelivery of the
// job that heartbeats held).
//
//     java RoundTrip <delayd> <delayctl> <output dir>     (needs KAFKA_BOOTSTRAP, REDIS_URL)
//
// tests/clients/java_client.sh compiles and runs it against the client's classes.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.delayd.client.Client;
import dev.delayd.client.ClientOptions;
import dev.delayd.client.Consumers;
import dev.delayd.client.Dedup;
import dev.delayd.client.LibrdkafkaPartitioner;
import dev.delayd.client.ReadyRecord;
import dev.delayd.client.Retry;
import dev.delayd.client.ScheduleOptions;
import dev.delayd.client.Status;
import dev.delayd.client.When;
import dev.delayd.client.Work;
import dev.delayd.client.WorkOptions;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public final class RoundTrip {
    // Of business "slow": its job works 7.5 s, held by heartbeats every 0.5 s. The deadline runs from
    // the mark after Kafka acknowledged the ready record, and the first report must reach delayd
    // before it: 6 s leaves room for a consumer a loaded machine keeps waiting (2.9 s seen in CI,
    // when it was 3 s and the job was redelivered before its first heartbeat).
    static final long ACK_TIMEOUT_MS = 6000;
    static final Duration SLOW_WORK = Duration.ofMillis(7500);
    static final Duration HEARTBEAT = Duration.ofMillis(500);
    static final Duration RETRY_AFTER = Duration.ofMillis(300); // of the job whose first attempt fails
    static final int READY_PARTITIONS = 4; // of each ready topic: as many as delayd gives those it creates

    /** A step the others need did not happen: the checks end. */
    static final class Fatal extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Fatal(String what) {
            super(what);
        }
    }

    /** A ready record as the worker saw it, and when. */
    record Seen(ConsumerRecord<byte[], byte[]> r, long got) {}

    final String bootstrap, delayctl;
    final Map<String, String> env;
    final Path logPath;
    Process proc;
    final List<String> failures = new ArrayList<>();
    int passed;
    final ObjectMapper json = new ObjectMapper();

    RoundTrip(String bootstrap, String delayctl, Map<String, String> env, Path logPath) {
        this.bootstrap = bootstrap;
        this.delayctl = delayctl;
        this.env = env;
        this.logPath = logPath;
    }

    static long nowMs() {
        return System.currentTimeMillis();
    }

    void check(boolean ok, String what) {
        System.out.println((ok ? "ok   " : "FAIL ") + what);
        if (ok) {
            passed++;
        } else {
            failures.add(what);
        }
    }

    void waitFor(String what, BooleanSupplier cond, Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        while (System.nanoTime() < deadline) {
            if (cond.getAsBoolean()) {
                return;
            }
            if (!proc.isAlive()) {
                throw new Fatal("delayd exited");
            }
            sleep(100);
        }
        throw new Fatal("timed out waiting for " + what);
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Fatal("interrupted");
        }
    }

    /** `delayctl get job` as JSON; an empty object when it fails. */
    JsonNode get(String job) {
        try {
            ProcessBuilder pb = new ProcessBuilder(delayctl, "get", job).redirectError(ProcessBuilder.Redirect.DISCARD);
            pb.environment().putAll(env);
            Process p = pb.start();
            byte[] out = p.getInputStream().readAllBytes();
            return p.waitFor() == 0 ? json.readTree(out) : json.createObjectNode();
        } catch (IOException e) {
            return json.createObjectNode();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Fatal("interrupted");
        }
    }

    /** `delayctl cancel job`: publishes a cancel through librdkafka and waits until delayd acted on it. */
    String delayctlCancel(String job) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(delayctl, "cancel", job).redirectErrorStream(true);
        pb.environment().putAll(env);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        return "exit " + p.waitFor() + ": " + out.strip().replaceAll("\\s+", " ");
    }

    static String state(JsonNode j) {
        return j.path("state").asText("");
    }

    /** Every record of topic, from the beginning, as Kafka has it (no group: all partitions assigned). */
    List<ConsumerRecord<byte[], byte[]>> readAll(String topic) {
        try (KafkaConsumer<byte[], byte[]> c = Consumers.create(Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo p : c.partitionsFor(topic)) {
                parts.add(new TopicPartition(topic, p.partition()));
            }
            c.assign(parts);
            c.seekToBeginning(parts);
            Map<TopicPartition, Long> end = c.endOffsets(parts);
            List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (parts.stream().anyMatch(tp -> c.position(tp) < end.get(tp)) && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(out::add);
            }
            return out;
        }
    }

    /** The first header called name as text ("" when there is none). */
    static String hdr(ConsumerRecord<byte[], byte[]> r, String name) {
        for (org.apache.kafka.common.header.Header h : r.headers()) {
            if (h.key().equals(name)) {
                return h.value() == null ? "" : new String(h.value(), StandardCharsets.UTF_8);
            }
        }
        return "";
    }

    static String key(ConsumerRecord<byte[], byte[]> r) {
        return r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
    }

    void run(String run) throws Exception {
        String ingest = run + ".ingest", status = run + ".status";
        waitFor("delayd's partitions", () -> {
            try {
                return Files.readString(logPath).contains("assigned");
            } catch (IOException e) {
                return false;
            }
        }, Duration.ofSeconds(60));
        Map<String, String> ids = new LinkedHashMap<>();
        for (String n : List.of("at", "delay", "cancelled", "moved", "slow", "retried", "xcancel")) {
            ids.put(n, run + "-" + n);
        }
        // The worker is reading before any job is scheduled: the slow job's ack timeout (6 s)
        // runs from its ready record's production, so a worker still joining its group when that
        // record comes would see it redelivered however quickly it heartbeats. The ready topics
        // are created here, as an operator who does not let delayd create topics would (delayd's
        // own request then finds them there), so that the worker's group can be assigned them
        // before the first record is written.
        List<String> readyTopics = List.of(run + ".ready.rt", run + ".ready.slow");
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            admin.createTopics(readyTopics.stream().map(t -> new NewTopic(t, READY_PARTITIONS, (short) 1)).toList())
                    .all().get(30, TimeUnit.SECONDS);
        }
        Map<String, Object> config = Consumers.config(bootstrap, run + ".worker");
        check("read_committed".equals(config.get(ConsumerConfig.ISOLATION_LEVEL_CONFIG)),
                "the worker's consumer reads committed records only: " + config.get(ConsumerConfig.ISOLATION_LEVEL_CONFIG));
        List<Seen> got = new ArrayList<>();
        Dedup dedup = new Dedup();
        int done;
        long t0;
        try (KafkaConsumer<byte[], byte[]> consumer = Consumers.create(config);
                Client client = new Client(bootstrap, new ClientOptions().ingestTopic(ingest).statusTopic(status))) {
            consumer.subscribe(readyTopics);
            long assignDeadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            int early = 0;
            while (consumer.assignment().size() < readyTopics.size() * READY_PARTITIONS) {
                if (System.nanoTime() > assignDeadline) {
                    throw new Fatal("the worker's consumer was not assigned the ready topics in 60 s: " + consumer.assignment());
                }
                early += consumer.poll(Duration.ofMillis(100)).count();
            }
            check(early == 0, "no ready record before any job was scheduled (" + early + ")");
            // One job goes round before the timed part (scheduled, delivered, read by the worker's
            // consumer, reported, the report applied), so that a Kafka still settling new groups and
            // transactions (seconds of it, seen in CI) does not eat into the slow job's ack timeout.
            String warm = run + "-warm";
            client.schedule("rt", "warm", new ScheduleOptions().delayMillis(0).jobId(warm));
            client.flush();
            ConsumerRecord<byte[], byte[]> warmRecord = null;
            long warmDeadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (warmRecord == null) {
                if (System.nanoTime() > warmDeadline) {
                    throw new Fatal("the warm-up job was not delivered in 60 s");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    if (warm.equals(hdr(r, "job-id"))) {
                        warmRecord = r;
                    }
                }
            }
            client.report(warmRecord, Status.FINISHED);
            client.flush();
            consumer.commitSync(Map.of(new TopicPartition(warmRecord.topic(), warmRecord.partition()),
                    new OffsetAndMetadata(warmRecord.offset() + 1)));
            waitFor("the warm-up job's report applied", () -> state(get(warm)).equals("finished"), Duration.ofSeconds(60));
            t0 = nowMs();
            long at = t0 + 2000;
            client.schedule("rt", "at", new ScheduleOptions().atMillis(at).jobId(ids.get("at")).header("trace-id", "t-at"));
            client.schedule("rt", "delay", new ScheduleOptions().delay(Duration.ofMillis(1500)).jobId(ids.get("delay")));
            client.schedule("rt", "cancelled", new ScheduleOptions().delayMillis(2500).jobId(ids.get("cancelled")));
            client.schedule("rt", "moved", new ScheduleOptions().at(Instant.ofEpochMilli(t0 + 60_000)).jobId(ids.get("moved")));
            client.schedule("slow", "slow", new ScheduleOptions().delay(Duration.ofMillis(500)).jobId(ids.get("slow")));
            client.schedule("rt", "retried", new ScheduleOptions().delayMillis(500).jobId(ids.get("retried")));
            client.schedule("rt", "xcancel", new ScheduleOptions().at(Instant.ofEpochMilli(t0 + 120_000)).jobId(ids.get("xcancel")));
            client.cancel(ids.get("cancelled"));
            client.reschedule(ids.get("moved"), When.delay(Duration.ofSeconds(1)));
            client.flush();
            long tSent = nowMs();
            {
                long workDeadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                done = Work.work(client, consumer, r -> {
                    got.add(new Seen(r, nowMs()));
                    ReadyRecord ready = ReadyRecord.of(r);
                    check(!dedup.seen(ready), ready.jobId() + " attempt " + ready.attempt() + ": a delivery not seen before");
                    if (r.topic().endsWith(".slow")) {
                        Thread.sleep(SLOW_WORK.toMillis()); // the work: longer than the business's ack timeout
                    }
                    dedup.remember(ready);
                    if (ready.jobId().equals(ids.get("retried")) && ready.attempt() == 1) {
                        throw new Retry("try again", RETRY_AFTER);
                    }
                }, new WorkOptions().heartbeat(HEARTBEAT).count(6).pollTimeout(Duration.ofMillis(200))
                        .stop(() -> System.nanoTime() > workDeadline));
                check(done == 6, "the worker handled 6 ready records (" + done + ")");
                // The cancelled job was due at t0 + 2.5 s: by now it would have come.
                while (nowMs() < t0 + 4000) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        got.add(new Seen(r, nowMs()));
                    }
                }
            }
            // delayctl (librdkafka) cancels a job this client scheduled: its cancel must land behind
            // the schedule, in the same partition.
            waitFor("delayd to accept the job delayctl cancels", () -> state(get(ids.get("xcancel"))).equals("delay"),
                    Duration.ofSeconds(10));
            String cancelOut = delayctlCancel(ids.get("xcancel"));
            check(cancelOut.startsWith("exit 0") && cancelOut.contains("\"cancelled\": true"),
                    "delayctl cancel of a job the Java client scheduled: " + cancelOut);

            Map<String, List<Seen>> deliveries = new LinkedHashMap<>();
            for (Seen s : got) {
                deliveries.computeIfAbsent(hdr(s.r(), "job-id"), j -> new ArrayList<>()).add(s);
            }
            TreeSet<String> wantIds = new TreeSet<>();
            for (String n : List.of("at", "delay", "moved", "slow", "retried")) {
                wantIds.add(ids.get(n));
            }
            check(new TreeSet<>(deliveries.keySet()).equals(wantIds) && got.size() == 6,
                    "one ready record each for the jobs not cancelled, two for the one retried: "
                            + new TreeSet<>(deliveries.keySet()) + " (" + got.size() + " records)");
            long maxProduced = 0, maxConsumed = 0; // the slow job's work holds the others back: consumed late
            for (Map.Entry<String, List<Seen>> e : deliveries.entrySet()) {
                String job = e.getKey();
                for (int n = 0; n < e.getValue().size(); n++) {
                    Seen s = e.getValue().get(n);
                    ReadyRecord ready = ReadyRecord.of(s.r());
                    long due = ready.deliverAt().toEpochMilli();
                    long produced = s.r().timestamp();
                    check(produced >= due && s.got() >= due, job + ": produced " + (produced - due) + " ms and consumed "
                            + (s.got() - due) + " ms after its deliver-at, never early");
                    if (n == 0) { // a retry's record keeps the job's deliver-at: its lateness is the retry's wait
                        maxProduced = Math.max(maxProduced, produced - due);
                    }
                    maxConsumed = Math.max(maxConsumed, s.got() - due);
                    check(key(s.r()).equals(job) && ready.attempt() == n + 1,
                            job + ": keyed by its id, attempt " + (n + 1) + " (" + ready.attempt() + ")");
                }
            }
            List<Seen> retried = deliveries.getOrDefault(ids.get("retried"), List.of());
            if (retried.size() == 2) {
                long gap = retried.get(1).got() - retried.get(0).got();
                check(gap >= RETRY_AFTER.toMillis(), "the retried job: delivered again " + gap
                        + " ms after its failed attempt, not before its retry time (" + RETRY_AFTER.toMillis() + " ms)");
            }
            if (deliveries.containsKey(ids.get("at"))) {
                ConsumerRecord<byte[], byte[]> r = deliveries.get(ids.get("at")).get(0).r();
                check(hdr(r, "deliver-at").equals(Long.toString(at)) && hdr(r, "trace-id").equals("t-at")
                        && new String(r.value(), StandardCharsets.UTF_8).equals("at") && hdr(r, "business").equals("rt"),
                        "the 'at' job: due at the instant given, its header and value carried, business rt");
            }
            if (deliveries.containsKey(ids.get("delay"))) {
                long due = ReadyRecord.of(deliveries.get(ids.get("delay")).get(0).r()).deliverAt().toEpochMilli();
                check(t0 + 1500 <= due && due <= tSent + 1500, "the 'delay' job: due 1500 ms after its record");
            }
            if (deliveries.containsKey(ids.get("moved"))) {
                long due = ReadyRecord.of(deliveries.get(ids.get("moved")).get(0).r()).deliverAt().toEpochMilli();
                check(t0 + 1000 <= due && due <= tSent + 1000,
                        "the rescheduled job: due 1000 ms after the reschedule, not in 60 s");
            }

            Map<String, String> expected = new LinkedHashMap<>();
            for (String n : List.of("at", "delay", "moved", "slow", "retried")) {
                expected.put(ids.get(n), "finished");
            }
            expected.put(ids.get("cancelled"), "cancelled");
            expected.put(ids.get("xcancel"), "cancelled");
            try {
                waitFor("every job's final state", () -> expected.entrySet().stream()
                        .allMatch(e -> state(get(e.getKey())).equals(e.getValue())), Duration.ofSeconds(15));
            } catch (Fatal timedOut) {
                // the checks below say which
            }
            Map<String, Integer> states = new HashMap<>();
            for (Map.Entry<String, String> e : expected.entrySet()) {
                String s = state(get(e.getKey()));
                check(s.equals(e.getValue()), "delayctl get " + e.getKey() + ": state " + s + ", expected " + e.getValue());
                states.merge(s, 1, Integer::sum);
            }
            JsonNode slow = get(ids.get("slow"));
            check(slow.path("attempt").asInt() == 1 && slow.path("redelivered").asInt() == 0,
                    "the slow job (" + SLOW_WORK.toMillis() + " ms of work, ack timeout " + ACK_TIMEOUT_MS
                            + " ms) was held by heartbeats: attempt " + slow.path("attempt") + ", redelivered "
                            + slow.path("redelivered").asInt());

            Map<String, List<String>> perJob = new LinkedHashMap<>(); // each job's reports: status/attempt
            for (ConsumerRecord<byte[], byte[]> r : readAll(status)) {
                String job = hdr(r, "job-id");
                check(key(r).equals(job), "report " + job + " " + hdr(r, "status") + ": keyed by its job-id");
                perJob.computeIfAbsent(job, j -> new ArrayList<>()).add(hdr(r, "status") + "/" + hdr(r, "attempt"));
                if (hdr(r, "status").equals(Status.FAILED)) {
                    check(job.equals(ids.get("retried")) && hdr(r, "error").equals("try again")
                            && hdr(r, "retry-after-ms").equals(Long.toString(RETRY_AFTER.toMillis())),
                            "failed report of " + job + ": the handler's error '" + hdr(r, "error") + "' and retry time "
                                    + hdr(r, "retry-after-ms") + " ms");
                }
            }
            for (String job : deliveries.keySet()) {
                List<String> st = perJob.getOrDefault(job, List.of());
                String want = job.equals(ids.get("retried")) ? "running/1 failed/1 running/2 finished/2" : "running/1 finished/1";
                if (job.equals(ids.get("slow")) && st.size() >= 2) { // its heartbeats: counted below
                    st = List.of(st.get(0), st.get(st.size() - 1));
                }
                check(String.join(" ", st).equals(want), job + ": reports " + perJob.get(job) + ", attempts echoed");
            }
            long beats = perJob.getOrDefault(ids.get("slow"), List.of()).stream().filter("running/1"::equals).count();
            long wantBeats = SLOW_WORK.toMillis() / HEARTBEAT.toMillis();
            check(beats >= wantBeats, "the slow job's heartbeats: " + beats + " running reports (at least " + wantBeats + ")");

            List<ConsumerRecord<byte[], byte[]>> ingestRecords = readAll(ingest);
            int partitions = 0;
            try (KafkaConsumer<byte[], byte[]> c = Consumers.create(Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
                partitions = c.partitionsFor(ingest).size();
            }
            for (ConsumerRecord<byte[], byte[]> r : ingestRecords) {
                String op = hdr(r, "op").isEmpty() ? "schedule" : hdr(r, "op");
                int want = LibrdkafkaPartitioner.partitionOf(r.key(), partitions);
                check(key(r).equals(hdr(r, "job-id")) && r.partition() == want, "ingest record " + op + " of "
                        + hdr(r, "job-id") + ": keyed by its job-id, in partition " + r.partition() + " of " + partitions
                        + " (librdkafka's: " + want + ")");
            }
            // A consumer that reads the ready topics again (a restart before its commits): Dedup
            // knows every delivery the worker did.
            int again = 0, dropped = 0;
            for (String topic : readyTopics) {
                for (ConsumerRecord<byte[], byte[]> r : readAll(topic)) {
                    if (warm.equals(hdr(r, "job-id"))) {
                        continue; // the warm-up's, read before Dedup was in use
                    }
                    again++;
                    dropped += dedup.seen(r) ? 1 : 0;
                }
            }
            check(again == 6 && dropped == 6, "the ready topics read again: " + dropped + " of " + again
                    + " records known to Dedup as done");
            System.out.printf("java roundtrip: %d jobs scheduled, 2 cancelled (one by delayctl), 1 rescheduled; %d ready"
                    + " records worked off by Work (%d jobs, 1 retried), none early (first deliveries produced at most %d ms"
                    + " after their deliver-at, consumed at most %d ms after: one worker, a 2.5 s job); Redis: %s%n", ids.size(), got.size(), deliveries.size(),
                    maxProduced, maxConsumed, new java.util.TreeMap<>(states));
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.out.println("usage: java RoundTrip <delayd> <delayctl> <output dir>");
            System.exit(2);
        }
        String delaydPath = args[0], delayctl = args[1], outDir = args[2];
        String bootstrap = System.getenv("KAFKA_BOOTSTRAP"), redisUrl = System.getenv("REDIS_URL");
        if (bootstrap == null || bootstrap.isEmpty() || redisUrl == null || redisUrl.isEmpty()) {
            System.out.println("FAIL: KAFKA_BOOTSTRAP and REDIS_URL must be set (scripts/stack.sh up; its env)");
            System.exit(1);
        }
        String run = "javaclient-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        Map<String, String> env = new HashMap<>();
        env.put("DELAYD_KAFKA_BOOTSTRAP", bootstrap);
        env.put("DELAYD_REDIS_URL", redisUrl);
        env.put("DELAYD_KAFKA_INGEST_TOPIC", run + ".ingest");
        env.put("DELAYD_KAFKA_DLQ_TOPIC", run + ".dlq");
        env.put("DELAYD_KAFKA_STATUS_TOPIC", run + ".status");
        env.put("DELAYD_KAFKA_READY_TOPIC_TEMPLATE", run + ".ready.{business}");
        env.put("DELAYD_KAFKA_GROUP_ID", run);
        env.put("DELAYD_REDIS_PREFIX", run);
        env.put("DELAYD_KAFKA_CREATE_TOPICS", "true");
        env.put("DELAYD_ADMIN_LISTEN", ""); // no admin endpoint: nothing on another delayd's port
        // rt keeps its jobs' payload, so that the one retried can be delivered again.
        env.put("DELAYD_SCHEDULER_BUSINESS", "slow.ack_timeout_ms=" + ACK_TIMEOUT_MS + ",rt.keep_payload=true");
        Path logPath = Path.of(outDir, run + ".log");
        RoundTrip rt = new RoundTrip(bootstrap, delayctl, env, logPath);
        ProcessBuilder pb = new ProcessBuilder(delaydPath).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.to(new File(logPath.toString())));
        pb.environment().putAll(env);
        rt.proc = pb.start();
        try {
            rt.run(run);
        } catch (Fatal f) {
            System.out.println("FAIL " + f.getMessage());
            rt.failures.add(f.getMessage());
        } finally {
            rt.proc.destroy(); // SIGTERM
            if (!rt.proc.waitFor(20, TimeUnit.SECONDS)) {
                rt.proc.destroyForcibly().waitFor();
            }
        }
        if (!rt.failures.isEmpty()) {
            String log = Files.readString(logPath);
            System.out.println(log.length() > 4000 ? log.substring(log.length() - 4000) : log);
            System.out.printf("java roundtrip: %d checks passed, %d failed%n", rt.passed, rt.failures.size());
            System.out.println("0 passed, 1 failed");
            System.exit(1);
        }
        System.out.printf("java roundtrip: %d checks passed, 0 failed%n", rt.passed);
        System.out.println("1 passed, 0 failed");
    }
}
