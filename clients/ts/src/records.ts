/**
 * The records delayd's contract asks for, built and checked without Kafka.
 *
 * Every function here is pure: it returns a `DelaydRecord` (which topic, key, headers in order,
 * value) or throws `ContractError` with the message delayd's own ingest parser
 * (contract/ingest_parse.cpp) would put on the dead letter, so a bad call fails in the producer
 * instead of in the dead-letter topic. clients/vectors/ holds the calls and records every client
 * must agree on; the messages are the Python client's (clients/python) word for word.
 *
 * Rules every record follows:
 *  - every record of one job (schedule, cancel, reschedule, status report) is keyed by its
 *    job-id, so that they land in one partition, in order (README, "Reschedule", "Latest wins");
 *  - only headers the README documents are written; the caller's own `headers` are carried after
 *    them, in their order.
 */

/** The contract version these records follow (README, "The contract"); clients/vectors/ states
 * it too, and the package's major version follows it. */
export const CONTRACT_VERSION = 1;

// Header names (delayd's home for them: contract/ingest_parse.hpp).
export const OP = "op";
export const JOB_ID = "job-id";
export const DELIVER_AT = "deliver-at";
export const DELAY_MS = "delay-ms";
export const BUSINESS = "business";
export const ATTEMPT = "attempt";
export const REPEAT_EVERY = "repeat-every-ms";
export const REPEAT_COUNT = "repeat-count";
export const REPEAT_CRON = "repeat-cron";
export const REPEAT_TZ = "repeat-tz";
export const REPEAT_UNTIL = "repeat-until";
export const REPEAT_CATCHUP = "repeat-catchup";
export const MAX_LATENESS = "max-lateness-ms";
export const REPEAT = "repeat";
export const STATUS = "status";
export const ERROR = "error";
export const RETRY_AFTER = "retry-after-ms";
/** Headers the caller may not pass in `headers`: the client writes them from its arguments, or
 * delayd writes them on the ready record. */
export const RESERVED: readonly string[] = [OP, JOB_ID, DELIVER_AT, DELAY_MS, BUSINESS, ATTEMPT, REPEAT_EVERY,
  REPEAT_COUNT, REPEAT_CRON, REPEAT_TZ, REPEAT_UNTIL, REPEAT_CATCHUP, MAX_LATENESS, REPEAT, "redrive-count"];

export const MAX_EPOCH_MS = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
export const MAX_BUSINESS_CHARS = 100;
export const MAX_JOB_ID_CHARS = 200;
export const DERIVED_JOB_ID_PREFIX = "auto:";
export const STATUSES = ["running", "finished", "failed"] as const;
export const CATCHUPS = ["latest", "all", "none"] as const;
const MAX_REPEAT_COUNT = 1_000_000_000;
const MAX_INTERVAL_MS = 2 ** 53; // repeat-every-ms, max-lateness-ms
const MAX_RETRY_AFTER_MS = 86_400_000;
const MAX_ATTEMPT = 1_000_000_000;

/** Which topic a record goes to: the ingest topic or the status topic (their names are the
 * deployment's: kafka.ingest_topic, kafka.status_topic). */
export type Topic = "ingest" | "status";
export const INGEST: Topic = "ingest";
export const STATUS_TOPIC: Topic = "status";

export type Status = (typeof STATUSES)[number];
export type Catchup = (typeof CATCHUPS)[number];
/** Epoch milliseconds, RFC 3339 text (sent as written), or a Date. */
export type Instant = number | string | Date;
/** Milliseconds. */
export type Duration = number;
export type HeaderValue = string | Buffer | null;
export type Header = [name: string, value: HeaderValue];
/** Headers as [name, value] pairs (in order, a name may repeat) or as an object. */
export type Headers = ReadonlyArray<readonly [string, HeaderValue]> | { readonly [name: string]: HeaderValue };
/** A ready record's headers as Kafka gives them: pairs, or kafkajs's object (a repeated name as an
 * array, Buffers as values). */
export type ReadyHeaders =
  | ReadonlyArray<readonly [string, HeaderValue | undefined]>
  | { readonly [name: string]: HeaderValue | undefined | ReadonlyArray<string | Buffer> };

/** A call delayd would refuse; the message is the one delayd's parser gives, where it has one. */
export class ContractError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ContractError";
  }
}

/** One Kafka record: `topic` is INGEST or STATUS_TOPIC, headers in the order they are sent. */
export interface DelaydRecord {
  readonly topic: Topic;
  readonly key: string | null;
  readonly headers: readonly Header[];
  readonly value: string | Buffer | null;
}

