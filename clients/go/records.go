package delayd

// The records delayd's contract asks for, built and checked without Kafka.
//
// Every builder here is pure: it returns a Record (which topic, key, headers in order, value) or
// a *ContractError with the message delayd's own ingest parser (contract/ingest_parse.cpp) would
// put on the dead letter, so that a bad call fails in the producer instead of in the dead-letter
// topic. clients/vectors/ holds the calls and records every client must agree on.
//
// Rules every record follows:
//   - every record of one job (schedule, cancel, reschedule, status report) is keyed by its
//     job-id, so that they land in one partition, in order (README, "Reschedule", "Latest wins");
//   - only headers the README documents are written; the caller's own headers are carried after
//     them, in their order.

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ContractVersion is the contract version these records follow (README, "The contract");
// clients/vectors/ states it too, and the module's major version follows it.
const ContractVersion = 1

// Header names (delayd's home for them: contract/ingest_parse.hpp).
const (
	HeaderOp            = "op"
	HeaderJobID         = "job-id"
	HeaderDeliverAt     = "deliver-at"
	HeaderDelayMs       = "delay-ms"
	HeaderBusiness      = "business"
	HeaderAttempt       = "attempt"
	HeaderRepeatEvery   = "repeat-every-ms"
	HeaderRepeatCount   = "repeat-count"
	HeaderRepeatCron    = "repeat-cron"
	HeaderRepeatTZ      = "repeat-tz"
	HeaderRepeatUntil   = "repeat-until"
	HeaderRepeatCatchup = "repeat-catchup"
	HeaderMaxLateness   = "max-lateness-ms"
	HeaderRepeat        = "repeat"
	HeaderRedriveCount  = "redrive-count"
	HeaderStatus        = "status"
	HeaderError         = "error"
	HeaderRetryAfter    = "retry-after-ms"
)

// reserved are the headers a caller may not pass in Headers: the client writes them from its
// arguments, or delayd writes them on the ready record.
var reserved = []string{HeaderOp, HeaderJobID, HeaderDeliverAt, HeaderDelayMs, HeaderBusiness, HeaderAttempt,
	HeaderRepeatEvery, HeaderRepeatCount, HeaderRepeatCron, HeaderRepeatTZ, HeaderRepeatUntil,
	HeaderRepeatCatchup, HeaderMaxLateness, HeaderRepeat, HeaderRedriveCount}

// Limits of the contract (delayd's home for them: contract/).
const (
	MaxEpochMs          = 253_402_300_799_999 // 9999-12-31T23:59:59.999Z
	MaxBusinessChars    = 100
	MaxJobIDChars       = 200
	DerivedJobIDPrefix  = "auto:"
	maxIntervalMs       = 1 << 53 // repeat-every-ms, max-lateness-ms
	maxRepeatCount      = 1_000_000_000
	maxAttempt          = 1_000_000_000
	maxRetryAfterMs     = 86_400_000
	quoteMaxBytes       = 80
	statusRunning       = "running"
	statusFinished      = "finished"
	statusFailed        = "failed"
	opUpsert            = "upsert"
	opCancel            = "cancel"
	opReschedule        = "reschedule"
	catchupLatest       = "latest"
	catchupAll          = "all"
	catchupNone         = "none"
	timeSyntax          = "syntax"
	timeBadField        = "bad_field"
	timeOutOfRange      = "out_of_range"
	rfc3339MillisLayout = "2006-01-02T15:04:05.000Z"
)

// The statuses a worker reports (README, "Status reports").
const (
	StatusRunning  = statusRunning
	StatusFinished = statusFinished
	StatusFailed   = statusFailed
)

// The values of repeat-catchup.
const (
	CatchupLatest = catchupLatest
	CatchupAll    = catchupAll
	CatchupNone   = catchupNone
)

// Topic is the role of the topic a record goes to; the names are the deployment's
// (kafka.ingest_topic, kafka.status_topic).
type Topic string

const (
	// IngestTopic is kafka.ingest_topic: schedules, cancels, reschedules.
	IngestTopic Topic = "ingest"
	// StatusTopic is kafka.status_topic: a worker's reports.
	StatusTopic Topic = "status"
)

// Header is one Kafka record header; a nil Value is a header without a value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one Kafka record as a client sends it: headers in the order they are sent; a nil Key
// or Value is a null key or value.
type Record struct {
	Topic   Topic
	Key     []byte
	Headers []Header
	Value   []byte
}

