package delayd

// Publishing to delayd, and working off its ready records, over franz-go.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The topic names a deployment has when it does not set kafka.ingest_topic and
// kafka.status_topic.
const (
	DefaultIngestTopic = "delay-ingest"
	DefaultStatusTopic = "delay-status"
)

// reportTimeout bounds Work's wait for Kafka to take a job's final report, and the commit of its
// offset, once its context has ended (the work is done: its outcome is still worth reporting).
const reportTimeout = 30 * time.Second

// pollErrorPause is how long Work waits before polling again after a poll that gave only errors.
const pollErrorPause = 250 * time.Millisecond

// DeliveryError is Kafka not acknowledging records.
type DeliveryError struct{ Errors []error }

func (e *DeliveryError) Error() string {
	texts := make([]string, len(e.Errors))
	for i, err := range e.Errors {
		texts[i] = err.Error()
	}
	return fmt.Sprintf("%d record(s) not acknowledged: %s", len(e.Errors), strings.Join(texts, "; "))
}

func (e *DeliveryError) Unwrap() []error { return e.Errors }

// Client publishes delayd's records through a franz-go client. Each call checks its arguments
// (a *ContractError, with delayd's message), produces, and returns the Record it sent; Flush
// waits until Kafka has them all. A call's ctx is its record's (as franz-go's Produce): a record
// whose ctx ends before Kafka has it is not sent, and Flush says so. A Client is safe for
// concurrent use.
type Client struct {
	kafka                    *kgo.Client
	owned                    bool
	ingestTopic, statusTopic string
	mu                       sync.Mutex
	errors                   []error
}

// ClientOption is an option of NewClient.
type ClientOption func(*Client)

// IngestTopicName is the deployment's kafka.ingest_topic (default "delay-ingest").
func IngestTopicName(name string) ClientOption { return func(c *Client) { c.ingestTopic = name } }

// StatusTopicName is the deployment's kafka.status_topic (default "delay-status").
func StatusTopicName(name string) ClientOption { return func(c *Client) { c.statusTopic = name } }

// NewClient makes a Client with a franz-go client of its own for the brokers in bootstrap
// (comma-separated host:port; idempotent producing, franz-go's default). Close closes it.
func NewClient(bootstrap string, opts ...ClientOption) (*Client, error) {
	kc, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		return nil, err
	}
	c := NewClientWith(kc, opts...)
	c.owned = true
	return c, nil
}

// NewClientWith makes a Client that produces through kc, which the caller keeps and closes.
func NewClientWith(kc *kgo.Client, opts ...ClientOption) *Client {
	c := &Client{kafka: kc, ingestTopic: DefaultIngestTopic, statusTopic: DefaultStatusTopic}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Kafka is the franz-go client the Client produces through.
func (c *Client) Kafka() *kgo.Client { return c.kafka }

// Close closes the franz-go client NewClient made (not one given to NewClientWith).
func (c *Client) Close() {
	if c.owned {
		c.kafka.Close()
	}
}

func (c *Client) send(ctx context.Context, r Record, err error) (Record, error) {
	if err != nil {
		return Record{}, err
	}
	kr := &kgo.Record{Topic: c.ingestTopic, Key: r.Key, Value: r.Value}
	if r.Topic == StatusTopic {
		kr.Topic = c.statusTopic
	}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	c.kafka.Produce(ctx, kr, func(_ *kgo.Record, err error) {
		if err != nil {
			c.mu.Lock()
			c.errors = append(c.errors, err)
			c.mu.Unlock()
		}
	})
	return r, nil
}

// Schedule schedules value for business: At, AtMillis, AtText, Delay or DelayMillis, and
// JobID, Key, Headers, RepeatEvery, RepeatCount, RepeatCron, RepeatTZ, RepeatUntil,
// RepeatCatchup, MaxLateness, Upsert (see ScheduleRecord).
func (c *Client) Schedule(ctx context.Context, business string, value []byte, opts ...Option) (Record, error) {
	r, err := ScheduleRecord(business, value, opts...)
	return c.send(ctx, r, err)
}

// Cancel cancels the job jobID.
func (c *Client) Cancel(ctx context.Context, jobID string) (Record, error) {
	r, err := CancelRecord(jobID)
	return c.send(ctx, r, err)
}

// Reschedule moves the waiting job jobID to At, or Delay after this record.
func (c *Client) Reschedule(ctx context.Context, jobID string, w ...When) (Record, error) {
	r, err := RescheduleRecord(jobID, w...)
	return c.send(ctx, r, err)
}

// Report reports status (StatusRunning, StatusFinished, StatusFailed) about a ready record,
// echoing its job-id and attempt, so that a report about an earlier delivery cannot settle a
// later one; WithError and RetryAfter add the error text and the retry time.
func (c *Client) Report(ctx context.Context, ready *kgo.Record, status string, opts ...ReportOption) (Record,
	error) {
	r, err := ReportRecord(RecordHeaders(ready), status, opts...)
	return c.send(ctx, r, err)
}

// RecordHeaders is a franz-go record's headers as this package's Header list.
func RecordHeaders(r *kgo.Record) []Header {
	out := make([]Header, len(r.Headers))
	for i, h := range r.Headers {
		out[i] = Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// Flush waits until Kafka has acknowledged every record sent; a *DeliveryError if it has not
// acknowledged some, ctx's error if ctx ends first.
func (c *Client) Flush(ctx context.Context) error {
	if err := c.kafka.Flush(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	errs := c.errors
	c.errors = nil
	c.mu.Unlock()
	if len(errs) > 0 {
		return &DeliveryError{Errors: errs}
	}
	return nil
}

// ConsumerOpts are the franz-go options of a group consumer of the ready topics as Work wants it:
// group and topics, offsets committed by Work (kgo.DisableAutoCommit), a new group reading from
// the start, and kgo.FetchIsolationLevel(kgo.ReadCommitted()). franz-go's own default is
// ReadUncommitted, which hands the consumer the records of aborted transactions too (they stay in
// the topic, marked aborted): once delayd writes its ready records in Kafka transactions (the
// delivery mode exactly_once), the jobs of a transaction it aborts are delivered again in a later
// one, and a read-uncommitted consumer would see both, a duplicate. Records written without a
// transaction are read the same either way. Options given after these to kgo.NewClient override
// them.
func ConsumerOpts(group string, topics ...string) []kgo.Opt {
	return []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted())}
}

// NewConsumer makes a franz-go group consumer of topics for Work, for the brokers in bootstrap
// (comma-separated host:port): ConsumerOpts, then opts.
func NewConsumer(bootstrap, group string, topics []string, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...)}, ConsumerOpts(group, topics...)...)
	return kgo.NewClient(append(all, opts...)...)
}

