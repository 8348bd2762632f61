package dev.delayd.client;

import java.util.ArrayList;
import java.util.List;

/**
 * The records delayd's contract asks for, built and checked without Kafka.
 *
 * <p>Every method here is pure: it returns a {@link DelaydRecord} (which topic, key, headers in
 * order, value) or throws {@link ContractException} with the message delayd's own ingest parser
 * (contract/ingest_parse.cpp) would put on the dead letter, so that a bad call fails in the
 * producer instead of in the dead-letter topic. clients/vectors/ holds the calls and records every
 * client must agree on; the messages are the other clients' word for word.
 *
 * <p>Rules every record follows: every record of one job (schedule, cancel, reschedule, status
 * report) is keyed by its job-id, so that they land in one partition, in order (docs/producing.md,
 * "Reschedule", "Latest wins"); only headers of the contract are written, and the caller's own
 * headers follow them, in their order.
 */
public final class Records {
    private Records() {}

    /** A job-id a producer may choose: 1-200 of 0x21-0x7E, not starting with "auto:". */
    public static void checkJobId(String jobId) {
        byte[] data = Texts.utf8(jobId);
        boolean ok = data.length >= 1 && data.length <= Contract.MAX_JOB_ID_CHARS;
        for (int i = 0; ok && i < data.length; i++) {
            ok = data[i] >= 0x21 && data[i] <= 0x7e;
        }
        if (!ok) {
            throw new ContractException(Texts.ref(Contract.JOB_ID) + " must be 1-" + Contract.MAX_JOB_ID_CHARS
                    + " printable ASCII characters without spaces: " + Texts.quote(data) + " (" + data.length
                    + " bytes)");
        }
        if (jobId.startsWith(Contract.DERIVED_JOB_ID_PREFIX)) {
            throw new ContractException(Texts.ref(Contract.JOB_ID) + " must not start with '"
                    + Contract.DERIVED_JOB_ID_PREFIX + "', which is kept for the ids delayd derives: "
                    + Texts.quote(jobId));
        }
    }

    /** A business name: 1-100 characters of [A-Za-z0-9._-]. */
    public static void checkBusiness(String business) {
        byte[] data = Texts.utf8(business);
        boolean ok = data.length >= 1 && data.length <= Contract.MAX_BUSINESS_CHARS;
        for (int i = 0; ok && i < data.length; i++) {
            byte c = data[i];
            ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_'
                    || c == '-';
        }
        if (!ok) {
            throw new ContractException(Texts.ref(Contract.BUSINESS) + " must be 1-" + Contract.MAX_BUSINESS_CHARS
                    + " characters of [A-Za-z0-9._-]: " + Texts.quote(data) + " (" + data.length + " bytes)");
        }
    }

    /**
     * The ingest record that schedules value for business (docs/producing.md, "Publishing a
     * delayed message"). Checks run in the order delayd's parser runs them, so that the first
     * problem is named as delayd would name it. A cron expression and a time zone are checked by
     * delayd only.
     */
    public static DelaydRecord scheduleRecord(String business, byte[] value, ScheduleOptions o) {
        List<Header> out = new ArrayList<>();
        if (o.upsert) {
            out.add(Header.of(Contract.OP, Contract.OP_UPSERT));
        }
        if (o.jobId != null) {
            checkJobId(o.jobId);
            out.add(Header.of(Contract.JOB_ID, o.jobId));
        } else if (o.upsert) {
            throw new ContractException("op 'upsert' needs header 'job-id'");
        }
        byte[] key = recordKey(o.jobId, o.key);
        When.Checked times = When.check(o.at, o.delay, o.cron != null);
        checkBusiness(business);
        out.add(Header.of(Contract.BUSINESS, business));
        out.addAll(times.headers());

        if (o.every != null) {
            Texts.checkNumber(Contract.REPEAT_EVERY, o.every, 1, Contract.MAX_INTERVAL_MS);
        }
        if (o.count != null) {
            Texts.checkNumber(Contract.REPEAT_COUNT, o.count, 1, Contract.MAX_REPEAT_COUNT);
        }
        if (o.cron != null && o.every != null) {
            throw new ContractException("headers 'repeat-cron' and 'repeat-every-ms' given: one or the other");
        }
        boolean repeats = o.every != null || o.cron != null;
        if (o.count != null && !repeats) {
            throw new ContractException("header 'repeat-count' given without 'repeat-every-ms'");
        }
        if (o.tz != null && o.cron == null) {
            throw new ContractException("header 'repeat-tz' given without 'repeat-cron'");
        }
        long untilMs = -1;
        if (o.until != null) {
            if (!repeats) {
                throw new ContractException(
                        Texts.ref(Contract.REPEAT_UNTIL) + " given without 'repeat-every-ms' or 'repeat-cron'");
            }
            TimeFormat.Parsed p = TimeFormat.parseTimestampMs(o.until);
            if (!p.ok()) {
                throw new ContractException(Texts.ref(Contract.REPEAT_UNTIL)
                        + " is not epoch milliseconds or RFC 3339 within 1970..9999: " + Texts.quote(o.until));
            }
            untilMs = p.epochMs();
        }
        if (o.catchup != null) {
            if (!repeats) {
                throw new ContractException(
                        Texts.ref(Contract.REPEAT_CATCHUP) + " given without 'repeat-every-ms' or 'repeat-cron'");
            }
            if (!List.of(Catchup.LATEST, Catchup.ALL, Catchup.NONE).contains(o.catchup)) {
                throw new ContractException(Texts.ref(Contract.REPEAT_CATCHUP)
                        + " must be 'latest', 'all' or 'none': " + Texts.quote(o.catchup));
            }
        }
        // A calendar repeat's first occurrence needs its expression evaluated: delayd checks that one.
        if (untilMs >= 0 && times.atMs() >= 0 && o.cron == null && untilMs < times.atMs()) {
            throw new ContractException(Texts.ref(Contract.REPEAT_UNTIL) + " is before the first occurrence, "
                    + TimeFormat.formatRfc3339Ms(times.atMs()));
        }
        if (o.lateness != null) {
            Texts.checkNumber(Contract.MAX_LATENESS, o.lateness, 1, Contract.MAX_INTERVAL_MS);
        }
        String[][] repeat = {{Contract.REPEAT_EVERY, o.every}, {Contract.REPEAT_CRON, o.cron},
            {Contract.REPEAT_TZ, o.tz}, {Contract.REPEAT_COUNT, o.count}, {Contract.REPEAT_UNTIL, o.until},
            {Contract.REPEAT_CATCHUP, o.catchup}, {Contract.MAX_LATENESS, o.lateness}};
        for (String[] h : repeat) {
            if (h[1] != null) {
                out.add(Header.of(h[0], h[1]));
            }
        }
        for (Header h : o.headers) {
            if (Contract.RESERVED.contains(h.key())) {
                throw new ContractException(
                        Texts.ref(h.key()) + " is delayd's: give it through the client's arguments, not in headers");
            }
        }
        out.addAll(o.headers);
        return new DelaydRecord(Topic.INGEST, key, out, value);
    }

