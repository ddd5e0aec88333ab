package kernel

//go:generate go run ./internal/mksysnames -out sysnames_amd64.go