function bytesOf(value: string | Buffer): Buffer {
  return typeof value === "string" ? Buffer.from(value, "utf8") : value;
}

/** config::quote_for_message: in double quotes, \ and " escaped, bytes outside 0x20-0x7e as
 * \xNN, cut after 80 bytes with "...". */
export function quote(value: string | Buffer, maxBytes = 80): string {
  const data = bytesOf(value);
  let out = '"';
  for (let n = 0; n < data.length; n++) {
    if (n === maxBytes) {
      out += "...";
      break;
    }
    const c = data[n] as number;
    const ch = String.fromCharCode(c);
    if (ch === '"' || ch === "\\") out += "\\" + ch;
    else if (c >= 0x20 && c <= 0x7e) out += ch;
    else out += "\\x" + c.toString(16).padStart(2, "0");
  }
  return out + '"';
}

const isDigits = (s: string): boolean => /^[0-9]+$/.test(s);

/** Days since 1970-01-01 of a proleptic Gregorian date, any year (0000 too). */
function daysFromCivil(year: number, m: number, d: number): number {
  const y = m <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function daysInMonth(y: number, m: number): number {
  if (m === 2) return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28;
  return [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1] as number;
}

export type TimeError = "" | "syntax" | "bad_field" | "out_of_range";

/** [epoch ms, ""] or [null, "syntax" | "bad_field" | "out_of_range"], as time_format.cpp. */
function parseRfc3339(s: string): [number | null, TimeError] {
  const fixed = (pos: number, n: number): number | null => {
    const part = s.slice(pos, pos + n);
    return part.length === n && isDigits(part) ? Number(part) : null;
  };
  if (s.length < 20) return [null, "syntax"];
  const year = fixed(0, 4), month = fixed(5, 2), day = fixed(8, 2);
  const hour = fixed(11, 2), minute = fixed(14, 2), second = fixed(17, 2);
  if (year === null || month === null || day === null || hour === null || minute === null || second === null ||
      s[4] !== "-" || s[7] !== "-" || (s[10] !== "T" && s[10] !== "t") || s[13] !== ":" || s[16] !== ":") {
    return [null, "syntax"];
  }
  let pos = 19;
  let millis = 0;
  if (s[pos] === ".") {
    pos += 1;
    const start = pos;
    let belowMs = false;
    while (pos < s.length && isDigits(s[pos] as string)) {
      if (pos - start < 3) millis = millis * 10 + Number(s[pos]);
      else if (s[pos] !== "0") belowMs = true;
      pos += 1;
    }
    const n = pos - start;
    if (n < 1 || n > 9) return [null, "syntax"];
    millis *= 10 ** Math.max(0, 3 - n);
    if (belowMs) millis += 1; // never early: a part of a millisecond rounds up
  }
  if (pos >= s.length) return [null, "syntax"];
  let offsetS = 0, offH = 0, offM = 0;
  if (s[pos] === "Z" || s[pos] === "z") {
    pos += 1;
  } else if (s[pos] === "+" || s[pos] === "-") {
    const oh = fixed(pos + 1, 2), om = fixed(pos + 4, 2);
    if (oh === null || pos + 3 >= s.length || s[pos + 3] !== ":" || om === null) return [null, "syntax"];
    offH = oh;
    offM = om;
    offsetS = (oh * 3600 + om * 60) * (s[pos] === "-" ? -1 : 1);
    pos += 6;
  } else {
    return [null, "syntax"];
  }
  if (pos !== s.length) return [null, "syntax"];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 ||
      second > 60 || offH > 23 || offM > 59) {
    return [null, "bad_field"];
  }
  const days = daysFromCivil(year, month, day);
  const ms = (days * 86400 + hour * 3600 + minute * 60 + second - offsetS) * 1000 + millis;
  if (ms < 0 || ms > MAX_EPOCH_MS) return [null, "out_of_range"];
  return [ms, ""];
}

/** contract::parse_timestamp_ms: all digits is epoch ms, anything else must be RFC 3339. */
export function parseTimestampMs(text: string): [number | null, TimeError] {
  if (isDigits(text)) {
    return BigInt(text) <= BigInt(MAX_EPOCH_MS) ? [Number(text), ""] : [null, "out_of_range"];
  }
  return parseRfc3339(text);
}

