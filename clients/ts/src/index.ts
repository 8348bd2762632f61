/**
 * delayd-client: publish delayed jobs to delayd, and report on their ready records.
 *
 *     import { Client } from "delayd-client";
 *     const client = new Client({ brokers: "127.0.0.1:19092" });
 *     await client.schedule("orders", "charge order 42", { delay: 60_000, jobId: "order-42" });
 *
 * records.ts builds and checks the records (no Kafka needed); client.ts sends them with kafkajs,
 * and work() runs a handler over a ready topic with status reports.
 */
export { Client, ClientOptions, DeliveryError, Handler, Ready, Retry, WorkOptions, work } from "./client";
export { LibrdkafkaPartitioner, crc32, partitionOf } from "./partitioner";
export {
  CONTRACT_VERSION, Catchup, ContractError, DelaydRecord, Duration, Header, HeaderValue, Headers, Instant,
  ReadyHeaders, ReportOptions, ScheduleOptions, Status, Topic, When, cancelRecord, headerOf, reportRecord,
  rescheduleRecord, scheduleRecord,
} from "./records";
