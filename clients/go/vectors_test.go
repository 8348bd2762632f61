package delayd

// The Go client against the shared test vectors (clients/vectors/*.json): every good call must
// build exactly the vector's record (topic, key, headers in order, value), every bad call must
// fail with a *ContractError carrying the vector's message (or, for a record only delayd can
// refuse, build that record). No Kafka needed: the record builders are pure.
//
//	go test ./... -args -vectors ../vectors

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var vectorsDir = flag.String("vectors", filepath.Join("..", "vectors"), "the directory of the test vectors")

type vectorFile struct {
	ContractVersion int      `json:"contract_version"`
	Good            []vector `json:"good"`
	Bad             []vector `json:"bad"`
}

type vector struct {
	Name      string                     `json:"name"`
	Call      string                     `json:"call"`
	Args      map[string]json.RawMessage `json:"args"`
	Record    *jsonRecord                `json:"record"`
	CheckedBy string                     `json:"checked_by"`
	Error     string                     `json:"error"`
}

type jsonRecord struct {
	Topic   string      `json:"topic"`
	Key     *string     `json:"key"`
	Headers [][]*string `json:"headers"`
	Value   *string     `json:"value"`
}

func loadVectors(t *testing.T) map[string]vectorFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(*vectorsDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no vectors in %s (%v)", *vectorsDir, err)
	}
	out := map[string]vectorFile{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f vectorFile
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.UseNumber()
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = f
	}
	return out
}

