// BullMQ, the peer, through the phases of bench/run-e2e.sh, on the same Redis: the figures that
// README and docs/performance/cost.md put beside delayd's come from here, measured in the same run.
//
//   node bench/bullmq/peer_load.mjs --redis-url URL --tag T [sizes]   (bench/run-bullmq.sh runs it)
//
// It prints one JSON line per figure on stdout, named and shaped as e2e_load's raw figures (so
// that `e2e_load report` adds whole_life_max_rate and writes the sweep for the plot, and
// `e2e_load compare --peer` puts them in a column of their own); notes go to stderr.
//
// The phases, each on a queue of its own (prefix bullmq-bench-<tag>, removed at the end):
//   ingest   n jobs of a 200-byte value added with a delay of an hour (addBulk, 500 a call, a few
//            calls in flight), timed until Redis acknowledged the last: ingest_jobs_per_s; Redis's
//            used_memory before and after: redis_bytes_per_pending_job
//   burst    n jobs due evenly over spread-ms, added well before the first is due, then one
//            Worker: fire_jobs_per_s = n / (last job's start - first due), as e2e_load's burst
//   rates    for each R:S, jobs added at R a second for S seconds, each due delay-ms after its
//            add, with the Worker running: lateness_<R>_per_s and lateness_<R>_check
//   short    the same at the short rate with the short delay: lateness_short_<delay>ms
// (--phases picks some of them; all four by default). Each rate and the short delays also print
// "<stem>_cpu": CPU per job of this node process (BullMQ's client and Worker) and of Redis (its
// INFO cpu), from the first add until the last job was started: the cost of a whole life.
// A job's lateness is when the Worker's processor starts it minus BullMQ's own due time
// (job.timestamp + opts.delay, the client's clock as BullMQ takes it). A check is ok when every
// job was processed once and none early; an early job is the peer's behaviour, reported, not an
// error of this script. Exit status: 0 when every job of every phase was processed (early or
// not), 1 when one was lost or Redis could not be reached, 2 on a usage error.
import { readFileSync } from 'node:fs';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';

// ---- options --------------------------------------------------------------------------------
const defaults = {
  'redis-url': '', tag: '', 'n-ingest': '200000', 'n-burst': '100000', 'spread-ms': '2000',
  rates: '1000:20 5000:20 10000:30 20000:30', 'rate-delay-ms': '2000', short: '100:20',
  'short-delay-ms': '20', concurrency: '200', 'value-bytes': '200', 'jobs-per-call': '500',
  'calls-in-flight': '4', 'give-up-p50-ms': '2000', phases: 'ingest burst rates short',
};
const kPhases = ['ingest', 'burst', 'rates', 'short'];
function parseArgs(argv) {
  const o = { ...defaults };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    if (!(k in defaults) || i + 1 >= argv.length) usage(`unknown option or missing value: ${argv[i]}`);
    o[k] = argv[i + 1];
  }
  if (!o['redis-url'] || !o.tag) usage('--redis-url and --tag are required');
  return o;
}
function usage(why) {
  process.stderr.write(`peer_load: ${why}\nusage: node peer_load.mjs --redis-url URL --tag T ` +
    `[--n-ingest N] [--n-burst N] [--spread-ms MS] [--rates "R:S ..."] [--rate-delay-ms MS] ` +
    `[--short R:S] [--short-delay-ms MS] [--concurrency C] [--phases "ingest burst rates short"]\n`);
  process.exit(2);
}
// A whole number of at least `min` from option `k`.
function num(o, k, min = 0) {
  const v = Number(o[k]);
  if (!Number.isInteger(v) || v < min) usage(`--${k} must be a whole number of at least ${min}, not "${o[k]}"`);
  return v;
}
// "R:S R:S" as [{rate, seconds}].
function rateList(o, k) {
  return o[k].trim().split(/\s+/).filter(Boolean).map((spec) => {
    const m = /^(\d+):(\d+)$/.exec(spec);
    if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) usage(`--${k}: "${spec}" is not RATE:SECONDS`);
    return { rate: Number(m[1]), seconds: Number(m[2]) };
  });
}

