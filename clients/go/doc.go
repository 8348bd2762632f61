// Package delayd publishes delayed jobs to delayd, cancels and moves them, and reports on their
// ready records, over franz-go (github.com/twmb/franz-go).
//
//	client, err := delayd.NewClient("127.0.0.1:19092")
//	_, err = client.Schedule(ctx, "orders", []byte("charge order 42"),
//		delayd.Delay(time.Minute), delayd.JobID("order-42"))
//	err = client.Flush(ctx)
//
// Every call checks its arguments first, with the rules and messages of delayd's own ingest
// parser (a *ContractError), so that a bad call fails in the caller, not as a dead letter.
// records.go builds and checks the records without Kafka (ScheduleRecord, CancelRecord,
// RescheduleRecord, ReportRecord); client.go sends them, and Work runs a handler over a ready
// topic with status reports.
package delayd

// Version is this module's version; its major version is the ContractVersion it speaks.
const Version = "1.0.0"
