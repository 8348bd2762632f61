/** Publishing to delayd, and working off its ready records, over kafkajs. */
import { Consumer, EachMessagePayload, IHeaders, Kafka, KafkaMessage, Message, Producer } from "kafkajs";

import { LibrdkafkaPartitioner } from "./partitioner";
import {
  ContractError, DelaydRecord, Duration, INGEST, JOB_ID, ReadyHeaders, ReportOptions, ScheduleOptions, Status,
  When, cancelRecord, headerOf, reportRecord, rescheduleRecord, scheduleRecord,
} from "./records";

/** Kafka did not acknowledge a record. */
export class DeliveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DeliveryError";
  }
}

export interface ClientOptions {
  /** Kafka's bootstrap servers: "host:port" strings, or one comma-separated string. */
  brokers?: string | string[];
  /** A kafkajs Kafka of your own (TLS, SASL, logging); `brokers` is then unused. */
  kafka?: Kafka;
  /** A kafkajs producer of your own; give it `idempotent: true, maxInFlightRequests: 1` so that a
   * job's records keep their order, and `createPartitioner: LibrdkafkaPartitioner` so that they
   * share a partition with the same job's records from delayctl or the Python client. */
  producer?: Producer;
  /** The deployment's kafka.ingest_topic. */
  ingestTopic?: string;
  /** The deployment's kafka.status_topic. */
  statusTopic?: string;
  clientId?: string;
}

/** A ready record: a kafkajs message, the payload eachMessage gets, or its headers as pairs. */
export type Ready =
  | Pick<KafkaMessage, "headers">
  | Pick<EachMessagePayload, "message">
  | ReadonlyArray<readonly [string, string | Buffer | null | undefined]>;

function readyHeaders(ready: Ready): ReadyHeaders | undefined {
  if (Array.isArray(ready)) return ready as ReadyHeaders;
  if ("message" in ready && ready.message !== undefined) return ready.message.headers;
  return (ready as Pick<KafkaMessage, "headers">).headers;
}

/** kafkajs takes headers as an object: a repeated name becomes an array of its values (the order
 * of one name's values is kept; Kafka gets the names in order of their first appearance). */
function kafkaHeaders(headers: DelaydRecord["headers"]): IHeaders {
  const out: { [name: string]: Array<string | Buffer | null> } = {};
  for (const [name, value] of headers) (out[name] ??= []).push(value);
  const flat: { [name: string]: unknown } = {};
  for (const [name, values] of Object.entries(out)) flat[name] = values.length === 1 ? values[0] : values;
  return flat as IHeaders; // a null value is a header without a value, which kafkajs encodes as such
}

/**
 * Publishes delayd's records. Each call checks its arguments first and throws ContractError (with
 * delayd's own message) before anything is sent; it then produces the record and returns a
 * promise of it, which resolves once Kafka has acknowledged it. Not awaiting is allowed: flush()
 * waits for every record sent and throws DeliveryError if any was refused.
 */
export class Client {
  readonly kafka: Kafka | undefined;
  readonly producer: Producer;
  readonly topics: { readonly ingest: string; readonly status: string };
  private connecting: Promise<void> | undefined;
  private queue: Array<{ record: DelaydRecord; resolve: (r: DelaydRecord) => void; reject: (e: unknown) => void }> =
    [];
  private sending = false;
  private pending = new Set<Promise<unknown>>();
  private errors: string[] = [];

  constructor(options: ClientOptions = {}) {
    const brokers = options.brokers ?? "127.0.0.1:19092";
    this.kafka = options.kafka ??
      (options.producer ? undefined : new Kafka({
        clientId: options.clientId ?? "delayd-client",
        brokers: (Array.isArray(brokers) ? brokers : brokers.split(",")).map((b) => b.trim()),
      }));
    this.producer = options.producer ??
      (this.kafka as Kafka).producer({
        idempotent: true, maxInFlightRequests: 1, createPartitioner: LibrdkafkaPartitioner,
      });
    this.topics = { ingest: options.ingestTopic ?? "delay-ingest", status: options.statusTopic ?? "delay-status" };
  }

  /** Connects the producer (the first send does it too; a failed connect is tried again by the
   * next send). */
  connect(): Promise<void> {
    if (this.connecting === undefined) {
      const connecting = this.producer.connect();
      this.connecting = connecting;
      connecting.catch(() => {
        if (this.connecting === connecting) this.connecting = undefined;
      });
    }
    return this.connecting;
  }

  /** Waits for the records sent, then disconnects the producer. */
  async disconnect(): Promise<void> {
    await Promise.allSettled([...this.pending]);
    if (this.connecting !== undefined) {
      this.connecting = undefined;
      await this.producer.disconnect();
    }
  }

  /** Sends a record built by records.ts; resolves once Kafka has acknowledged it. Records go out
   * in the order of the calls: those queued while a batch is on its way follow as the next batch. */
  send(record: DelaydRecord): Promise<DelaydRecord> {
    const sent = new Promise<DelaydRecord>((resolve, reject) => this.queue.push({ record, resolve, reject }));
    if (!this.sending) void this.drain();
    this.pending.add(sent);
    // Handled here, so that a record whose promise nobody awaits cannot end the process; flush()
    // reports its failure, and an awaited promise still rejects.
    sent.then(() => this.pending.delete(sent), (e: unknown) => {
      this.pending.delete(sent);
      this.errors.push(e instanceof Error ? e.message : String(e));
    });
    return sent;
  }

