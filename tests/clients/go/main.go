// The Go client (clients/go) against a real delayd and the local stack, as roundtrip_test.py
// checks the Python one: it schedules jobs (at an instant, after a delay), cancels one,
// reschedules one, and works off the ready topics with Work, which reports each job running and
// finished, with heartbeats for a business whose ack timeout is shorter than the work, and one
// job failed with a retry time (delayd.Retry), which comes again with attempt 2. Checked
// through Kafka (ready records never before their deliver-at, every record of a job keyed by its
// job-id, reports echoing the attempt, nothing delivered for the cancelled job) and through Redis
// (`delayctl get`: each job's final state, and no redelivery of the job that heartbeats held).
//
//	go run . <delayd> <delayctl> <output dir>     (needs KAFKA_BOOTSTRAP, REDIS_URL)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	delayd "github.com/delayd/delayd/clients/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// Of business "slow": its job works 7.5 s, held by heartbeats every 0.5 s. The deadline runs from
	// the mark after Kafka acknowledged the ready record, and the first report must reach delayd
	// before it: 6 s leaves room for a consumer a loaded machine keeps waiting (2.9 s seen in CI,
	// other suites' JVMs starting beside it, when it was 3 s and the job was redelivered before its
	// first heartbeat).
	ackTimeoutMs = 6000
	slowWork     = 7500 * time.Millisecond
	heartbeat    = 500 * time.Millisecond
	retryAfter   = 300 * time.Millisecond // of the job whose first attempt fails
	// of each ready topic: as many as delayd gives those it creates
	readyPartitions = 4
)

type roundtrip struct {
	bootstrap []string
	env       []string
	delayctl  string
	logPath   string
	proc      *exec.Cmd
	exited    chan struct{}
	failures  []string
}

func nowMs() int64 { return time.Now().UnixMilli() }

func (rt *roundtrip) check(ok bool, format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	if ok {
		fmt.Println("ok   " + what)
	} else {
		fmt.Println("FAIL " + what)
		rt.failures = append(rt.failures, what)
	}
}

// fatal ends the checks: a step the others need did not happen.
type fatal string

// createTopics creates topics of `partitions` partitions each (replication 1, the stack's one
// broker); a topic that exists already is fine. A failure is fatal.
func (rt *roundtrip) createTopics(ctx context.Context, topics []string, partitions int) {
	admin, err := kgo.NewClient(kgo.SeedBrokers(rt.bootstrap...))
	if err != nil {
		panic(fatal(err.Error()))
	}
	defer admin.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	for _, t := range topics {
		topic := kmsg.NewCreateTopicsRequestTopic()
		topic.Topic, topic.NumPartitions, topic.ReplicationFactor = t, int32(partitions), 1
		req.Topics = append(req.Topics, topic)
	}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		panic(fatal("create topics: " + err.Error()))
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			panic(fatal(fmt.Sprintf("create topic %s: %v", t.Topic, err)))
		}
	}
}

func (rt *roundtrip) wait(what string, cond func() bool, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		select {
		case <-rt.exited:
			panic(fatal("delayd exited"))
		case <-time.After(100 * time.Millisecond):
		}
	}
	panic(fatal("timed out waiting for " + what))
}

func (rt *roundtrip) get(job string) map[string]any {
	cmd := exec.Command(rt.delayctl, "get", job)
	cmd.Env = rt.env
	out, err := cmd.Output()
	var j map[string]any
	if err != nil || json.Unmarshal(out, &j) != nil {
		return map[string]any{}
	}
	return j
}

func number(j map[string]any, name string) float64 {
	v, _ := j[name].(float64)
	return v
}

// readAll is every record of topic, from the beginning, as Kafka has it.
func (rt *roundtrip) readAll(topic string) []*kgo.Record {
	c, err := kgo.NewClient(kgo.SeedBrokers(rt.bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		panic(fatal(err.Error()))
	}
	defer c.Close()
	var out []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		fetches := c.PollFetches(ctx)
		cancel()
		rs := fetches.Records()
		if len(rs) == 0 && ctx.Err() != nil {
			return out // 1.5 s without a record: the topic is read
		}
		out = append(out, rs...)
	}
}

