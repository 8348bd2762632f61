/**
 * Schedules a few jobs with the TypeScript client (clients/ts), cancels one, moves one, and works
 * them off as they come due, reporting each running and finished.
 *
 *     node schedule_and_work.js --bootstrap 127.0.0.1:19092 --business demo
 *
 * Needs delayd running with its status topic (kafka.status_topic). In your project:
 * `npm install <delayd checkout>/clients/ts/delayd-client-1.0.0.tgz` (made there by `npm ci && npm pack`),
 * then compile this file with tsc. From a checkout, tests/clients/ts_test.sh compiles it.
 */
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";

import { Client, work } from "delayd-client";

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: {
      bootstrap: { type: "string", default: "127.0.0.1:19092" },
      business: { type: "string", default: "demo" },
      "ingest-topic": { type: "string", default: "delay-ingest" },
      "status-topic": { type: "string", default: "delay-status" },
      "ready-topic": { type: "string" }, // the business's ready topic (default: ready.<business>)
    },
  });
  const business = args.business as string;
  const client = new Client({
    brokers: args.bootstrap as string, ingestTopic: args["ingest-topic"] as string,
    statusTopic: args["status-topic"] as string,
  });
  const run = randomBytes(4).toString("hex");
  const id = (n: number): string => `demo-${run}-${n}`;
  await Promise.all([
    client.schedule(business, "in two seconds", { delay: 2000, jobId: id(1) }),
    client.schedule(business, "at an instant", { at: Date.now() + 3000, jobId: id(2) }),
    client.schedule(business, "never", { delay: 4000, jobId: id(3) }),
    client.cancel(id(3)),
    client.schedule(business, "moved", { delay: 3_600_000, jobId: id(4) }),
    client.reschedule(id(4), { delay: 1000 }),
  ]); // Kafka has all six records, each job's in order (one producer, keyed by job-id)
  console.log(`scheduled ${id(1)}, -2, -4 (and -3, cancelled)`);

  // delayd creates the business's ready topic at its first delivery; kafkajs cannot subscribe to
  // a topic before it exists.
  const kafka = client.kafka!; // made by the Client from `brokers`
  const topic = args["ready-topic"] ?? `ready.${business}`;
  const admin = kafka.admin();
  await admin.connect();
  while (!(await admin.listTopics()).includes(topic)) await new Promise((r) => setTimeout(r, 500));
  await admin.disconnect();
  // The business's workers: one group, so a job earlier runs left is worked off once, here too.
  const consumer = kafka.consumer({ groupId: "schedule-and-work-example" });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });

  const mine = new Set([id(1), id(2), id(4)]);
  const stop = new AbortController();
  await work(client, consumer, ({ message }) => { // the work; a throw would report the job failed
    const job = message.key?.toString() ?? "";
    console.log(`${job} attempt ${message.headers?.attempt?.toString()}: ${message.value?.toString()}`);
    mine.delete(job);
    if (mine.size === 0) stop.abort();
  }, { signal: stop.signal }); // reports running, then finished, for each record
  await consumer.disconnect();
  await client.disconnect();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