func bytesOf(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

func headersOf(pairs [][]*string) []Header {
	out := []Header{}
	for _, p := range pairs {
		out = append(out, Header{Key: *p[0], Value: bytesOf(p[1])})
	}
	return out
}

func (r *jsonRecord) record() Record {
	return Record{Topic: Topic(r.Topic), Key: bytesOf(r.Key), Headers: headersOf(r.Headers), Value: bytesOf(r.Value)}
}

// args reads a vector's arguments, and says which it did not use.
type args struct {
	t    *testing.T
	raw  map[string]json.RawMessage
	used map[string]bool
}

func (a *args) has(name string) bool {
	raw, ok := a.raw[name]
	if ok {
		a.used[name] = true
	}
	return ok && string(raw) != "null"
}

func (a *args) decode(name string, v any) {
	a.t.Helper()
	a.used[name] = true
	if err := json.Unmarshal(a.raw[name], v); err != nil {
		a.t.Fatalf("argument %s: %v", name, err)
	}
}

func (a *args) str(name string) string {
	var s string
	a.decode(name, &s)
	return s
}

func (a *args) strPtr(name string) *string {
	if !a.has(name) {
		a.used[name] = true
		return nil
	}
	s := a.str(name)
	return &s
}

func (a *args) int(name string) int64 {
	var n int64
	a.decode(name, &n)
	return n
}

func (a *args) ms(name string) time.Duration { return time.Duration(a.int(name)) * time.Millisecond }

// isText says whether an instant argument is RFC 3339 text (else epoch ms).
func (a *args) isText(name string) bool { return strings.HasPrefix(string(a.raw[name]), `"`) }

func (a *args) when() []When {
	var w []When
	if a.has("at") {
		if a.isText("at") {
			w = append(w, AtText(a.str("at")))
		} else {
			w = append(w, AtMillis(a.int("at")))
		}
	}
	if a.has("delay") {
		w = append(w, DelayMillis(a.int("delay")))
	}
	return w
}

func (a *args) headers(name string) []Header {
	var pairs [][]*string
	a.decode(name, &pairs)
	return headersOf(pairs)
}

// call is the vector's call on the record builders.
func call(t *testing.T, name string, raw map[string]json.RawMessage) (Record, error) {
	t.Helper()
	a := &args{t: t, raw: raw, used: map[string]bool{}}
	defer func() {
		for k := range raw {
			if !a.used[k] {
				t.Errorf("argument %s not understood by the test", k)
			}
		}
	}()
	switch name {
	case "schedule":
		var opts []Option
		for _, w := range a.when() {
			opts = append(opts, w)
		}
		if a.has("job_id") {
			opts = append(opts, JobID(a.str("job_id")))
		}
		if a.has("key") {
			opts = append(opts, Key(a.str("key")))
		}
		if a.has("headers") {
			opts = append(opts, Headers(a.headers("headers")...))
		}
		if a.has("repeat_every") {
			opts = append(opts, RepeatEvery(a.ms("repeat_every")))
		}
		if a.has("repeat_count") {
			opts = append(opts, RepeatCount(int(a.int("repeat_count"))))
		}
		if a.has("repeat_cron") {
			opts = append(opts, RepeatCron(a.str("repeat_cron")))
		}
		if a.has("repeat_tz") {
			opts = append(opts, RepeatTZ(a.str("repeat_tz")))
		}
		if a.has("repeat_until") {
			if a.isText("repeat_until") {
				opts = append(opts, RepeatUntilText(a.str("repeat_until")))
			} else {
				opts = append(opts, RepeatUntilMillis(a.int("repeat_until")))
			}
		}
		if a.has("repeat_catchup") {
			opts = append(opts, RepeatCatchup(a.str("repeat_catchup")))
		}
		if a.has("max_lateness") {
			opts = append(opts, MaxLateness(a.ms("max_lateness")))
		}
		if a.has("upsert") {
			var upsert bool
			a.decode("upsert", &upsert)
			if upsert {
				opts = append(opts, Upsert())
			}
		}
		return ScheduleRecord(a.str("business"), bytesOf(a.strPtr("value")), opts...)
	case "cancel":
		return CancelRecord(a.str("job_id"))
	case "reschedule":
		return RescheduleRecord(a.str("job_id"), a.when()...)
	case "report":
		var opts []ReportOption
		if a.has("error") {
			opts = append(opts, WithError(a.str("error")))
		}
		if a.has("retry_after") {
			opts = append(opts, RetryAfter(a.ms("retry_after")))
		}
		return ReportRecord(a.headers("ready_headers"), a.str("status"), opts...)
	}
	t.Fatalf("unknown call %q", name)
	return Record{}, nil
}

func names(files map[string]vectorFile) []string {
	out := make([]string, 0, len(files))
	for n := range files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func showRecord(r Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "topic %s key %q value %q headers", r.Topic, r.Key, r.Value)
	for _, h := range r.Headers {
		fmt.Fprintf(&b, " %s=%q", h.Key, h.Value)
	}
	return b.String()
}

func sameRecord(t *testing.T, got, want Record) {
	t.Helper()
	same := got.Topic == want.Topic && (got.Key == nil) == (want.Key == nil) && string(got.Key) == string(want.Key) &&
		(got.Value == nil) == (want.Value == nil) && string(got.Value) == string(want.Value) &&
		len(got.Headers) == len(want.Headers)
	for i := 0; same && i < len(got.Headers); i++ {
		g, w := got.Headers[i], want.Headers[i]
		same = g.Key == w.Key && (g.Value == nil) == (w.Value == nil) && string(g.Value) == string(w.Value)
	}
	if !same {
		t.Errorf("record\n got  %s\n want %s", showRecord(got), showRecord(want))
	}
}

func TestContractVersion(t *testing.T) {
	for name, f := range loadVectors(t) {
		if f.ContractVersion != ContractVersion {
			t.Errorf("%s: contract_version %d, the client speaks %d", name, f.ContractVersion, ContractVersion)
		}
	}
}

func TestGoodVectors(t *testing.T) {
	files, n := loadVectors(t), 0
	for _, file := range names(files) {
		for _, v := range files[file].Good {
			t.Run(file+"/"+v.Name, func(t *testing.T) {
				got, err := call(t, v.Call, v.Args)
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				sameRecord(t, got, v.Record.record())
			})
			n++
		}
	}
	if n < 20 {
		t.Errorf("only %d good vectors", n)
	}
	t.Logf("%d good vectors", n)
}

func TestBadVectors(t *testing.T) {
	files, n := loadVectors(t), 0
	for _, file := range names(files) {
		for _, v := range files[file].Bad {
			t.Run(file+"/"+v.Name, func(t *testing.T) {
				got, err := call(t, v.Call, v.Args)
				if v.CheckedBy == "delayd" { // the client sends it; delayd refuses it
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					sameRecord(t, got, v.Record.record())
					return
				}
				var ce *ContractError
				if !errors.As(err, &ce) {
					t.Fatalf("not refused with a ContractError: %v, %s", err, showRecord(got))
				}
				if ce.Msg != v.Error {
					t.Errorf("message\n got  %s\n want %s", ce.Msg, v.Error)
				}
			})
			n++
		}
	}
	if n < 30 {
		t.Errorf("only %d bad vectors", n)
	}
	t.Logf("%d bad vectors", n)
}

// What the vectors cannot say in JSON: time.Time and time.Duration.

func TestTimeRoundsUpToTheMillisecond(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 900, time.UTC)
	r, err := ScheduleRecord("orders", nil, At(at), JobID("j"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := HeaderOf(r.Headers, HeaderDeliverAt); v != "1795341600001" {
		t.Errorf("deliver-at %s", v)
	}
}

func TestTimeWithAZone(t *testing.T) {
	at := time.Date(2026, 11, 22, 11, 0, 0, 0, time.FixedZone("+01", 3600))
	r, err := RescheduleRecord("j", At(at))
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Headers[len(r.Headers)-1]; h.Key != HeaderDeliverAt || string(h.Value) != "1795341600000" {
		t.Errorf("last header %s=%s", h.Key, h.Value)
	}
}

func TestTimeBefore1970IsRefused(t *testing.T) {
	_, err := ScheduleRecord("orders", nil, At(time.Time{}), JobID("j"))
	want := `header 'deliver-at' is not epoch milliseconds or RFC 3339: "-62135596800000"`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestDurations(t *testing.T) {
	r, err := ScheduleRecord("orders", []byte("v"), Delay(time.Second+time.Microsecond), JobID("j"),
		RepeatEvery(time.Hour), MaxLateness(1500*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{HeaderDelayMs: "1001", HeaderRepeatEvery: "3600000",
		HeaderMaxLateness: "2"} {
		if v, _ := HeaderOf(r.Headers, name); v != want {
			t.Errorf("%s: %s, want %s", name, v, want)
		}
	}
	if _, err := ReportRecord([]Header{{HeaderJobID, []byte("j")}}, StatusFailed, RetryAfter(-time.Millisecond)); err == nil ||
		err.Error() != `header 'retry-after-ms' must be a decimal number from 0 to 86400000: "-1"` {
		t.Errorf("a negative retry time: %v", err)
	}
}

func TestRepeatedHeaderNamesAndNullValues(t *testing.T) {
	// delayd reads the first header of a name; one without a value is no header.
	r, err := ReportRecord([]Header{{HeaderJobID, []byte("j-1")}, {HeaderJobID, []byte("j-2")},
		{HeaderAttempt, nil}, {HeaderAttempt, []byte("3")}}, StatusFinished)
	if err != nil {
		t.Fatal(err)
	}
	sameRecord(t, r, Record{Topic: StatusTopic, Key: []byte("j-1"),
		Headers: []Header{{HeaderJobID, []byte("j-1")}, {HeaderStatus, []byte(StatusFinished)}}})
}

func TestLongDecimalTexts(t *testing.T) {
	// Leading zeros are the number's; a text past 64 bits is out of range, not an overflow.
	if ms, e := ParseTimestampMs("0001795000060000"); ms != 1795000060000 || e != "" {
		t.Errorf("leading zeros: %d %q", ms, e)
	}
	if _, e := ParseTimestampMs("99999999999999999999999"); e != timeOutOfRange {
		t.Errorf("23 digits: %q", e)
	}
	_, err := ScheduleRecord("orders", nil, JobID("j"), AtText("00000000000000000000000001"), RepeatEvery(time.Second),
		RepeatUntilText("18446744073709551617"))
	if err == nil || !strings.Contains(err.Error(), "repeat-until' is not epoch milliseconds") {
		t.Errorf("repeat-until past 64 bits: %v", err)
	}
}

func TestRFC3339RoundTrip(t *testing.T) {
	// The client's RFC 3339 reading against Go's own calendar, over the whole range.
	rng := rand.New(rand.NewSource(7))
	cases := []int64{0, MaxEpochMs}
	for i := 0; i < 2000; i++ {
		cases = append(cases, rng.Int63n(MaxEpochMs))
	}
	for _, ms := range cases {
		text := FormatRFC3339Ms(ms)
		if got, e := ParseTimestampMs(text); got != ms || e != "" {
			t.Fatalf("%s: %d %q, want %d", text, got, e, ms)
		}
		local := time.UnixMilli(ms).In(time.FixedZone("", -(5*3600 + 30*60))).Format("2006-01-02T15:04:05.000-07:00")
		if got, e := ParseTimestampMs(local); got != ms || e != "" {
			t.Fatalf("%s: %d %q, want %d", local, got, e, ms)
		}
	}
}

func TestRecordsAreKeyedByTheJobID(t *testing.T) {
	rs := []func() (Record, error){
		func() (Record, error) { return ScheduleRecord("orders", nil, DelayMillis(1), JobID("j"), Key("j")) },
		func() (Record, error) { return CancelRecord("j") },
		func() (Record, error) { return RescheduleRecord("j", Delay(time.Second)) },
		func() (Record, error) { return ReportRecord([]Header{{HeaderJobID, []byte("j")}}, StatusRunning) },
	}
	for i, f := range rs {
		r, err := f()
		if err != nil || !reflect.DeepEqual(r.Key, []byte("j")) {
			t.Errorf("record %d: key %q, %v", i, r.Key, err)
		}
	}
}

func TestConsumersReadCommitted(t *testing.T) {
	// kgo.NewClient does not connect: the options can be read back without a broker.
	c, err := NewConsumer("127.0.0.1:1", "g", []string{"ready.orders"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if level := c.OptValue(kgo.FetchIsolationLevel); level != int8(1) {
		t.Errorf("isolation level %v, want 1 (read committed)", level)
	}
	if c.OptValue(kgo.DisableAutoCommit) != true || c.OptValue(kgo.ConsumerGroup) != "g" {
		t.Errorf("auto commit disabled %v, group %v", c.OptValue(kgo.DisableAutoCommit), c.OptValue(kgo.ConsumerGroup))
	}
	// franz-go's own default is the other one: this is what NewConsumer changes.
	plain, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if level := plain.OptValue(kgo.FetchIsolationLevel); level != int8(0) {
		t.Errorf("franz-go's default isolation level %v, expected 0 (read uncommitted)", level)
	}
	// An option given after them wins.
	other, err := NewConsumer("127.0.0.1:1", "g", []string{"t"}, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if level := other.OptValue(kgo.FetchIsolationLevel); level != int8(0) {
		t.Errorf("an overriding option: isolation level %v", level)
	}
}