/** contract::format_rfc3339_ms: "2026-11-22T10:00:00.123Z". */
export function formatRfc3339Ms(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

const ref = (name: string): string => `header '${name}'`;

/** An integer number as header text (no exponent, however large). */
function integerText(name: string, n: unknown, what: string): string {
  if (typeof n === "bigint") return n.toString();
  if (typeof n !== "number" || !Number.isInteger(n)) {
    throw new ContractError(`${name} must be ${what}: ${describe(n)}`);
  }
  return BigInt(n).toString();
}

function describe(v: unknown): string {
  if (typeof v === "string") return quote(v);
  if (v instanceof Date) return isNaN(v.getTime()) ? "Invalid Date" : v.toISOString();
  return String(v);
}

/** The header text of an instant: epoch ms as given, RFC 3339 text as given, a Date as epoch ms. */
function instantText(name: string, at: Instant): string {
  if (at instanceof Date) {
    const ms = at.getTime();
    if (isNaN(ms)) throw new ContractError(`${name} must be a valid Date: Invalid Date`);
    return String(ms);
  }
  if (typeof at === "string") return at;
  return integerText(name, at, "epoch milliseconds (an integer), RFC 3339 text or a Date");
}

function checkDeliverAt(text: string): number {
  const [ms, error] = parseTimestampMs(text);
  if (ms !== null) return ms;
  const what = {
    syntax: "is not epoch milliseconds or RFC 3339",
    bad_field: "is not a valid date and time",
    out_of_range: "is outside 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999Z",
    "": "",
  }[error];
  throw new ContractError(`${ref(DELIVER_AT)} ${what}: ${quote(text)}`);
}

/** Milliseconds as header text. */
const msText = (name: string, d: Duration): string => integerText(name, d, "milliseconds (an integer)");

function checkDelay(text: string): void {
  if (!isDigits(text)) {
    throw new ContractError(`${ref(DELAY_MS)} is not a non-negative decimal number of milliseconds: ${quote(text)}`);
  }
  if (BigInt(text) > BigInt(MAX_EPOCH_MS)) throw new ContractError(`${ref(DELAY_MS)} is too large: ${quote(text)}`);
}

/** number_header(): decimal digits only, within [lo, hi]. */
function checkNumber(name: string, text: string, lo: number, hi: number): number {
  if (!isDigits(text) || BigInt(text) < BigInt(lo) || BigInt(text) > BigInt(hi)) {
    throw new ContractError(`${ref(name)} must be a decimal number from ${lo} to ${hi}: ${quote(text)}`);
  }
  return Number(text);
}

/** A job-id a producer may choose: 1-200 of 0x21-0x7E, not starting with "auto:". */
export function checkJobId(jobId: string): void {
  const text = String(jobId); // a caller without types may pass anything
  const data = bytesOf(text);
  if (data.length < 1 || data.length > MAX_JOB_ID_CHARS || data.some((c) => c < 0x21 || c > 0x7e)) {
    throw new ContractError(`${ref(JOB_ID)} must be 1-${MAX_JOB_ID_CHARS} printable ASCII characters without ` +
      `spaces: ${quote(data)} (${data.length} bytes)`);
  }
  if (text.startsWith(DERIVED_JOB_ID_PREFIX)) {
    throw new ContractError(`${ref(JOB_ID)} must not start with '${DERIVED_JOB_ID_PREFIX}', which is kept for ` +
      `the ids delayd derives: ${quote(text)}`);
  }
}

export function checkBusiness(business: string): void {
  const text = String(business);
  if (!new RegExp(`^[A-Za-z0-9._-]{1,${MAX_BUSINESS_CHARS}}$`).test(text)) {
    throw new ContractError(`${ref(BUSINESS)} must be 1-${MAX_BUSINESS_CHARS} characters of [A-Za-z0-9._-]: ` +
      `${quote(text)} (${bytesOf(text).length} bytes)`);
  }
}

/** The deliver-at or delay-ms header, checked; and the instant when it is known. */
function timeHeaders(at: Instant | undefined, delay: Duration | undefined, optional: boolean):
    [Header[], number | null] {
  if (at !== undefined && delay !== undefined) throw new ContractError("both deliver-at and delay-ms given");
  if (at !== undefined) {
    const text = instantText("at", at);
    return [[[DELIVER_AT, text]], checkDeliverAt(text)];
  }
  if (delay !== undefined) {
    const text = msText("delay", delay);
    checkDelay(text);
    return [[[DELAY_MS, text]], null];
  }
  if (optional) return [[], null];
  throw new ContractError("missing header 'deliver-at' (or 'delay-ms')");
}

function recordKey(jobId: string | undefined, key: string | undefined): string | null {
  if (jobId !== undefined && key !== undefined && key !== jobId) {
    throw new ContractError(`key ${quote(key)} differs from job_id ${quote(jobId)}: every record of a job is ` +
      "keyed by its job-id, so that its cancel, reschedule and reports land in its partition");
  }
  return jobId ?? key ?? null;
}

function ownHeaders(headers: Headers | undefined): Header[] {
  if (headers === undefined) return [];
  const items: Header[] = Array.isArray(headers)
    ? (headers as ReadonlyArray<readonly [string, HeaderValue]>).map(([n, v]) => [n, v])
    : Object.entries(headers as { readonly [name: string]: HeaderValue });
  for (const [name] of items) {
    if (RESERVED.includes(name)) {
      throw new ContractError(`${ref(name)} is delayd's: give it through the client's arguments, not in headers`);
    }
  }
  return items;
}

/** When a job is due: `at` (an instant) or `delay` (ms after the record's timestamp). */
export interface When {
  at?: Instant;
  delay?: Duration;
}

export interface ScheduleOptions extends When {
  /** The job's id (1-200 printable ASCII, no spaces); without it delayd derives one, and the job
   * cannot be cancelled or moved. */
  jobId?: string;
  /** The record's key when there is no jobId; with one, it must equal jobId. */
  key?: string;
  /** Carried to the ready record after delayd's own; a header of the contract is refused. */
  headers?: Headers;
  repeatEvery?: Duration;
  repeatCount?: number;
  repeatCron?: string;
  repeatTz?: string;
  repeatUntil?: Instant;
  repeatCatchup?: Catchup;
  maxLateness?: Duration;
  upsert?: boolean;
}

/**
 * The ingest record that schedules `value` for `business` (README, "Publishing a delayed
 * message"). Checks run in the order delayd's parser runs them, so the first problem is named as
 * delayd would name it. A cron expression and a time zone are checked by delayd only.
 */
export function scheduleRecord(business: string, value: string | Buffer | null,
                               options: ScheduleOptions = {}): DelaydRecord {
  const o = options;
  const out: Header[] = [];
  if (o.upsert) out.push([OP, "upsert"]);
  if (o.jobId !== undefined) {
    checkJobId(o.jobId);
    out.push([JOB_ID, o.jobId]);
  } else if (o.upsert) {
    throw new ContractError("op 'upsert' needs header 'job-id'");
  }
  const key = recordKey(o.jobId, o.key);
  const [times, atMs] = timeHeaders(o.at, o.delay, o.repeatCron !== undefined);
  checkBusiness(business);
  out.push([BUSINESS, business], ...times);

  const everyText = o.repeatEvery !== undefined ? msText("repeatEvery", o.repeatEvery) : undefined;
  if (everyText !== undefined) checkNumber(REPEAT_EVERY, everyText, 1, MAX_INTERVAL_MS);
  const countText = o.repeatCount !== undefined ? integerText("repeatCount", o.repeatCount, "an integer")
                                                : undefined;
  if (countText !== undefined) checkNumber(REPEAT_COUNT, countText, 1, MAX_REPEAT_COUNT);
  if (o.repeatCron !== undefined && everyText !== undefined) {
    throw new ContractError("headers 'repeat-cron' and 'repeat-every-ms' given: one or the other");
  }
  const repeats = everyText !== undefined || o.repeatCron !== undefined;
  if (countText !== undefined && !repeats) {
    throw new ContractError("header 'repeat-count' given without 'repeat-every-ms'");
  }
  if (o.repeatTz !== undefined && o.repeatCron === undefined) {
    throw new ContractError("header 'repeat-tz' given without 'repeat-cron'");
  }
  let untilText: string | undefined;
  let untilMs: number | null = null;
  if (o.repeatUntil !== undefined) {
    if (!repeats) throw new ContractError(`${ref(REPEAT_UNTIL)} given without 'repeat-every-ms' or 'repeat-cron'`);
    untilText = instantText("repeatUntil", o.repeatUntil);
    untilMs = parseTimestampMs(untilText)[0];
    if (untilMs === null) {
      throw new ContractError(`${ref(REPEAT_UNTIL)} is not epoch milliseconds or RFC 3339 within 1970..9999: ` +
        quote(untilText));
    }
  }
  if (o.repeatCatchup !== undefined) {
    if (!repeats) throw new ContractError(`${ref(REPEAT_CATCHUP)} given without 'repeat-every-ms' or 'repeat-cron'`);
    if (!(CATCHUPS as readonly string[]).includes(o.repeatCatchup)) {
      throw new ContractError(`${ref(REPEAT_CATCHUP)} must be 'latest', 'all' or 'none': ${quote(o.repeatCatchup)}`);
    }
  }
  // A calendar repeat's first occurrence needs its expression evaluated: delayd checks that one.
  if (untilMs !== null && atMs !== null && o.repeatCron === undefined && untilMs < atMs) {
    throw new ContractError(`${ref(REPEAT_UNTIL)} is before the first occurrence, ${formatRfc3339Ms(atMs)}`);
  }
  const latenessText = o.maxLateness !== undefined ? msText("maxLateness", o.maxLateness) : undefined;
  if (latenessText !== undefined) checkNumber(MAX_LATENESS, latenessText, 1, MAX_INTERVAL_MS);

  const optional: Array<[string, string | undefined]> = [[REPEAT_EVERY, everyText], [REPEAT_CRON, o.repeatCron],
    [REPEAT_TZ, o.repeatTz], [REPEAT_COUNT, countText], [REPEAT_UNTIL, untilText],
    [REPEAT_CATCHUP, o.repeatCatchup], [MAX_LATENESS, latenessText]];
  for (const [name, text] of optional) {
    if (text !== undefined) out.push([name, text]);
  }
  out.push(...ownHeaders(o.headers));
  return { topic: INGEST, key, headers: out, value };
}

/** The ingest record that cancels `jobId` (contract::cancel_record). */
export function cancelRecord(jobId: string): DelaydRecord {
  checkJobId(jobId);
  return { topic: INGEST, key: jobId, headers: [[OP, "cancel"], [JOB_ID, jobId]], value: null };
}

/** The ingest record that moves a waiting job to `at`, or `delay` after this record's timestamp
 * (README, "Reschedule"). */
export function rescheduleRecord(jobId: string, when: When): DelaydRecord {
  checkJobId(jobId);
  const [times] = timeHeaders(when.at, when.delay, false);
  return { topic: INGEST, key: jobId, headers: [[OP, "reschedule"], [JOB_ID, jobId], ...times], value: null };
}

const textOf = (v: string | Buffer): string => (typeof v === "string" ? v : v.toString("utf8"));

/** The first header called `name` as text, or null (delayd reads the first of a repeated name). */
export function headerOf(headers: ReadyHeaders | null | undefined, name: string): string | null {
  if (headers === null || headers === undefined) return null;
  if (Array.isArray(headers)) {
    for (const [n, v] of headers as ReadonlyArray<readonly [string, HeaderValue | undefined]>) {
      if (n === name) return v === null || v === undefined ? null : textOf(v);
    }
    return null;
  }
  const v = (headers as { readonly [name: string]: unknown })[name];
  const first = Array.isArray(v) ? v[0] : v;
  return typeof first === "string" || Buffer.isBuffer(first) ? textOf(first) : null;
}

export interface ReportOptions {
  /** What went wrong (status 'failed'). */
  error?: string;
  /** Deliver the job again after this many ms instead of delayd's backoff (status 'failed'). */
  retryAfter?: Duration;
}

/** The status record about the ready record whose headers are `readyHeaders`: its job-id and
 * attempt echoed (README, "Status reports"). */
export function reportRecord(readyHeaders: ReadyHeaders | null | undefined, status: Status | string,
                             options: ReportOptions = {}): DelaydRecord {
  const jobId = headerOf(readyHeaders, JOB_ID);
  if (jobId === null) throw new ContractError("status record without header 'job-id'");
  checkJobId(jobId);
  if (!(STATUSES as readonly string[]).includes(status)) {
    throw new ContractError(`${ref(STATUS)} must be 'running', 'finished' or 'failed': ${quote(status)}`);
  }
  const out: Header[] = [[JOB_ID, jobId], [STATUS, status]];
  const attempt = headerOf(readyHeaders, ATTEMPT);
  if (attempt !== null) out.push([ATTEMPT, attempt]);
  if (options.error !== undefined) out.push([ERROR, options.error]);
  if (options.retryAfter !== undefined) {
    if (status !== "failed") throw new ContractError(`retry_after is only for status 'failed', not ${quote(status)}`);
    const text = msText("retryAfter", options.retryAfter);
    checkNumber(RETRY_AFTER, text, 0, MAX_RETRY_AFTER_MS);
    out.push([RETRY_AFTER, text]);
  }
  if (attempt !== null) checkNumber(ATTEMPT, attempt, 1, MAX_ATTEMPT);
  return { topic: STATUS_TOPIC, key: jobId, headers: out, value: null };
}
