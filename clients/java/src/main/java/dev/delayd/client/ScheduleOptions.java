package dev.delayd.client;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * The options of a schedule ({@link Client#schedule}, {@link Records#scheduleRecord}): its time
 * (at or delay), job-id, key, the caller's own headers, a repeat (an interval or a cron expression
 * in a zone, with a count, an end and a catch-up policy), a max lateness, upsert. Each setter
 * returns this; what is checked is checked when the record is built, in delayd's order.
 *
 * <pre>{@code
 * new ScheduleOptions().at(Instant.parse("2026-11-23T07:00:00Z")).jobId("digest")
 *     .repeatEvery(Duration.ofDays(1)).repeatCount(30)
 * }</pre>
 */
public final class ScheduleOptions {
    String at, delay, jobId, key, every, count, cron, tz, until, catchup, lateness;
    final List<Header> headers = new ArrayList<>();
    boolean upsert;

    /** Due at t (deliver-at, sent as epoch ms); a part of a millisecond rounds up, never early. */
    public ScheduleOptions at(Instant t) {
        return atText(TimeFormat.epochMillisText(t));
    }

    /** Due at this instant in epoch milliseconds. */
    public ScheduleOptions atMillis(long epochMs) {
        return atText(Long.toString(epochMs));
    }

    /** Due at this instant as delayd reads it: epoch ms or RFC 3339 text, sent as written. */
    public ScheduleOptions atText(String text) {
        at = text;
        return this;
    }

    /** Due this long after the record's timestamp (delay-ms); a part of a millisecond rounds up. */
    public ScheduleOptions delay(Duration d) {
        delay = TimeFormat.millisText(d);
        return this;
    }

    /** Due this many milliseconds after the record's timestamp. */
    public ScheduleOptions delayMillis(long ms) {
        delay = Long.toString(ms);
        return this;
    }

    /** The time of w (for the time a {@link When} holds). */
    public ScheduleOptions when(When w) {
        at = w.at;
        delay = w.delay;
        return this;
    }

    /**
     * The job's id: its cancel, reschedule and reports name it, and every record of the job is
     * keyed by it. Without one delayd derives the id; such a job cannot be cancelled or moved.
     */
    public ScheduleOptions jobId(String id) {
        jobId = id;
        return this;
    }

    /** The record's key; with a job-id it must be the job-id (or not given). */
    public ScheduleOptions key(String k) {
        key = k;
        return this;
    }

    /** A header of the caller's, carried to the ready record after delayd's own, in order. */
    public ScheduleOptions header(String name, String value) {
        headers.add(Header.of(name, value));
        return this;
    }

    /** Headers of the caller's, carried in order; a header of the contract is refused. */
    public ScheduleOptions headers(List<Header> h) {
        headers.addAll(h);
        return this;
    }

    /** Repeats the job at this interval (repeat-every-ms); a part of a millisecond rounds up. */
    public ScheduleOptions repeatEvery(Duration d) {
        every = TimeFormat.millisText(d);
        return this;
    }

    /** How many occurrences a repeating job has (repeat-count). */
    public ScheduleOptions repeatCount(long n) {
        count = Long.toString(n);
        return this;
    }

    /** Repeats the job on a cron expression (repeat-cron; its syntax is checked by delayd). */
    public ScheduleOptions repeatCron(String expr) {
        cron = expr;
        return this;
    }

    /** The IANA time zone of the cron expression (repeat-tz; checked by delayd). */
    public ScheduleOptions repeatTz(String zone) {
        tz = zone;
        return this;
    }

    /** No occurrence after t (repeat-until, sent as epoch ms; a part of a millisecond rounds up). */
    public ScheduleOptions repeatUntil(Instant t) {
        return repeatUntilText(TimeFormat.epochMillisText(t));
    }

    /** repeatUntil in epoch milliseconds. */
    public ScheduleOptions repeatUntilMillis(long epochMs) {
        return repeatUntilText(Long.toString(epochMs));
    }

    /** repeatUntil as epoch ms or RFC 3339 text, sent as written. */
    public ScheduleOptions repeatUntilText(String text) {
        until = text;
        return this;
    }

    /** What a repeating job does with missed occurrences: {@link Catchup#LATEST}, ALL or NONE. */
    public ScheduleOptions repeatCatchup(String mode) {
        catchup = mode;
        return this;
    }

    /**
     * Not delivered when delayd reaches it later than its time + d (max-lateness-ms); a part of a
     * millisecond rounds up.
     */
    public ScheduleOptions maxLateness(Duration d) {
        lateness = TimeFormat.millisText(d);
        return this;
    }

    /** The schedule replaces a job of the same id: the latest record wins (op upsert; needs a job-id). */
    public ScheduleOptions upsert() {
        upsert = true;
        return this;
    }
}
