/**
 * The TypeScript client against the shared test vectors (clients/vectors/*.json): every good call
 * must build exactly the vector's record (topic, key, headers in order, value), every bad call
 * must throw ContractError with the vector's message (or, for a record only delayd can refuse,
 * build that record). No Kafka needed: records.ts is pure.
 *
 *     DELAYD_VECTORS=clients/vectors node --test <compiled dir>/tests/clients/ts/vectors.test.js
 */
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";

import {
  CONTRACT_VERSION, ContractError, DelaydRecord, ScheduleOptions, cancelRecord, reportRecord, rescheduleRecord,
  scheduleRecord,
} from "../../../clients/ts/src/index";
import { partitionOf } from "../../../clients/ts/src/partitioner";
import { formatRfc3339Ms, parseTimestampMs } from "../../../clients/ts/src/records";

const VECTORS = process.env.DELAYD_VECTORS ?? join(__dirname, "..", "..", "..", "clients", "vectors");

type Json = { [key: string]: unknown };
interface Vector {
  name: string;
  call: string;
  args: Json;
  record?: DelaydRecord;
  error?: string;
  checked_by?: "parser" | "delayd" | "client";
}
interface VectorFile {
  contract_version: number;
  good: Vector[];
  bad: Vector[];
}

const files: Array<[string, VectorFile]> = readdirSync(VECTORS)
  .filter((n) => n.endsWith(".json"))
  .sort()
  .map((n) => [n, JSON.parse(readFileSync(join(VECTORS, n), "utf8")) as VectorFile]);

/** The vectors name the arguments as the Python client does; the TypeScript options are camelCase. */
const camel = (name: string): string => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

function options(args: Json): Json {
  return Object.fromEntries(Object.entries(args).map(([k, v]) => [camel(k), v]));
}

/** The vector's call on the TypeScript client's record builders. */
function call(name: string, args: Json): DelaydRecord {
  const { business, value, job_id, ready_headers, status, ...rest } = args;
  switch (name) {
    case "schedule": {
      const o = options(rest) as ScheduleOptions;
      if (job_id !== undefined) o.jobId = job_id as string;
      return scheduleRecord(business as string, value as string | null, o);
    }
    case "cancel":
      return cancelRecord(job_id as string);
    case "reschedule":
      return rescheduleRecord(job_id as string, options(rest));
    case "report":
      return reportRecord(ready_headers as Array<[string, string]>, status as string, options(rest));
    default:
      throw new Error(`unknown call ${name}`);
  }
}

const plain = (r: DelaydRecord): unknown => ({ topic: r.topic, key: r.key, headers: r.headers, value: r.value });

test("every vector file states the client's contract version", () => {
  assert.ok(files.length >= 4, `vector files in ${VECTORS}: ${files.length}`);
  for (const [name, doc] of files) assert.equal(doc.contract_version, CONTRACT_VERSION, name);
});

let good = 0;
let bad = 0;
for (const [file, doc] of files) {
  describe(file, () => {
    for (const v of doc.good) {
      test(`good: ${v.name}`, () => {
        assert.deepEqual(plain(call(v.call, v.args)), v.record);
        good += 1;
      });
    }
    for (const v of doc.bad) {
      test(`bad (${v.checked_by}): ${v.name}`, () => {
        if (v.checked_by === "delayd") { // the client sends it; delayd refuses it
          assert.deepEqual(plain(call(v.call, v.args)), v.record);
        } else {
          assert.throws(() => call(v.call, v.args), (e: unknown) => {
            assert.ok(e instanceof ContractError, `${String(e)} is a ContractError`);
            assert.equal(e.message, v.error);
            return true;
          });
        }
        bad += 1;
      });
    }
  });
}

test("every vector ran", () => {
  const all = files.reduce((n, [, d]) => n + d.good.length + d.bad.length, 0);
  assert.equal(good + bad, all);
  assert.ok(good >= 20 && bad >= 30, `good ${good}, bad ${bad}`);
});

describe("TypeScript types", () => {
  // What the vectors cannot say in JSON.
  test("a Date is sent as epoch ms", () => {
    const r = scheduleRecord("orders", null, { at: new Date(Date.UTC(2026, 10, 22, 10)), jobId: "j" });
    assert.deepEqual(r.headers[2], ["deliver-at", "1795341600000"]);
  });
  test("an invalid Date and a fraction of a millisecond are refused", () => {
    assert.throws(() => rescheduleRecord("j", { at: new Date("nonsense") }), /at must be a valid Date/);
    assert.throws(() => rescheduleRecord("j", { delay: 1.5 }), /delay must be milliseconds \(an integer\): 1.5/);
  });
  test("a large integer is written without an exponent", () => {
    assert.throws(() => rescheduleRecord("j", { delay: 1e21 }), {
      message: "header 'delay-ms' is too large: \"1000000000000000000000\"",
    });
  });
  test("Buffers: a value, and a ready record's headers as kafkajs gives them", () => {
    const r = scheduleRecord("orders", Buffer.from([0, 1]), { delay: 1, jobId: "j", headers: { "trace-id": "t" } });
    assert.deepEqual(r.value, Buffer.from([0, 1]));
    assert.deepEqual(r.headers[r.headers.length - 1], ["trace-id", "t"]);
    const report = reportRecord({ "job-id": Buffer.from("j-1"), attempt: [Buffer.from("3"), Buffer.from("4")] },
      "finished");
    assert.deepEqual(plain(report), {
      topic: "status", key: "j-1", headers: [["job-id", "j-1"], ["status", "finished"], ["attempt", "3"]],
      value: null,
    });
  });
  test("a key's partition is librdkafka's (consistent_random: CRC-32 modulo the count)", () => {
    // The partitions librdkafka 2.0.2 (Debian's, under confluent-kafka) gave these keys in a
    // topic of 7 partitions.
    const librdkafka: Array<[string, number]> = [["order-42", 1], ["j-1", 1], ["digest-daily", 2], ["a", 4],
      ["tsclient-25685-1795579806787-slow", 0], ["x".repeat(200), 6], ["\u00fc", 4]];
    for (const [key, partition] of librdkafka) assert.equal(partitionOf(key, 7), partition, key);
  });
  test("RFC 3339 reading agrees with Date over the whole range", () => {
    let seed = 7;
    const next = (): number => { // a small LCG: the same numbers every run
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const max = 253_402_300_799_999;
    for (const ms of [0, max, ...Array.from({ length: 2000 }, () => Math.floor(next() * max))]) {
      const text = formatRfc3339Ms(ms);
      assert.deepEqual(parseTimestampMs(text), [ms, ""], text);
      assert.equal(Date.parse(text), ms, text);
    }
  });
});
