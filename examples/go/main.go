// Schedules a few jobs with the Go client (clients/go), cancels one, moves one, and works them
// off as they come due, reporting each running and finished.
//
//	cd examples/go && go run . -bootstrap 127.0.0.1:19092 -business demo
//
// Needs delayd running with its status topic (kafka.status_topic).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	delayd "github.com/delayd/delayd/clients/go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:19092", "Kafka's bootstrap servers")
	business := flag.String("business", "demo", "the business the jobs are for")
	ingestTopic := flag.String("ingest-topic", delayd.DefaultIngestTopic, "delayd's kafka.ingest_topic")
	statusTopic := flag.String("status-topic", delayd.DefaultStatusTopic, "delayd's kafka.status_topic")
	readyTopic := flag.String("ready-topic", "", "the business's ready topic (default: ready.<business>)")
	flag.Parse()
	if *readyTopic == "" {
		*readyTopic = "ready." + *business
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	client, err := delayd.NewClient(*bootstrap, delayd.IngestTopicName(*ingestTopic),
		delayd.StatusTopicName(*statusTopic))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	run := make([]byte, 4)
	_, _ = rand.Read(run)
	id := func(n int) string { return fmt.Sprintf("demo-%s-%d", hex.EncodeToString(run), n) }
	calls := []func() (delayd.Record, error){
		func() (delayd.Record, error) {
			return client.Schedule(ctx, *business, []byte("in two seconds"), delayd.Delay(2*time.Second),
				delayd.JobID(id(1)))
		},
		func() (delayd.Record, error) {
			return client.Schedule(ctx, *business, []byte("at an instant"), delayd.At(time.Now().Add(3*time.Second)),
				delayd.JobID(id(2)))
		},
		func() (delayd.Record, error) {
			return client.Schedule(ctx, *business, []byte("never"), delayd.Delay(4*time.Second), delayd.JobID(id(3)))
		},
		func() (delayd.Record, error) { return client.Cancel(ctx, id(3)) },
		func() (delayd.Record, error) {
			return client.Schedule(ctx, *business, []byte("moved"), delayd.Delay(time.Hour), delayd.JobID(id(4)))
		},
		func() (delayd.Record, error) { return client.Reschedule(ctx, id(4), delayd.Delay(time.Second)) },
	}
	for _, call := range calls {
		if _, err := call(); err != nil {
			log.Fatal(err) // a *delayd.ContractError: a call delayd would refuse
		}
	}
	if err := client.Flush(ctx); err != nil { // Kafka has all six records
		log.Fatal(err)
	}
	fmt.Printf("scheduled %s, %s, %s (and %s, cancelled)\n", id(1), id(2), id(4), id(3))

	// The business's workers: one group, so that a job earlier runs left is worked off once, here
	// too; read-committed, from the start, offsets committed by Work (delayd.NewConsumer). The
	// ready topic may not exist yet: franz-go looks again every second.
	consumer, err := delayd.NewConsumer(*bootstrap, "schedule-and-work-example", []string{*readyTopic},
		kgo.MetadataMinAge(time.Second), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()

	mine := map[string]bool{id(1): true, id(2): true, id(4): true}
	workCtx, done := context.WithCancel(ctx)
	defer done()
	handle := func(_ context.Context, r *kgo.Record) error { // the work; an error reports the job failed
		attempt, _ := delayd.HeaderOf(delayd.RecordHeaders(r), delayd.HeaderAttempt)
		fmt.Printf("%s attempt %s: %q\n", r.Key, attempt, r.Value)
		delete(mine, string(r.Key))
		if len(mine) == 0 {
			done()
		}
		return nil
	}
	// Reports running, then finished, for each record.
	if _, err := delayd.Work(workCtx, client, consumer, handle); err != nil {
		log.Fatal(err)
	}
}