func hdr(r *kgo.Record, name string) string {
	v, _ := delayd.HeaderOf(delayd.RecordHeaders(r), name)
	return v
}

type seen struct {
	r   *kgo.Record
	got int64
}

func (rt *roundtrip) run(run string) {
	ingest, status := run+".ingest", run+".status"
	rt.wait("delayd's partitions", func() bool {
		log, _ := os.ReadFile(rt.logPath)
		return strings.Contains(string(log), "assigned")
	}, 60*time.Second)
	ctx := context.Background()
	client, err := delayd.NewClient(strings.Join(rt.bootstrap, ","), delayd.IngestTopicName(ingest),
		delayd.StatusTopicName(status))
	if err != nil {
		panic(fatal(err.Error()))
	}
	defer client.Close()
	// The worker is reading before any job is scheduled: the slow job's ack timeout runs from its
	// ready record's production, so a worker still joining its group when that record comes would
	// see it redelivered however quickly it heartbeats. The ready topics are created here, as an
	// operator who does not let delayd create topics would (delayd's own request then finds them
	// there), so that the worker is assigned them before any record is written.
	readyTopics := []string{run + ".ready.rt", run + ".ready.slow"}
	rt.createTopics(ctx, readyTopics, readyPartitions)
	var assigned atomic.Int32
	consumer, err := delayd.NewConsumer(strings.Join(rt.bootstrap, ","), run+".worker", readyTopics,
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			for _, ps := range m {
				assigned.Add(int32(len(ps)))
			}
		}))
	if err != nil {
		panic(fatal(err.Error()))
	}
	defer consumer.Close()
	early := 0
	assignCtx, cancelAssign := context.WithTimeout(ctx, 60*time.Second)
	for int(assigned.Load()) < len(readyTopics)*readyPartitions {
		if assignCtx.Err() != nil {
			panic(fatal("the worker's consumer was not assigned the ready topics in 60 s"))
		}
		pollCtx, cancelPoll := context.WithTimeout(assignCtx, 100*time.Millisecond)
		early += len(consumer.PollFetches(pollCtx).Records())
		cancelPoll()
	}
	cancelAssign()
	rt.check(early == 0, "no ready record before any job was scheduled (%d)", early)
	// One job goes round before the timed part (scheduled, delivered, read by the worker's
	// consumer, reported, the report applied), so that a Kafka still settling new groups and
	// transactions (seconds of it, seen in CI) does not eat into the slow job's ack timeout.
	warm := run + "-warm"
	if _, err := client.Schedule(ctx, "rt", []byte("warm"), delayd.DelayMillis(0), delayd.JobID(warm)); err != nil {
		panic(fatal("refused: " + err.Error()))
	}
	if err := client.Flush(ctx); err != nil {
		panic(fatal("flush: " + err.Error()))
	}
	warmCtx, cancelWarm := context.WithTimeout(ctx, 60*time.Second)
	var warmRecord *kgo.Record
	for warmRecord == nil {
		if warmCtx.Err() != nil {
			panic(fatal("the warm-up job was not delivered in 60 s"))
		}
		for _, r := range consumer.PollFetches(warmCtx).Records() {
			if hdr(r, "job-id") == warm {
				warmRecord = r
			}
		}
	}
	cancelWarm()
	if _, err := client.Report(ctx, warmRecord, delayd.StatusFinished); err != nil {
		panic(fatal("report: " + err.Error()))
	}
	if err := client.Flush(ctx); err != nil {
		panic(fatal("flush: " + err.Error()))
	}
	if err := consumer.CommitRecords(ctx, warmRecord); err != nil {
		panic(fatal("commit: " + err.Error()))
	}
	rt.wait("the warm-up job's report applied", func() bool { return rt.get(warm)["state"] == "finished" }, 60*time.Second)
	ids := map[string]string{}
	for _, n := range []string{"at", "delay", "cancelled", "moved", "slow", "retried"} {
		ids[n] = run + "-" + n
	}
	t0 := nowMs()
	at := t0 + 2000
	for _, call := range []func() (delayd.Record, error){
		func() (delayd.Record, error) {
			return client.Schedule(ctx, "rt", []byte("at"), delayd.AtMillis(at), delayd.JobID(ids["at"]),
				delayd.Headers(delayd.Header{Key: "trace-id", Value: []byte("t-at")}))
		},
		func() (delayd.Record, error) {
			return client.Schedule(ctx, "rt", []byte("delay"), delayd.Delay(1500*time.Millisecond),
				delayd.JobID(ids["delay"]))
		},
		func() (delayd.Record, error) {
			return client.Schedule(ctx, "rt", []byte("cancelled"), delayd.DelayMillis(2500),
				delayd.JobID(ids["cancelled"]))
		},
		func() (delayd.Record, error) {
			return client.Schedule(ctx, "rt", []byte("moved"), delayd.At(time.UnixMilli(t0+60_000)),
				delayd.JobID(ids["moved"]))
		},
		func() (delayd.Record, error) {
			return client.Schedule(ctx, "slow", []byte("slow"), delayd.Delay(500*time.Millisecond),
				delayd.JobID(ids["slow"]))
		},
		func() (delayd.Record, error) {
			return client.Schedule(ctx, "rt", []byte("retried"), delayd.DelayMillis(500), delayd.JobID(ids["retried"]))
		},
		func() (delayd.Record, error) { return client.Cancel(ctx, ids["cancelled"]) },
		func() (delayd.Record, error) { return client.Reschedule(ctx, ids["moved"], delayd.Delay(time.Second)) },
	} {
		if _, err := call(); err != nil {
			panic(fatal("refused: " + err.Error()))
		}
	}
	flushCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := client.Flush(flushCtx); err != nil {
		panic(fatal("flush: " + err.Error()))
	}
	tSent := nowMs()

	var got []seen
	handler := func(_ context.Context, r *kgo.Record) error {
		got = append(got, seen{r, nowMs()})
		if strings.HasSuffix(r.Topic, ".slow") {
			time.Sleep(slowWork) // the work: longer than the business's ack timeout
		}
		if string(r.Key) == ids["retried"] && hdr(r, "attempt") == "1" {
			return &delayd.Retry{Err: errors.New("try again"), After: retryAfter}
		}
		return nil
	}
	workCtx, cancelWork := context.WithTimeout(ctx, 60*time.Second)
	defer cancelWork()
	done, err := delayd.Work(workCtx, client, consumer, handler, delayd.Heartbeat(heartbeat), delayd.Count(6))
	rt.check(done == 6 && err == nil, "the worker handled 6 ready records (%d, %v)", done, err)
	// The cancelled job was due at t0 + 2.5 s: by now it would have come.
	if left := time.Until(time.UnixMilli(t0 + 4000)); left > 0 {
		pollCtx, cancelPoll := context.WithTimeout(ctx, left)
		for pollCtx.Err() == nil {
			for _, r := range consumer.PollFetches(pollCtx).Records() {
				got = append(got, seen{r, nowMs()})
			}
		}
		cancelPoll()
	}

	byID := map[string]seen{} // each job's first ready record
	deliveries := map[string][]seen{}
	for _, s := range got {
		job := hdr(s.r, "job-id")
		if _, ok := byID[job]; !ok {
			byID[job] = s
		}
		deliveries[job] = append(deliveries[job], s)
	}
	var gotIDs, wantIDs []string
	for id := range byID {
		gotIDs = append(gotIDs, id)
	}
	for _, n := range []string{"at", "delay", "moved", "slow", "retried"} {
		wantIDs = append(wantIDs, ids[n])
	}
	sort.Strings(gotIDs)
	sort.Strings(wantIDs)
	rt.check(strings.Join(gotIDs, " ") == strings.Join(wantIDs, " ") && len(got) == 6,
		"one ready record each for the jobs not cancelled, two for the one retried: %v (%d records)", gotIDs,
		len(got))
	for job, ss := range deliveries {
		for n, s := range ss {
			due, _ := strconv.ParseInt(hdr(s.r, "deliver-at"), 10, 64)
			produced := s.r.Timestamp.UnixMilli()
			rt.check(produced >= due && s.got >= due,
				"%s: produced %d ms and consumed %d ms after its deliver-at, never early", job, produced-due, s.got-due)
			rt.check(string(s.r.Key) == job && hdr(s.r, "attempt") == strconv.Itoa(n+1),
				"%s: keyed by its id, attempt %d (%s)", job, n+1, hdr(s.r, "attempt"))
		}
	}
	if ss := deliveries[ids["retried"]]; len(ss) == 2 {
		rt.check(ss[1].got-ss[0].got >= retryAfter.Milliseconds(),
			"the retried job: delivered again %d ms after its failed attempt, not before its retry time (%v)",
			ss[1].got-ss[0].got, retryAfter)
	}
	if s, ok := byID[ids["at"]]; ok {
		rt.check(hdr(s.r, "deliver-at") == strconv.FormatInt(at, 10) && hdr(s.r, "trace-id") == "t-at" &&
			string(s.r.Value) == "at", "the 'at' job: due at the instant given, its header and value carried")
	}
	if s, ok := byID[ids["delay"]]; ok {
		due, _ := strconv.ParseInt(hdr(s.r, "deliver-at"), 10, 64)
		rt.check(t0+1500 <= due && due <= tSent+1500, "the 'delay' job: due 1500 ms after its record")
	}
	if s, ok := byID[ids["moved"]]; ok {
		due, _ := strconv.ParseInt(hdr(s.r, "deliver-at"), 10, 64)
		rt.check(t0+1000 <= due && due <= tSent+1000, "the rescheduled job: due 1000 ms after the reschedule, not in 60 s")
	}

	expected := map[string]string{ids["at"]: "finished", ids["delay"]: "finished", ids["moved"]: "finished",
		ids["slow"]: "finished", ids["retried"]: "finished", ids["cancelled"]: "cancelled"}
	func() {
		defer func() { _ = recover() }() // timed out: the checks below say which
		rt.wait("every job's final state", func() bool {
			for job, state := range expected {
				if rt.get(job)["state"] != state {
					return false
				}
			}
			return true
		}, 15*time.Second)
	}()
	for job, state := range expected {
		j := rt.get(job)
		rt.check(j["state"] == state, "delayctl get %s: state %v, expected %s", job, j["state"], state)
	}
	slow := rt.get(ids["slow"])
	rt.check(number(slow, "attempt") == 1 && number(slow, "redelivered") == 0,
		"the slow job (%v of work, ack timeout %d ms) was held by heartbeats: attempt %v, redelivered %v",
		slowWork, ackTimeoutMs, slow["attempt"], number(slow, "redelivered"))

	perJob := map[string][]string{} // each job's reports: status/attempt
	for _, r := range rt.readAll(status) {
		job := hdr(r, "job-id")
		rt.check(string(r.Key) == job, "report %s %s: keyed by its job-id", job, hdr(r, "status"))
		perJob[job] = append(perJob[job], hdr(r, "status")+"/"+hdr(r, "attempt"))
		if hdr(r, "status") == "failed" {
			rt.check(job == ids["retried"] && hdr(r, "error") == "try again" &&
				hdr(r, "retry-after-ms") == strconv.FormatInt(retryAfter.Milliseconds(), 10),
				"failed report of %s: the handler's error %q and retry time %s ms", job, hdr(r, "error"),
				hdr(r, "retry-after-ms"))
		}
	}
	for job := range byID {
		st := perJob[job]
		want := "running/1 finished/1"
		if job == ids["retried"] {
			want = "running/1 failed/1 running/2 finished/2"
		}
		if job == ids["slow"] { // its heartbeats: counted below
			st = []string{st[0], st[len(st)-1]}
		}
		rt.check(strings.Join(st, " ") == want, "%s: reports %v, attempts echoed", job, perJob[job])
	}
	beats := 0
	for _, st := range perJob[ids["slow"]] {
		if st == "running/1" {
			beats++
		}
	}
	wantBeats := 1 + int(slowWork/heartbeat) - 1
	rt.check(beats >= wantBeats, "the slow job's heartbeats: %d running reports (at least %d)", beats, wantBeats)
	for _, r := range rt.readAll(ingest) {
		op := hdr(r, "op")
		if op == "" {
			op = "schedule"
		}
		rt.check(string(r.Key) == hdr(r, "job-id"), "ingest record %s of %s: keyed by its job-id", op,
			hdr(r, "job-id"))
	}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Println("usage: go run . <delayd> <delayctl> <output dir>")
		os.Exit(2)
	}
	delaydPath, delayctl, outDir := os.Args[1], os.Args[2], os.Args[3]
	bootstrap, redisURL := os.Getenv("KAFKA_BOOTSTRAP"), os.Getenv("REDIS_URL")
	if bootstrap == "" || redisURL == "" {
		fmt.Println("FAIL: KAFKA_BOOTSTRAP and REDIS_URL must be set (scripts/stack.sh up; its env)")
		os.Exit(1)
	}
	run := fmt.Sprintf("goclient-%d-%d", os.Getpid(), time.Now().UnixNano())
	rt := &roundtrip{bootstrap: strings.Split(bootstrap, ","), delayctl: delayctl,
		logPath: filepath.Join(outDir, run+".log"), exited: make(chan struct{})}
	rt.env = append(os.Environ(),
		"DELAYD_KAFKA_BOOTSTRAP="+bootstrap, "DELAYD_REDIS_URL="+redisURL,
		"DELAYD_KAFKA_INGEST_TOPIC="+run+".ingest", "DELAYD_KAFKA_DLQ_TOPIC="+run+".dlq",
		"DELAYD_KAFKA_STATUS_TOPIC="+run+".status", "DELAYD_KAFKA_READY_TOPIC_TEMPLATE="+run+".ready.{business}",
		"DELAYD_KAFKA_GROUP_ID="+run, "DELAYD_REDIS_PREFIX="+run, "DELAYD_KAFKA_CREATE_TOPICS=true",
		// rt keeps its jobs' payload, so that the one retried can be delivered again.
		fmt.Sprintf("DELAYD_SCHEDULER_BUSINESS=slow.ack_timeout_ms=%d,rt.keep_payload=true", ackTimeoutMs))
	log, err := os.Create(rt.logPath)
	if err != nil {
		fmt.Println("FAIL:", err)
		os.Exit(1)
	}
	rt.proc = exec.Command(delaydPath)
	rt.proc.Env, rt.proc.Stdout, rt.proc.Stderr = rt.env, log, log
	if err := rt.proc.Start(); err != nil {
		fmt.Println("FAIL: starting delayd:", err)
		os.Exit(1)
	}
	go func() { _ = rt.proc.Wait(); close(rt.exited) }()

	func() {
		defer func() {
			if p := recover(); p != nil {
				f, ok := p.(fatal)
				if !ok {
					panic(p)
				}
				fmt.Println("FAIL", string(f))
				rt.failures = append(rt.failures, string(f))
			}
		}()
		rt.run(run)
	}()

	_ = rt.proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-rt.exited:
	case <-time.After(20 * time.Second):
		_ = rt.proc.Process.Kill()
		<-rt.exited
	}
	log.Close()
	if len(rt.failures) > 0 {
		text, _ := os.ReadFile(rt.logPath)
		if len(text) > 4000 {
			text = text[len(text)-4000:]
		}
		fmt.Println(string(text))
		fmt.Printf("0 passed, 1 failed: %d check(s) failed\n", len(rt.failures))
		os.Exit(1)
	}
	fmt.Println("1 passed, 0 failed")
}