const o = parseArgs(process.argv.slice(2));
const opts = {
  nIngest: num(o, 'n-ingest', 1), nBurst: num(o, 'n-burst', 1), spreadMs: num(o, 'spread-ms', 1),
  rates: rateList(o, 'rates'), rateDelayMs: num(o, 'rate-delay-ms'), short: rateList(o, 'short')[0],
  shortDelayMs: num(o, 'short-delay-ms'), concurrency: num(o, 'concurrency', 1),
  valueBytes: num(o, 'value-bytes'), perCall: num(o, 'jobs-per-call', 1),
  inFlight: num(o, 'calls-in-flight', 1), giveUpP50Ms: num(o, 'give-up-p50-ms', 1),
  phases: new Set(o.phases.trim().split(/\s+/).filter(Boolean)),
};
for (const ph of opts.phases) if (!kPhases.includes(ph)) usage(`--phases: "${ph}" is not one of ${kPhases.join(', ')}`);
const url = new URL(o['redis-url']);
if (url.protocol !== 'redis:') usage(`--redis-url: only redis:// URLs, not ${url.protocol}`);
const connection = {
  host: url.hostname, port: Number(url.port || 6379), db: Number(url.pathname.slice(1) || 0),
  username: decodeURIComponent(url.username) || undefined, password: decodeURIComponent(url.password) || undefined,
  maxRetriesPerRequest: null,  // a Worker's blocking connection requires it
};
const prefix = `bullmq-bench-${o.tag}`;
const version = JSON.parse(readFileSync(new URL('./node_modules/bullmq/package.json', import.meta.url))).version;
// The job's value as BullMQ stores it (JSON): a string of valueBytes - 2 characters and its quotes.
const value = 'x'.repeat(Math.max(opts.valueBytes - 2, 0));

const emit = (j) => process.stdout.write(JSON.stringify(j) + '\n');
const note = (s) => process.stderr.write(`bullmq: ${s}\n`);
// Each distinct message once: a failing call repeats its error for every job.
const noted = new Set();
const noteOnce = (s) => {
  if (!noted.has(s)) note(s);
  noted.add(s);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- measuring ------------------------------------------------------------------------------
// e2e_load's percentile: the nearest rank of a sorted array.
function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
}
function latenessJson(late) {
  const s = Float64Array.from(late).sort();
  const at = (p) => percentile(s, p);
  return { value: at(99), unit: 'ms', p50: at(50), p90: at(90), p99: at(99), p999: at(99.9),
    max: s.length ? s[s.length - 1] : 0, count: s.length, early: s.filter((v) => v < 0).length };
}
// A connection of this script's own, for INFO and the clean-up (BullMQ's are its own).
// It does not retry: a Redis that cannot be reached ends the run at once, where BullMQ's own
// connections would retry for ever.
const redis = new Redis({ ...connection, lazyConnect: true, retryStrategy: () => null });
redis.on('error', (e) => noteOnce(`redis: ${e.message}`));

// Redis's own CPU time so far (user + system), in ms: INFO cpu, so that a phase's CPU per job
// counts the server without reading /proc of a process this script may not own.
async function redisCpuMs() {
  const info = await redis.info('cpu');
  const field = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)[1]);
  return 1000 * (field('used_cpu_user') + field('used_cpu_sys'));
}
// This process's CPU time so far (BullMQ's client and Worker run in it), in ms.
function nodeCpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
// The figure "<stem>_cpu", shaped as e2e_load's: CPU per job of the node process (BullMQ) and of
// Redis over a phase of n jobs that started at cpu0 (from cpuNow()).
async function cpuNow() {
  return { node: nodeCpuMs(), redis: await redisCpuMs(), t: performance.now() };
}
async function cpuFigure(stem, n, cpu0) {
  const cpu1 = await cpuNow();
  const nodeMs = cpu1.node - cpu0.node;
  const redisMs = cpu1.redis - cpu0.redis;
  const perJob = (ms) => (n > 0 ? (1000 * ms) / n : 0);
  return { figure: `${stem}_cpu`, unit: 'us/job', n, seconds: (cpu1.t - cpu0.t) / 1000, node_ms: Math.round(nodeMs),
    redis_ms: Math.round(redisMs), node_us_per_job: perJob(nodeMs), redis_us_per_job: perJob(redisMs),
    value: perJob(nodeMs + redisMs) };
}