// Retry is an error a handler returns to report the job failed and have it delivered again
// after After instead of delayd's backoff.
type Retry struct {
	Err   error
	After time.Duration
}

func (r *Retry) Error() string {
	if r.Err == nil {
		return "retry"
	}
	return r.Err.Error()
}

func (r *Retry) Unwrap() error { return r.Err }

// WorkOption is an option of Work.
type WorkOption func(*workOptions)

type workOptions struct {
	heartbeat time.Duration
	count     int
}

// Heartbeat repeats the running report every d while the handler runs, so that delayd does not
// deliver the job again; d must be less than the business's scheduler.ack_timeout_ms.
func Heartbeat(d time.Duration) WorkOption { return func(o *workOptions) { o.heartbeat = d } }

// Count makes Work return after n records (0, the default: until its context ends).
func Count(n int) WorkOption { return func(o *workOptions) { o.count = n } }

// Work works off the ready records consumer reads (a franz-go group consumer of the ready
// topics, with kgo.DisableAutoCommit and read-committed: NewConsumer makes one): for each one it reports running, calls handler, and
// reports finished, or failed with the handler's error text (a *Retry: with its retry time; a
// panic: with its value). The record's offset is committed once Kafka has the reports. Work
// returns the number of records handled, when ctx ends (with nil) or after Count records, or
// with the error of a report Kafka did not take or of a commit.
func Work(ctx context.Context, c *Client, consumer *kgo.Client,
	handler func(context.Context, *kgo.Record) error, opts ...WorkOption) (int, error) {
	var o workOptions
	for _, opt := range opts {
		opt(&o)
	}
	done := 0
	for (o.count == 0 || done < o.count) && ctx.Err() == nil {
		fetches := consumer.PollRecords(ctx, 1)
		if fetches.IsClientClosed() {
			return done, errors.New("the consumer is closed")
		}
		records := fetches.Records()
		if len(records) == 0 && fetches.Err() != nil && ctx.Err() == nil {
			// Transient here (a ready topic not created yet, a broker away): franz-go retries;
			// poll again after a pause rather than spin on an error it repeats.
			select {
			case <-ctx.Done():
			case <-time.After(pollErrorPause):
			}
		}
		for _, r := range records {
			if _, ok := HeaderOf(RecordHeaders(r), HeaderJobID); !ok {
				continue // not one of delayd's ready records
			}
			if err := workOne(ctx, c, consumer, r, handler, o.heartbeat); err != nil {
				return done, err
			}
			done++
		}
	}
	return done, nil
}

func workOne(ctx context.Context, c *Client, consumer *kgo.Client, r *kgo.Record, handler func(context.Context, *kgo.Record) error,
	heartbeat time.Duration) error {
	if _, err := c.Report(ctx, r, StatusRunning); err != nil {
		return err
	}
	if err := c.Flush(ctx); err != nil {
		return err
	}
	stop := make(chan struct{})
	var beats sync.WaitGroup
	if heartbeat > 0 {
		beats.Add(1)
		beatCtx := context.WithoutCancel(ctx) // the handler may go on after ctx ends: so do its beats
		go func() {
			defer beats.Done()
			t := time.NewTicker(heartbeat)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					_, _ = c.Report(beatCtx, r, StatusRunning) // a lost heartbeat: the next one follows
				}
			}
		}()
	}
	err := runHandler(ctx, r, handler)
	close(stop)
	beats.Wait()
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
		defer cancel()
	}
	status, opts := StatusFinished, []ReportOption(nil)
	if err != nil {
		status, opts = StatusFailed, []ReportOption{WithError(err.Error())}
		var retry *Retry
		if errors.As(err, &retry) {
			opts = append(opts, RetryAfter(retry.After))
		}
	}
	if _, err := c.Report(ctx, r, status, opts...); err != nil {
		return err
	}
	if err := c.Flush(ctx); err != nil {
		return err
	}
	return consumer.CommitRecords(ctx, r)
}

// runHandler is the handler's error, or a panic's value as one: the job's failure, reported to
// delayd.
func runHandler(ctx context.Context, r *kgo.Record, handler func(context.Context, *kgo.Record) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return handler(ctx, r)
}
