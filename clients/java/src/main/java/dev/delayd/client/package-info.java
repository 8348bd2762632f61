/**
 * delayd's Java client: publish delayed jobs to delayd, cancel and move them, and report on their
 * ready records, over kafka-clients.
 *
 * <pre>{@code
 * try (Client client = new Client("127.0.0.1:19092")) {
 *     client.schedule("orders", "charge order 42".getBytes(StandardCharsets.UTF_8),
 *         new ScheduleOptions().delay(Duration.ofMinutes(1)).jobId("order-42"));
 *     client.flush();
 * }
 * }</pre>
 *
 * <p>Every call checks its arguments first, with the rules and messages of delayd's own ingest
 * parser ({@link dev.delayd.client.ContractException}), so that a bad call fails in the caller,
 * not as a dead letter. {@link dev.delayd.client.Records} builds and checks the records without
 * Kafka; {@link dev.delayd.client.Client} sends them; {@link dev.delayd.client.Work} runs a handler
 * over a ready topic with status reports; {@link dev.delayd.client.ReadyRecord} and
 * {@link dev.delayd.client.Dedup} read a ready record's delayd headers and drop a delivery read
 * twice; {@link dev.delayd.client.Consumers} makes consumers that read committed records only.
 */
package dev.delayd.client;
