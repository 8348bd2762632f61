package dev.delayd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * What the vectors cannot say in JSON: Java's Instant and Duration as headers (a part of a
 * millisecond rounds up, never early), and the client's own time reading against java.time's.
 */
class JavaTypesTest {
    @Test
    void instantRoundsUpToTheMillisecond() {
        Instant at = Instant.parse("2026-11-22T10:00:00Z").plusNanos(900);
        DelaydRecord r = Records.scheduleRecord("orders", null, new ScheduleOptions().at(at).jobId("j"));
        assertEquals("1795341600001", r.header(Contract.DELIVER_AT));
        assertEquals("1795341600000", Records.rescheduleRecord("j", When.at(Instant.parse("2026-11-22T10:00:00Z")))
                .header(Contract.DELIVER_AT));
    }

    @Test
    void instantOfAnOffsetDateTime() {
        Instant at = OffsetDateTime.of(2026, 11, 22, 11, 0, 0, 0, ZoneOffset.ofHours(1)).toInstant();
        DelaydRecord r = Records.rescheduleRecord("j", When.at(at));
        assertEquals(Header.of(Contract.DELIVER_AT, "1795341600000"), r.headers().get(r.headers().size() - 1));
    }

    @Test
    void instantBefore1970IsRefused() {
        ContractException e = assertThrows(ContractException.class, () -> Records.scheduleRecord("orders", null,
                new ScheduleOptions().at(Instant.parse("0001-01-01T00:00:00Z")).jobId("j")));
        assertEquals("header 'deliver-at' is not epoch milliseconds or RFC 3339: \"-62135596800000\"", e.getMessage());
        // Instant's whole range, past a long's milliseconds, is written exactly (Instant.MAX is
        // ...199.999999999 s: its part of a millisecond rounds up) and refused as out of range.
        e = assertThrows(ContractException.class, () -> Records.scheduleRecord("orders", null,
                new ScheduleOptions().at(Instant.MAX).jobId("j")));
        assertEquals("header 'deliver-at' is outside 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999Z: "
                + "\"31556889864403200000\"", e.getMessage());
    }

    @Test
    void durationsRoundUp() {
        DelaydRecord r = Records.scheduleRecord("orders", null, new ScheduleOptions().delay(Duration.ofSeconds(1).plusNanos(1000))
                .jobId("j").repeatEvery(Duration.ofHours(1)).maxLateness(Duration.ofNanos(1_500_000)));
        assertEquals("1001", r.header(Contract.DELAY_MS));
        assertEquals("3600000", r.header(Contract.REPEAT_EVERY));
        assertEquals("2", r.header(Contract.MAX_LATENESS));
        assertEquals("-1", TimeFormat.millisText(Duration.ofNanos(-1_500_000))); // toward later: never early
        ContractException e = assertThrows(ContractException.class, () -> Records.reportRecord(
                List.of(Header.of(Contract.JOB_ID, "j")), Status.FAILED, new ReportOptions().retryAfter(Duration.ofMillis(-1))));
        assertEquals("header 'retry-after-ms' must be a decimal number from 0 to 86400000: \"-1\"", e.getMessage());
    }

    @Test
    void repeatedHeaderNamesAndNullValues() {
        // delayd reads the first header of a name; one without a value is no header.
        DelaydRecord r = Records.reportRecord(List.of(Header.of(Contract.JOB_ID, "j-1"), Header.of(Contract.JOB_ID, "j-2"),
                Header.of(Contract.ATTEMPT, null), Header.of(Contract.ATTEMPT, "3")), Status.FINISHED);
        assertEquals(new DelaydRecord(Topic.STATUS, "j-1".getBytes(), List.of(Header.of(Contract.JOB_ID, "j-1"),
                Header.of(Contract.STATUS, Status.FINISHED)), null), r);
    }

    @Test
    void longDecimalTexts() {
        // Leading zeros are the number's; a text past 64 bits is out of range, not an overflow.
        assertEquals(new TimeFormat.Parsed(1795000060000L, ""), TimeFormat.parseTimestampMs("0001795000060000"));
        assertEquals(TimeFormat.OUT_OF_RANGE, TimeFormat.parseTimestampMs("99999999999999999999999").error());
        ContractException e = assertThrows(ContractException.class, () -> Records.scheduleRecord("orders", null,
                new ScheduleOptions().jobId("j").atText("00000000000000000000000001").repeatEvery(Duration.ofSeconds(1))
                        .repeatUntilText("18446744073709551617")));
        assertEquals("header 'repeat-until' is not epoch milliseconds or RFC 3339 within 1970..9999: "
                + "\"18446744073709551617\"", e.getMessage());
    }

    @Test
    void rfc3339AgainstJavaTime() {
        // The client's RFC 3339 reading against java.time's calendar, over the whole range.
        Random rng = new Random(7);
        long[] cases = new long[2002];
        cases[1] = Contract.MAX_EPOCH_MS;
        for (int i = 2; i < cases.length; i++) {
            cases[i] = (long) (rng.nextDouble() * Contract.MAX_EPOCH_MS);
        }
        for (long ms : cases) {
            String text = TimeFormat.formatRfc3339Ms(ms);
            assertEquals(new TimeFormat.Parsed(ms, ""), TimeFormat.parseTimestampMs(text), text);
            String local = OffsetDateTime.ofInstant(Instant.ofEpochMilli(ms), ZoneOffset.ofHoursMinutes(-5, -30))
                    .format(java.time.format.DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSxxx"));
            assertEquals(new TimeFormat.Parsed(ms, ""), TimeFormat.parseTimestampMs(local), local);
        }
    }

    @Test
    void recordsAreKeyedByTheJobId() {
        List<DelaydRecord> records = List.of(
                Records.scheduleRecord("orders", null, new ScheduleOptions().delayMillis(1).jobId("j").key("j")),
                Records.cancelRecord("j"),
                Records.rescheduleRecord("j", When.delay(Duration.ofSeconds(1))),
                Records.reportRecord(List.of(Header.of(Contract.JOB_ID, "j")), Status.RUNNING));
        for (DelaydRecord r : records) {
            assertEquals("j", new String(r.key()), r.toString());
        }
    }

    @Test
    void aProducerRecordForEachRole() {
        DelaydRecord schedule = Records.scheduleRecord("orders", "v".getBytes(), new ScheduleOptions().delayMillis(5)
                .jobId("j").header("trace-id", "t"));
        var p = schedule.toProducerRecord("my.ingest", "my.status");
        assertEquals("my.ingest", p.topic());
        assertEquals(null, p.partition()); // the producer's partitioner picks it
        assertEquals(List.of("job-id", "business", "delay-ms", "trace-id"),
                java.util.Arrays.stream(p.headers().toArray()).map(h -> h.key()).toList());
        assertEquals("my.status", Records.reportRecord(schedule.headers(), Status.RUNNING)
                .toProducerRecord("my.ingest", "my.status").topic());
    }
}