async function usedMemory() {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

// A Worker that records, for each job it starts, its lateness against BullMQ's own due time.
// done() resolves when `expected` jobs were started or `deadline` (epoch ms) passed.
class Collector {
  constructor(name, expected) {
    this.expected = expected;
    this.late = [];
    this.seen = new Set();
    this.duplicates = 0;
    this.lastStart = 0;
    this.waiters = [];
    this.worker = new Worker(name, async (job) => this.started(job), {
      connection, prefix, concurrency: opts.concurrency, removeOnComplete: { count: 0 },
    });
    this.worker.on('error', (e) => noteOnce(`worker: ${e.message}`));
  }
  started(job) {
    const now = Date.now();
    if (this.seen.has(job.id)) {
      ++this.duplicates;
      return;
    }
    this.seen.add(job.id);
    this.late.push(now - (job.timestamp + (job.opts.delay ?? 0)));
    this.lastStart = Math.max(this.lastStart, now);
    if (this.seen.size >= this.expected) this.waiters.splice(0).forEach((w) => w());
  }
  async done(deadline) {
    if (this.seen.size < this.expected) {
      await new Promise((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, Math.max(deadline - Date.now(), 0));
      });
    }
    await this.worker.close();
  }
  check(figure) {
    const processed = this.seen.size;
    const early = this.late.filter((v) => v < 0).length;
    return { figure, expected: this.expected, delivered: processed, lost: this.expected - processed,
      duplicates: this.duplicates, early, foreign: 0, ok: processed === this.expected && early === 0 };
  }
}

// Adds jobs first..first+count-1 in calls of perCall, at most inFlight calls outstanding;
// `delayOf(i)` is job i's delay in ms, taken when its call is made.
async function addJobs(queue, first, count, delayOf) {
  const pending = new Set();
  for (let i = first; i < first + count; i += opts.perCall) {
    const batch = [];
    for (let k = i; k < Math.min(i + opts.perCall, first + count); ++k) {
      batch.push({ name: 'j', data: value, opts: { delay: Math.max(delayOf(k), 0) } });
    }
    const p = queue.addBulk(batch).finally(() => pending.delete(p));
    pending.add(p);
    if (pending.size >= opts.inFlight) await Promise.race(pending);
  }
  await Promise.all(pending);
}

let lost = 0;
function checked(figure, collector) {
  const c = collector.check(figure);
  lost += c.lost;
  emit(c);
}

// ---- the phases -----------------------------------------------------------------------------
async function ingest(name) {
  const queue = new Queue(name, { connection, prefix });
  await queue.waitUntilReady();
  const before = await usedMemory();
  const t0 = performance.now();
  await addJobs(queue, 0, opts.nIngest, () => 3600_000);
  const seconds = (performance.now() - t0) / 1000;
  const after = await usedMemory();
  emit({ figure: 'ingest_jobs_per_s', value: opts.nIngest / seconds, unit: 'jobs/s', n: opts.nIngest, seconds });
  emit({ figure: 'redis_bytes_per_pending_job', value: (after - before) / opts.nIngest, unit: 'B', n: opts.nIngest,
    used_memory_before: before, used_memory_after: after, value_bytes: opts.valueBytes });
  await queue.obliterate({ force: true });
  await queue.close();
}

async function burst(name) {
  const n = opts.nBurst;
  const queue = new Queue(name, { connection, prefix });
  await queue.waitUntilReady();
  const leadMs = 5000 + Math.floor(n / 10);  // e2e_load's: ingest done before the first is due
  const firstDue = Date.now() + leadMs;
  await addJobs(queue, 0, n, (i) => firstDue + Math.floor((i * opts.spreadMs) / n) - Date.now());
  const marginMs = firstDue - Date.now();
  if (marginMs <= 0) note('burst: the adds were not done when the first job fell due');
  const collector = new Collector(name, n);
  await collector.done(firstDue + opts.spreadMs + 120_000);
  const spanS = Math.max(collector.lastStart - firstDue, 1) / 1000;
  emit({ figure: 'fire_jobs_per_s', value: collector.seen.size / spanS, unit: 'jobs/s', n, spread_ms: opts.spreadMs,
    offered_jobs_per_s: (n * 1000) / opts.spreadMs, last_ready_after_first_due_ms: collector.lastStart - firstDue,
    ingest_done_before_first_due_ms: marginMs, concurrency: opts.concurrency });
  emit({ figure: 'burst_lateness_ms', ...latenessJson(collector.late), n });
  checked('burst_check', collector);
  await queue.obliterate({ force: true });
  await queue.close();
}

