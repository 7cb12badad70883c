module kcompat/benchmarks/loadgen

// 1.19: Debian bookworm's golang-go, the oldest Go the bench set-up may find.
go 1.19
