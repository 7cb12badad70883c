module kcompat/benchmarks/relay

// 1.19: Debian bookworm's golang-go, the oldest Go the bench set-up may find (TCP to TCP splice since 1.11).
go 1.19