// Jobs added at `rate` a second for `seconds`, each due `delayMs` after its add; returns the
// lateness figure.
async function steady(name, figure, rate, seconds, delayMs) {
  const n = rate * seconds;
  const queue = new Queue(name, { connection, prefix });
  await queue.waitUntilReady();
  const collector = new Collector(name, n);
  await collector.worker.waitUntilReady();
  const pending = new Set();
  const cpu0 = await cpuNow();
  const t0 = performance.now();
  let sent = 0;
  let lastSend = t0;
  while (sent < n) {
    const target = Math.min(n, Math.floor(((performance.now() - t0) / 1000) * rate) + 1);
    if (target > sent) {
      const batch = [];
      for (; sent < target; ++sent) batch.push({ name: 'j', data: value, opts: { delay: delayMs } });
      const p = queue.addBulk(batch).finally(() => pending.delete(p));
      pending.add(p);
      lastSend = performance.now();
    }
    if (sent < n) await sleep(1);
  }
  await Promise.all(pending);
  const spanS = (lastSend - t0) / 1000;
  const achieved = spanS > 0 ? (n - 1) / spanS : n;
  await collector.done(Date.now() + delayMs + 60_000 + Math.floor(n / 5));
  // Every job's whole life (add, wait, process, complete) falls in the window, as in e2e_load rate.
  const cpu = await cpuFigure(figure.replace(/_per_s$/, ''), n, cpu0);
  const lateness = { figure, ...latenessJson(collector.late), target_rate: rate, achieved_rate: achieved, seconds,
    delay_ms: delayMs, cdf_file: '' };
  emit(lateness);
  emit(cpu);
  checked(figure.replace(/_per_s$/, '') + '_check', collector);
  await queue.obliterate({ force: true });
  await queue.close();
  return lateness;
}

async function removeLeftovers() {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    if (keys.length) await redis.unlink(...keys);
    cursor = next;
  } while (cursor !== '0');
  redis.disconnect();
}

try {
  await redis.connect();
  await redis.ping();
} catch (e) {
  note(`cannot reach Redis at ${o['redis-url']}: ${e.message}`);
  process.exit(1);
}
emit({ figure: 'run', label: `BullMQ ${version}`, peer: 'bullmq', version, concurrency: opts.concurrency,
  n_ingest: opts.nIngest, n_burst: opts.nBurst, rates: o.rates, short: o.short, rate_delay_ms: opts.rateDelayMs,
  short_delay_ms: opts.shortDelayMs, started_at_ms: Date.now() });
try {
  if (opts.phases.has('ingest')) {
    note(`ingest: ${opts.nIngest} jobs`);
    await ingest(`${o.tag}-ingest`);
  }
  if (opts.phases.has('burst')) {
    note(`burst: ${opts.nBurst} jobs due over ${opts.spreadMs} ms`);
    await burst(`${o.tag}-burst`);
  }
  for (const { rate, seconds } of opts.phases.has('rates') ? opts.rates : []) {
    note(`whole lives: ${rate}/s for ${seconds} s, due ${opts.rateDelayMs} ms after the add`);
    const l = await steady(`${o.tag}-rate-${rate}`, `lateness_${rate}_per_s`, rate, seconds, opts.rateDelayMs);
    if (l.p50 > opts.giveUpP50Ms) {
      note(`whole lives: p50 ${l.p50} ms at ${rate}/s; the higher rates are not run`);
      break;
    }
  }
  if (opts.phases.has('short')) {
    note(`short delays: ${opts.short.rate}/s for ${opts.short.seconds} s, due ${opts.shortDelayMs} ms after the add`);
    await steady(`${o.tag}-short`, `lateness_short_${opts.shortDelayMs}ms`, opts.short.rate, opts.short.seconds,
      opts.shortDelayMs);
  }
} finally {
  await removeLeftovers();
}
if (lost > 0) note(`${lost} jobs were never processed`);
process.exit(lost > 0 ? 1 : 0);
