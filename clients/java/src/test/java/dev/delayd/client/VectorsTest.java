package dev.delayd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The Java client against the shared test vectors (clients/vectors/*.json, directory in the
 * system property delayd.vectors): every good call must build exactly the vector's record (topic,
 * key, headers in order, value), every bad call must fail with a ContractException carrying the
 * vector's message (or, for a record only delayd can refuse, build that record). No Kafka needed:
 * the record builders are pure. Prints how many of each passed.
 */
class VectorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static int goodPassed, badPassed;

    static TreeMap<String, JsonNode> vectorFiles() throws IOException {
        Path dir = Path.of(System.getProperty("delayd.vectors", "../vectors"));
        TreeMap<String, JsonNode> out = new TreeMap<>();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "*.json")) {
            for (Path p : files) {
                out.put(p.getFileName().toString(), JSON.readTree(p.toFile()));
            }
        }
        assertTrue(!out.isEmpty(), "no vectors in " + dir.toAbsolutePath());
        return out;
    }

    /** A vector's arguments, and which of them the call did not read (a test that misreads one fails). */
    private static final class Args {
        final JsonNode raw;
        final Set<String> used = new HashSet<>();

        Args(JsonNode raw) {
            this.raw = raw;
        }

        boolean has(String name) {
            used.add(name);
            return raw.has(name) && !raw.get(name).isNull();
        }

        JsonNode get(String name) {
            used.add(name);
            return raw.get(name);
        }

        String str(String name) {
            return get(name).textValue();
        }

        long num(String name) {
            JsonNode n = get(name);
            assertTrue(n.canConvertToLong(), name + " is no 64-bit number: " + n);
            return n.longValue();
        }

        Duration ms(String name) {
            return Duration.ofMillis(num(name));
        }

        boolean isText(String name) {
            return get(name).isTextual();
        }

        List<Header> headers(String name) {
            List<Header> out = new ArrayList<>();
            for (JsonNode pair : get(name)) {
                out.add(Header.of(pair.get(0).textValue(), pair.get(1).isNull() ? null : pair.get(1).textValue()));
            }
            return out;
        }

        When[] when() {
            List<When> out = new ArrayList<>();
            if (has("at")) {
                out.add(isText("at") ? When.atText(str("at")) : When.atMillis(num("at")));
            }
            if (has("delay")) {
                out.add(When.delayMillis(num("delay")));
            }
            return out.toArray(new When[0]);
        }

        void allUsed() {
            for (Iterator<String> names = raw.fieldNames(); names.hasNext(); ) {
                String n = names.next();
                assertTrue(used.contains(n), "argument " + n + " not understood by the test");
            }
        }
    }

    /** The vector's call on the record builders. */
    static DelaydRecord call(String name, JsonNode raw) {
        Args a = new Args(raw);
        try {
            switch (name) {
                case "schedule": {
                    ScheduleOptions o = new ScheduleOptions();
                    if (a.has("at")) {
                        if (a.isText("at")) {
                            o.atText(a.str("at"));
                        } else {
                            o.atMillis(a.num("at"));
                        }
                    }
                    if (a.has("delay")) {
                        o.delayMillis(a.num("delay"));
                    }
                    if (a.has("job_id")) {
                        o.jobId(a.str("job_id"));
                    }
                    if (a.has("key")) {
                        o.key(a.str("key"));
                    }
                    if (a.has("headers")) {
                        o.headers(a.headers("headers"));
                    }
                    if (a.has("repeat_every")) {
                        o.repeatEvery(a.ms("repeat_every"));
                    }
                    if (a.has("repeat_count")) {
                        o.repeatCount(a.num("repeat_count"));
                    }
                    if (a.has("repeat_cron")) {
                        o.repeatCron(a.str("repeat_cron"));
                    }
                    if (a.has("repeat_tz")) {
                        o.repeatTz(a.str("repeat_tz"));
                    }
                    if (a.has("repeat_until")) {
                        if (a.isText("repeat_until")) {
                            o.repeatUntilText(a.str("repeat_until"));
                        } else {
                            o.repeatUntilMillis(a.num("repeat_until"));
                        }
                    }
                    if (a.has("repeat_catchup")) {
                        o.repeatCatchup(a.str("repeat_catchup"));
                    }
                    if (a.has("max_lateness")) {
                        o.maxLateness(a.ms("max_lateness"));
                    }
                    if (a.has("upsert") && a.get("upsert").booleanValue()) {
                        o.upsert();
                    }
                    byte[] value = a.has("value") ? a.str("value").getBytes(StandardCharsets.UTF_8) : null;
                    return Records.scheduleRecord(a.str("business"), value, o);
                }
                case "cancel":
                    return Records.cancelRecord(a.str("job_id"));
                case "reschedule":
                    return Records.rescheduleRecord(a.str("job_id"), a.when());
                case "report": {
                    ReportOptions o = new ReportOptions();
                    if (a.has("error")) {
                        o.error(a.str("error"));
                    }
                    if (a.has("retry_after")) {
                        o.retryAfter(a.ms("retry_after"));
                    }
                    return Records.reportRecord(a.headers("ready_headers"), a.str("status"), o);
                }
                default:
                    return fail("unknown call " + name);
            }
        } finally {
            a.allUsed();
        }
    }

    static DelaydRecord record(JsonNode r) {
        Topic topic = r.get("topic").textValue().equals("ingest") ? Topic.INGEST : Topic.STATUS;
        assertEquals(r.get("topic").textValue(), topic.role());
        List<Header> headers = new ArrayList<>();
        for (JsonNode pair : r.get("headers")) {
            headers.add(Header.of(pair.get(0).textValue(), pair.get(1).isNull() ? null : pair.get(1).textValue()));
        }
        return new DelaydRecord(topic, bytes(r.get("key")), headers, bytes(r.get("value")));
    }

    private static byte[] bytes(JsonNode text) {
        return text.isNull() ? null : text.textValue().getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void contractVersion() throws IOException {
        vectorFiles().forEach((file, v) -> assertEquals(Contract.CONTRACT_VERSION, v.get("contract_version").intValue(),
                file + ": contract_version"));
    }

    @TestFactory
    List<DynamicTest> goodVectors() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        vectorFiles().forEach((file, v) -> v.get("good").forEach(vector -> tests.add(DynamicTest.dynamicTest(
                file + "/" + vector.get("name").textValue(), () -> {
                    DelaydRecord got = call(vector.get("call").textValue(), vector.get("args"));
                    assertEquals(record(vector.get("record")), got);
                    goodPassed++;
                }))));
        assertTrue(tests.size() >= 20, "only " + tests.size() + " good vectors");
        return tests;
    }

    @TestFactory
    List<DynamicTest> badVectors() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        vectorFiles().forEach((file, v) -> v.get("bad").forEach(vector -> tests.add(DynamicTest.dynamicTest(
                file + "/" + vector.get("name").textValue(), () -> {
                    String call = vector.get("call").textValue();
                    if (vector.get("checked_by").textValue().equals("delayd")) { // the client sends it; delayd refuses it
                        assertEquals(record(vector.get("record")), call(call, vector.get("args")));
                    } else {
                        try {
                            DelaydRecord got = call(call, vector.get("args"));
                            fail("not refused: " + got);
                        } catch (ContractException e) {
                            assertEquals(vector.get("error").textValue(), e.getMessage());
                        }
                    }
                    badPassed++;
                }))));
        assertTrue(tests.size() >= 30, "only " + tests.size() + " bad vectors");
        return tests;
    }

    @AfterAll
    static void counts() {
        System.out.printf("java vectors: %d good and %d bad vectors passed%n", goodPassed, badPassed);
    }
}