// ContractError is a call delayd would refuse; the message is the one delayd's parser gives,
// where it has one.
type ContractError struct{ Msg string }

func (e *ContractError) Error() string { return e.Msg }

func contractErr(format string, args ...any) error {
	return &ContractError{Msg: fmt.Sprintf(format, args...)}
}

// quote is config::quote_for_message: in double quotes, \ and " escaped, bytes outside
// 0x20-0x7e as \xNN, cut after 80 bytes with "...".
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for n := 0; n < len(s); n++ {
		if n == quoteMaxBytes {
			b.WriteString("...")
			break
		}
		c := s[n]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c <= 0x7e:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func ref(name string) string { return "header '" + name + "'" }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// decimal is the value of a text of decimal digits (any length, leading zeros too), or false
// when it is above limit or not all digits.
func decimal(s string, limit uint64) (uint64, bool) {
	if s == "" || !allDigits(s) {
		return 0, false
	}
	t := strings.TrimLeft(s, "0")
	if len(t) > 19 {
		return 0, false
	}
	v, err := strconv.ParseUint("0"+t, 10, 64)
	if err != nil || v > limit {
		return 0, false
	}
	return v, true
}

// daysFromCivil is the days since 1970-01-01 of a proleptic Gregorian date, any year (0000 too).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := m + 9
	if m > 2 {
		mp = m - 3
	}
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func daysInMonth(y, m int64) int64 {
	if m == 2 {
		if (y%4 == 0 && y%100 != 0) || y%400 == 0 {
			return 29
		}
		return 28
	}
	return [...]int64{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[m-1]
}

// parseRFC3339 is (epoch ms, "") or (0, timeSyntax | timeBadField | timeOutOfRange), as
// contract/time_format.cpp.
func parseRFC3339(s string) (int64, string) {
	fixed := func(pos, n int) (int64, bool) {
		if pos+n > len(s) || !allDigits(s[pos:pos+n]) {
			return 0, false
		}
		v, _ := strconv.ParseInt(s[pos:pos+n], 10, 64)
		return v, true
	}
	if len(s) < 20 {
		return 0, timeSyntax
	}
	year, ok1 := fixed(0, 4)
	month, ok2 := fixed(5, 2)
	day, ok3 := fixed(8, 2)
	hour, ok4 := fixed(11, 2)
	minute, ok5 := fixed(14, 2)
	second, ok6 := fixed(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
		s[13] != ':' || s[16] != ':' {
		return 0, timeSyntax
	}
	pos, millis := 19, int64(0)
	if s[pos] == '.' {
		pos++
		start, belowMs := pos, false
		for pos < len(s) && s[pos] >= '0' && s[pos] <= '9' {
			if pos-start < 3 {
				millis = millis*10 + int64(s[pos]-'0')
			} else if s[pos] != '0' {
				belowMs = true
			}
			pos++
		}
		n := pos - start
		if n < 1 || n > 9 {
			return 0, timeSyntax
		}
		for i := n; i < 3; i++ {
			millis *= 10
		}
		if belowMs {
			millis++ // never early: a part of a millisecond rounds up
		}
	}
	if pos >= len(s) {
		return 0, timeSyntax
	}
	var offsetS, offH, offM int64
	switch s[pos] {
	case 'Z', 'z':
		pos++
	case '+', '-':
		oh, okh := fixed(pos+1, 2)
		om, okm := fixed(pos+4, 2)
		if !okh || pos+3 >= len(s) || s[pos+3] != ':' || !okm {
			return 0, timeSyntax
		}
		offH, offM = oh, om
		offsetS = oh*3600 + om*60
		if s[pos] == '-' {
			offsetS = -offsetS
		}
		pos += 6
	default:
		return 0, timeSyntax
	}
	if pos != len(s) {
		return 0, timeSyntax
	}
	if month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 ||
		second > 60 || offH > 23 || offM > 59 {
		return 0, timeBadField
	}
	days := daysFromCivil(year, month, day)
	ms := (days*86400+hour*3600+minute*60+second-offsetS)*1000 + millis
	if ms < 0 || ms > MaxEpochMs {
		return 0, timeOutOfRange
	}
	return ms, ""
}

// ParseTimestampMs is contract::parse_timestamp_ms: all digits is epoch ms, anything else must
// be RFC 3339. It returns the epoch ms, or "syntax", "bad_field" or "out_of_range".
func ParseTimestampMs(text string) (int64, string) {
	if text != "" && allDigits(text) {
		v, ok := decimal(text, MaxEpochMs)
		if !ok {
			return 0, timeOutOfRange
		}
		return int64(v), ""
	}
	return parseRFC3339(text)
}

// FormatRFC3339Ms is contract::format_rfc3339_ms: "2026-11-22T10:00:00.123Z".
func FormatRFC3339Ms(epochMs int64) string {
	return time.UnixMilli(epochMs).UTC().Format(rfc3339MillisLayout)
}

// ceilMs is a duration in whole milliseconds, a part of one rounded up (never early).
func ceilMs(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// timeMs is an instant in epoch milliseconds, a part of one rounded up (never early); any year.
func timeMs(t time.Time) int64 {
	ms := t.Unix() * 1000
	ns := int64(t.Nanosecond())
	ms += ns / 1_000_000
	if ns%1_000_000 != 0 {
		ms++
	}
	return ms
}

func checkDeliverAt(text string) (int64, error) {
	ms, e := ParseTimestampMs(text)
	switch e {
	case "":
		return ms, nil
	case timeSyntax:
		return 0, contractErr("%s is not epoch milliseconds or RFC 3339: %s", ref(HeaderDeliverAt), quote(text))
	case timeBadField:
		return 0, contractErr("%s is not a valid date and time: %s", ref(HeaderDeliverAt), quote(text))
	default:
		return 0, contractErr("%s is outside 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999Z: %s",
			ref(HeaderDeliverAt), quote(text))
	}
}

func checkDelay(text string) error {
	if text == "" || !allDigits(text) {
		return contractErr("%s is not a non-negative decimal number of milliseconds: %s", ref(HeaderDelayMs),
			quote(text))
	}
	if _, ok := decimal(text, MaxEpochMs); !ok {
		return contractErr("%s is too large: %s", ref(HeaderDelayMs), quote(text))
	}
	return nil
}

// checkNumber is number_header(): decimal digits only, within [lo, hi].
func checkNumber(name, text string, lo, hi uint64) error {
	if v, ok := decimal(text, hi); !ok || v < lo {
		return contractErr("%s must be a decimal number from %d to %d: %s", ref(name), lo, hi, quote(text))
	}
	return nil
}

// CheckJobID checks a job-id a producer may choose: 1-200 of 0x21-0x7E, not starting with
// "auto:".
func CheckJobID(jobID string) error {
	ok := len(jobID) >= 1 && len(jobID) <= MaxJobIDChars
	for i := 0; ok && i < len(jobID); i++ {
		ok = jobID[i] >= 0x21 && jobID[i] <= 0x7e
	}
	if !ok {
		return contractErr("%s must be 1-%d printable ASCII characters without spaces: %s (%d bytes)",
			ref(HeaderJobID), MaxJobIDChars, quote(jobID), len(jobID))
	}
	if strings.HasPrefix(jobID, DerivedJobIDPrefix) {
		return contractErr("%s must not start with '%s', which is kept for the ids delayd derives: %s",
			ref(HeaderJobID), DerivedJobIDPrefix, quote(jobID))
	}
	return nil
}

// CheckBusiness checks a business name: 1-100 characters of [A-Za-z0-9._-].
func CheckBusiness(business string) error {
	ok := len(business) >= 1 && len(business) <= MaxBusinessChars
	for i := 0; ok && i < len(business); i++ {
		c := business[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return contractErr("%s must be 1-%d characters of [A-Za-z0-9._-]: %s (%d bytes)", ref(HeaderBusiness),
			MaxBusinessChars, quote(business), len(business))
	}
	return nil
}

// When is the time of a job: At, AtMillis, AtText, Delay or DelayMillis. It is an Option of
// Schedule, and the argument of Reschedule.
type When func(*when)

type when struct {
	at, delay *string // the header text
}

func (w When) apply(o *options) { w(&o.when) }

// At is the instant the job is due (deliver-at), sent as epoch ms; a part of a millisecond
// rounds up, never early.
func At(t time.Time) When { return AtMillis(timeMs(t)) }

// AtMillis is the instant the job is due, in epoch milliseconds.
func AtMillis(epochMs int64) When { return AtText(strconv.FormatInt(epochMs, 10)) }

// AtText is the instant the job is due as delayd reads it: epoch ms or RFC 3339 text, sent as
// written.
func AtText(text string) When { return func(w *when) { w.at = &text } }

// Delay is how long after its record's timestamp the job is due (delay-ms); a part of a
// millisecond rounds up.
func Delay(d time.Duration) When { return DelayMillis(ceilMs(d)) }

// DelayMillis is the delay in milliseconds.
func DelayMillis(ms int64) When {
	text := strconv.FormatInt(ms, 10)
	return func(w *when) { w.delay = &text }
}

// timeHeaders is the deliver-at or delay-ms header, checked, and the instant when it is known
// (-1 when not).
func (w when) headers(optional bool) ([]Header, int64, error) {
	switch {
	case w.at != nil && w.delay != nil:
		return nil, -1, contractErr("both deliver-at and delay-ms given")
	case w.at != nil:
		ms, err := checkDeliverAt(*w.at)
		if err != nil {
			return nil, -1, err
		}
		return []Header{{HeaderDeliverAt, []byte(*w.at)}}, ms, nil
	case w.delay != nil:
		if err := checkDelay(*w.delay); err != nil {
			return nil, -1, err
		}
		return []Header{{HeaderDelayMs, []byte(*w.delay)}}, -1, nil
	case optional:
		return nil, -1, nil
	}
	return nil, -1, contractErr("missing header 'deliver-at' (or 'delay-ms')")
}

// Option is an option of Schedule: a When, JobID, Key, Headers, the repeat options,
// MaxLateness, Upsert.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	when                                 when
	jobID, key, cron, tz, until, catchup *string
	every, count, lateness               *string
	headers                              []Header
	upsert                               bool
}

func str(s string) *string { return &s }

// JobID is the job's id: its cancel, reschedule and reports name it, and every record of the
// job is keyed by it. Without one delayd derives the id; such a job cannot be cancelled or moved.
func JobID(id string) Option { return optionFunc(func(o *options) { o.jobID = str(id) }) }

// Key is the record's key; with a JobID it must be the job-id (or not given).
func Key(key string) Option { return optionFunc(func(o *options) { o.key = str(key) }) }

// Headers are carried to the ready record after delayd's own, in their order; a header of the
// contract is refused.
func Headers(h ...Header) Option {
	return optionFunc(func(o *options) { o.headers = append(o.headers, h...) })
}

// RepeatEvery repeats the job at this interval (repeat-every-ms); a part of a millisecond rounds
// up.
func RepeatEvery(d time.Duration) Option {
	return optionFunc(func(o *options) { o.every = str(strconv.FormatInt(ceilMs(d), 10)) })
}

// RepeatCount is how many occurrences a repeating job has (repeat-count).
func RepeatCount(n int) Option {
	return optionFunc(func(o *options) { o.count = str(strconv.Itoa(n)) })
}

// RepeatCron repeats the job on a cron expression (repeat-cron; its syntax is checked by delayd).
func RepeatCron(expr string) Option { return optionFunc(func(o *options) { o.cron = str(expr) }) }

// RepeatTZ is the IANA time zone of a RepeatCron (repeat-tz; checked by delayd).
func RepeatTZ(zone string) Option { return optionFunc(func(o *options) { o.tz = str(zone) }) }

// RepeatUntil is the instant after which a repeating job has no more occurrences.
func RepeatUntil(t time.Time) Option { return RepeatUntilMillis(timeMs(t)) }

// RepeatUntilMillis is RepeatUntil in epoch milliseconds.
func RepeatUntilMillis(epochMs int64) Option { return RepeatUntilText(strconv.FormatInt(epochMs, 10)) }

// RepeatUntilText is RepeatUntil as epoch ms or RFC 3339 text, sent as written.
func RepeatUntilText(text string) Option { return optionFunc(func(o *options) { o.until = str(text) }) }

// RepeatCatchup is what a repeating job does with occurrences missed: CatchupLatest, CatchupAll
// or CatchupNone.
func RepeatCatchup(mode string) Option { return optionFunc(func(o *options) { o.catchup = str(mode) }) }

// MaxLateness drops a job (or an occurrence) delayd reaches later than this after its time
// (max-lateness-ms).
func MaxLateness(d time.Duration) Option {
	return optionFunc(func(o *options) { o.lateness = str(strconv.FormatInt(ceilMs(d), 10)) })
}

// Upsert makes the schedule replace a job of the same id (op upsert; needs a JobID).
func Upsert() Option { return optionFunc(func(o *options) { o.upsert = true }) }

func recordKey(jobID, key *string) ([]byte, error) {
	if jobID != nil && key != nil && *key != *jobID {
		return nil, contractErr("key %s differs from job_id %s: every record of a job is keyed by its job-id, "+
			"so that its cancel, reschedule and reports land in its partition", quote(*key), quote(*jobID))
	}
	if jobID != nil {
		return []byte(*jobID), nil
	}
	if key != nil {
		return []byte(*key), nil
	}
	return nil, nil
}

func ownHeaders(headers []Header) ([]Header, error) {
	for _, h := range headers {
		for _, r := range reserved {
			if h.Key == r {
				return nil, contractErr("%s is delayd's: give it through the client's arguments, not in headers",
					ref(h.Key))
			}
		}
	}
	return headers, nil
}

// ScheduleRecord is the ingest record that schedules value for business (README, "Publishing a
// delayed message"). Checks run in the order delayd's parser runs them, so that the first
// problem is named as delayd would name it. A cron expression and a time zone are checked by
// delayd only.
func ScheduleRecord(business string, value []byte, opts ...Option) (Record, error) {
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	var out []Header
	if o.upsert {
		out = append(out, Header{HeaderOp, []byte(opUpsert)})
	}
	if o.jobID != nil {
		if err := CheckJobID(*o.jobID); err != nil {
			return Record{}, err
		}
		out = append(out, Header{HeaderJobID, []byte(*o.jobID)})
	} else if o.upsert {
		return Record{}, contractErr("op 'upsert' needs header 'job-id'")
	}
	key, err := recordKey(o.jobID, o.key)
	if err != nil {
		return Record{}, err
	}
	times, atMs, err := o.when.headers(o.cron != nil)
	if err != nil {
		return Record{}, err
	}
	if err := CheckBusiness(business); err != nil {
		return Record{}, err
	}
	out = append(out, Header{HeaderBusiness, []byte(business)})
	out = append(out, times...)

	if o.every != nil {
		if err := checkNumber(HeaderRepeatEvery, *o.every, 1, maxIntervalMs); err != nil {
			return Record{}, err
		}
	}
	if o.count != nil {
		if err := checkNumber(HeaderRepeatCount, *o.count, 1, maxRepeatCount); err != nil {
			return Record{}, err
		}
	}
	if o.cron != nil && o.every != nil {
		return Record{}, contractErr("headers 'repeat-cron' and 'repeat-every-ms' given: one or the other")
	}
	repeats := o.every != nil || o.cron != nil
	if o.count != nil && !repeats {
		return Record{}, contractErr("header 'repeat-count' given without 'repeat-every-ms'")
	}
	if o.tz != nil && o.cron == nil {
		return Record{}, contractErr("header 'repeat-tz' given without 'repeat-cron'")
	}
	untilMs := int64(-1)
	if o.until != nil {
		if !repeats {
			return Record{}, contractErr("%s given without 'repeat-every-ms' or 'repeat-cron'", ref(HeaderRepeatUntil))
		}
		ms, e := ParseTimestampMs(*o.until)
		if e != "" {
			return Record{}, contractErr("%s is not epoch milliseconds or RFC 3339 within 1970..9999: %s",
				ref(HeaderRepeatUntil), quote(*o.until))
		}
		untilMs = ms
	}
	if o.catchup != nil {
		if !repeats {
			return Record{}, contractErr("%s given without 'repeat-every-ms' or 'repeat-cron'",
				ref(HeaderRepeatCatchup))
		}
		if c := *o.catchup; c != catchupLatest && c != catchupAll && c != catchupNone {
			return Record{}, contractErr("%s must be 'latest', 'all' or 'none': %s", ref(HeaderRepeatCatchup),
				quote(c))
		}
	}
	// A calendar repeat's first occurrence needs its expression evaluated: delayd checks that one.
	if untilMs >= 0 && atMs >= 0 && o.cron == nil && untilMs < atMs {
		return Record{}, contractErr("%s is before the first occurrence, %s", ref(HeaderRepeatUntil),
			FormatRFC3339Ms(atMs))
	}
	if o.lateness != nil {
		if err := checkNumber(HeaderMaxLateness, *o.lateness, 1, maxIntervalMs); err != nil {
			return Record{}, err
		}
	}
	for _, h := range []struct {
		name string
		text *string
	}{{HeaderRepeatEvery, o.every}, {HeaderRepeatCron, o.cron}, {HeaderRepeatTZ, o.tz},
		{HeaderRepeatCount, o.count}, {HeaderRepeatUntil, o.until}, {HeaderRepeatCatchup, o.catchup},
		{HeaderMaxLateness, o.lateness}} {
		if h.text != nil {
			out = append(out, Header{h.name, []byte(*h.text)})
		}
	}
	own, err := ownHeaders(o.headers)
	if err != nil {
		return Record{}, err
	}
	out = append(out, own...)
	return Record{Topic: IngestTopic, Key: key, Headers: out, Value: value}, nil
}

// CancelRecord is the ingest record that cancels jobID (contract::cancel_record).
func CancelRecord(jobID string) (Record, error) {
	if err := CheckJobID(jobID); err != nil {
		return Record{}, err
	}
	return Record{Topic: IngestTopic, Key: []byte(jobID),
		Headers: []Header{{HeaderOp, []byte(opCancel)}, {HeaderJobID, []byte(jobID)}}}, nil
}

// RescheduleRecord is the ingest record that moves a waiting job to At, or Delay after this
// record's timestamp (README, "Reschedule"). Exactly one When is needed.
func RescheduleRecord(jobID string, w ...When) (Record, error) {
	if err := CheckJobID(jobID); err != nil {
		return Record{}, err
	}
	var t when
	for _, f := range w {
		f(&t)
	}
	times, _, err := t.headers(false)
	if err != nil {
		return Record{}, err
	}
	headers := append([]Header{{HeaderOp, []byte(opReschedule)}, {HeaderJobID, []byte(jobID)}}, times...)
	return Record{Topic: IngestTopic, Key: []byte(jobID), Headers: headers}, nil
}

// HeaderOf is the first header called name as text, and whether it has one with a value (delayd
// reads the first of a repeated name).
func HeaderOf(headers []Header, name string) (string, bool) {
	for _, h := range headers {
		if h.Key == name {
			return string(h.Value), h.Value != nil
		}
	}
	return "", false
}

// ReportOption is an option of a status report: WithError, RetryAfter.
type ReportOption func(*reportOptions)

type reportOptions struct {
	err, retryAfter *string
}

// WithError is the report's error text (header error), for a failed job.
func WithError(text string) ReportOption { return func(o *reportOptions) { o.err = str(text) } }

// RetryAfter asks delayd to deliver a failed job again after d (retry-after-ms, 0 to 24 h)
// instead of its backoff; a part of a millisecond rounds up.
func RetryAfter(d time.Duration) ReportOption {
	return func(o *reportOptions) { o.retryAfter = str(strconv.FormatInt(ceilMs(d), 10)) }
}

// ReportRecord is the status record about the ready record whose headers are readyHeaders: its
// job-id and attempt echoed (README, "Status reports").
func ReportRecord(readyHeaders []Header, status string, opts ...ReportOption) (Record, error) {
	var o reportOptions
	for _, opt := range opts {
		opt(&o)
	}
	jobID, ok := HeaderOf(readyHeaders, HeaderJobID)
	if !ok {
		return Record{}, contractErr("status record without header 'job-id'")
	}
	if err := CheckJobID(jobID); err != nil {
		return Record{}, err
	}
	if status != statusRunning && status != statusFinished && status != statusFailed {
		return Record{}, contractErr("%s must be 'running', 'finished' or 'failed': %s", ref(HeaderStatus),
			quote(status))
	}
	out := []Header{{HeaderJobID, []byte(jobID)}, {HeaderStatus, []byte(status)}}
	attempt, hasAttempt := HeaderOf(readyHeaders, HeaderAttempt)
	if hasAttempt {
		out = append(out, Header{HeaderAttempt, []byte(attempt)})
	}
	if o.err != nil {
		out = append(out, Header{HeaderError, []byte(*o.err)})
	}
	if o.retryAfter != nil {
		if status != statusFailed {
			return Record{}, contractErr("retry_after is only for status 'failed', not %s", quote(status))
		}
		if err := checkNumber(HeaderRetryAfter, *o.retryAfter, 0, maxRetryAfterMs); err != nil {
			return Record{}, err
		}
		out = append(out, Header{HeaderRetryAfter, []byte(*o.retryAfter)})
	}
	if hasAttempt {
		if err := checkNumber(HeaderAttempt, attempt, 1, maxAttempt); err != nil {
			return Record{}, err
		}
	}
	return Record{Topic: StatusTopic, Key: []byte(jobID), Headers: out}, nil
}
