/**
 * The partition of a keyed record as librdkafka's default partitioner (consistent_random) picks
 * it: CRC-32 of the key modulo the topic's partition count (a record without a key: any partition).
 * delayd, delayctl and the Python client produce through librdkafka; the same job's records from
 * this client land in the same partition as theirs, so that a cancel or reschedule sent by one of
 * them stays behind the schedule sent by another. (kafkajs's own default is Java's murmur2.)
 */
import type { ICustomPartitioner, PartitionerArgs } from "kafkajs";

const TABLE = ((): Uint32Array => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE 802.3, as zlib and librdkafka's rd_crc32). */
export function crc32(data: Buffer): number {
  let c = 0xffffffff;
  for (const byte of data) c = (TABLE[(c ^ byte) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** The partition librdkafka's consistent_random gives `key` among `count` partitions. */
export function partitionOf(key: string | Buffer, count: number): number {
  return crc32(typeof key === "string" ? Buffer.from(key, "utf8") : key) % count;
}

/** For kafkajs's producer({ createPartitioner }). */
export const LibrdkafkaPartitioner: ICustomPartitioner = () => ({ partitionMetadata, message }: PartitionerArgs) => {
  const count = partitionMetadata.length;
  if (message.key !== null && message.key !== undefined && message.key.length > 0) {
    return partitionOf(message.key, count);
  }
  const available = partitionMetadata.filter((p) => p.leader >= 0);
  const from = available.length > 0 ? available : partitionMetadata;
  return (from[Math.floor(Math.random() * from.length)] as { partitionId: number }).partitionId;
};