    /** The ingest record that cancels jobId (contract::cancel_record). */
    public static DelaydRecord cancelRecord(String jobId) {
        checkJobId(jobId);
        return new DelaydRecord(Topic.INGEST, Texts.utf8(jobId),
                List.of(Header.of(Contract.OP, Contract.OP_CANCEL), Header.of(Contract.JOB_ID, jobId)), null);
    }

    /**
     * The ingest record that moves the waiting job jobId to an instant, or a delay after this
     * record's timestamp (docs/producing.md, "Reschedule"). Exactly one time is needed: none, or
     * an instant and a delay, is refused as delayd refuses it.
     */
    public static DelaydRecord rescheduleRecord(String jobId, When... when) {
        checkJobId(jobId);
        String at = null, delay = null;
        for (When w : when) {
            at = w.at != null ? w.at : at;
            delay = w.delay != null ? w.delay : delay;
        }
        List<Header> headers = new ArrayList<>(
                List.of(Header.of(Contract.OP, Contract.OP_RESCHEDULE), Header.of(Contract.JOB_ID, jobId)));
        headers.addAll(When.check(at, delay, false).headers());
        return new DelaydRecord(Topic.INGEST, Texts.utf8(jobId), headers, null);
    }

    /**
     * The first header called name as UTF-8 text, or null when there is none or it has no value
     * (delayd reads the first of a repeated name).
     */
    public static String headerOf(Iterable<Header> headers, String name) {
        for (Header h : headers) {
            if (h.key().equals(name)) {
                return h.text();
            }
        }
        return null;
    }

    /**
     * The status record about the ready record whose headers are readyHeaders: its job-id and
     * attempt echoed, so that a report about an earlier delivery cannot settle a later one
     * (docs/consuming.md, "Status reports"). status is {@link Status#RUNNING}, FINISHED or FAILED.
     */
    public static DelaydRecord reportRecord(Iterable<Header> readyHeaders, String status, ReportOptions o) {
        String jobId = headerOf(readyHeaders, Contract.JOB_ID);
        if (jobId == null) {
            throw new ContractException("status record without header 'job-id'");
        }
        checkJobId(jobId);
        if (!List.of(Status.RUNNING, Status.FINISHED, Status.FAILED).contains(status)) {
            throw new ContractException(Texts.ref(Contract.STATUS) + " must be 'running', 'finished' or 'failed': "
                    + Texts.quote(status));
        }
        List<Header> out = new ArrayList<>(List.of(Header.of(Contract.JOB_ID, jobId), Header.of(Contract.STATUS, status)));
        String attempt = headerOf(readyHeaders, Contract.ATTEMPT);
        if (attempt != null) {
            out.add(Header.of(Contract.ATTEMPT, attempt));
        }
        if (o.error != null) {
            out.add(Header.of(Contract.ERROR, o.error));
        }
        if (o.retryAfter != null) {
            if (!status.equals(Status.FAILED)) {
                throw new ContractException("retry_after is only for status 'failed', not " + Texts.quote(status));
            }
            Texts.checkNumber(Contract.RETRY_AFTER, o.retryAfter, 0, Contract.MAX_RETRY_AFTER_MS);
            out.add(Header.of(Contract.RETRY_AFTER, o.retryAfter));
        }
        if (attempt != null) {
            Texts.checkNumber(Contract.ATTEMPT, attempt, 1, Contract.MAX_ATTEMPT);
        }
        return new DelaydRecord(Topic.STATUS, Texts.utf8(jobId), out, null);
    }

    /** reportRecord without options. */
    public static DelaydRecord reportRecord(Iterable<Header> readyHeaders, String status) {
        return reportRecord(readyHeaders, status, new ReportOptions());
    }

    private static byte[] recordKey(String jobId, String key) {
        if (jobId != null && key != null && !key.equals(jobId)) {
            throw new ContractException("key " + Texts.quote(key) + " differs from job_id " + Texts.quote(jobId)
                    + ": every record of a job is keyed by its job-id, so that its cancel, reschedule and reports"
                    + " land in its partition");
        }
        String k = jobId != null ? jobId : key;
        return k == null ? null : Texts.utf8(k);
    }
}