  private async drain(): Promise<void> {
    this.sending = true;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0);
      const byTopic = new Map<string, Message[]>();
      for (const { record } of batch) {
        const topic = record.topic === INGEST ? this.topics.ingest : this.topics.status;
        const messages = byTopic.get(topic) ?? [];
        messages.push({ key: record.key, value: record.value, headers: kafkaHeaders(record.headers) });
        byTopic.set(topic, messages);
      }
      try {
        await this.connect();
        await this.producer.sendBatch({ topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })) });
        for (const q of batch) q.resolve(q.record);
      } catch (e) {
        for (const q of batch) q.reject(e);
      }
    }
    this.sending = false;
  }

  /** Schedules `value` for `business` at `at` (epoch ms, RFC 3339 text sent as written, a Date) or
   * after `delay` ms; the other options as records.scheduleRecord. */
  schedule(business: string, value: string | Buffer | null, options: ScheduleOptions): Promise<DelaydRecord> {
    return this.send(scheduleRecord(business, value, options));
  }

  cancel(jobId: string): Promise<DelaydRecord> {
    return this.send(cancelRecord(jobId));
  }

  reschedule(jobId: string, when: When): Promise<DelaydRecord> {
    return this.send(rescheduleRecord(jobId, when));
  }

  /** Reports on a ready record (a kafkajs message, an eachMessage payload, or header pairs),
   * echoing its job-id and attempt. */
  report(ready: Ready, status: Status, options: ReportOptions = {}): Promise<DelaydRecord> {
    return this.send(reportRecord(readyHeaders(ready), status, options));
  }

  /** Waits until Kafka has acknowledged every record sent; DeliveryError if it has not. */
  async flush(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
    const errors = this.errors;
    this.errors = [];
    if (errors.length > 0) throw new DeliveryError(`${errors.length} record(s) not acknowledged: ${errors.join("; ")}`);
  }
}

/** Thrown by a handler: report the job failed, and have it delivered again after `after` ms
 * instead of delayd's backoff. */
export class Retry extends Error {
  constructor(error: string, readonly after?: Duration) {
    super(error);
    this.name = "Retry";
  }
}

export interface WorkOptions {
  /** Repeat `running` this often (ms; less than the business's scheduler.ack_timeout_ms) while the
   * handler runs, so that delayd does not deliver the job again. */
  heartbeatMs?: number;
  /** Return after this many ready records (0 or absent: until `signal` aborts). */
  count?: number;
  signal?: AbortSignal;
}

export type Handler = (ready: EachMessagePayload) => unknown;

/**
 * Works off the ready records `consumer` (a connected, subscribed kafkajs consumer) reads: for
 * each one reports `running`, calls handler(payload), and reports `finished`, or `failed` with
 * the error's text (Retry: with its retryAfter). The offset is committed once Kafka has the
 * reports. Runs the consumer (autoCommit off) and stops it when `count` records are done or
 * `signal` aborts; resolves with the number done. A record read after that is not committed, so
 * the group gets it again. A report Kafka refuses fails the record's eachMessage, which kafkajs
 * retries (the handler runs again).
 */
export function work(client: Client, consumer: Consumer, handler: Handler, options: WorkOptions = {}):
    Promise<number> {
  const count = options.count ?? 0;
  const signal = options.signal;
  return new Promise<number>((resolve, reject) => {
    let done = 0;
    let finishing = false;
    const finish = (error?: unknown): void => {
      if (finishing) return;
      finishing = true;
      signal?.removeEventListener("abort", onAbort);
      // Outside eachMessage: stop() waits for the record in hand.
      setImmediate(() => {
        consumer.stop().then(() => (error === undefined ? resolve(done) : reject(error)), reject);
      });
    };
    const onAbort = (): void => finish();
    if (signal?.aborted) {
      resolve(0);
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });

    const eachMessage = async (payload: EachMessagePayload): Promise<void> => {
      const { topic, partition, message } = payload;
      if (finishing || headerOf(message.headers, JOB_ID) === null) return; // not one of delayd's ready records
      await client.report(message, "running");
      const beats: Array<Promise<unknown>> = [];
      const timer = options.heartbeatMs
        ? setInterval(() => {
          beats.push(client.report(message, "running").catch(() => undefined));
          payload.heartbeat().catch(() => undefined); // the consumer group's, during a long handler
        }, options.heartbeatMs)
        : undefined;
      let status: Status = "finished";
      const outcome: ReportOptions = {};
      try {
        await handler(payload);
      } catch (e) {
        status = "failed";
        if (e instanceof Retry) {
          outcome.error = e.message;
          if (e.after !== undefined) outcome.retryAfter = e.after;
        } else {
          outcome.error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        }
      } finally {
        if (timer !== undefined) clearInterval(timer);
      }
      await Promise.allSettled(beats); // the last `running` before the outcome
      await client.report(message, status, outcome);
      await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
      done += 1;
      if (count > 0 && done >= count) finish();
    };
    consumer.run({ autoCommit: false, eachMessage }).catch(finish);
  });
}

export { ContractError };
