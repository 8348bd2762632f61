module github.com/delayd/delayd/examples/go

go 1.26.0

require (
	github.com/delayd/delayd/clients/go v1.0.0
	github.com/twmb/franz-go v1.22.3
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
)

// From this checkout, not a published version.
replace github.com/delayd/delayd/clients/go => ../../clients/go
