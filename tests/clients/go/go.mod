module github.com/delayd/delayd/tests/clients/go

go 1.26.0

require (
	github.com/delayd/delayd/clients/go v1.0.0
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
)

// The client of this checkout.
replace github.com/delayd/delayd/clients/go => ../../../clients/go
