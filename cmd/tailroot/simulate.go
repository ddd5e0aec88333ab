package main

import (
	"context"
	"errors"
	"log/slog"
)

func runSimulator(ctx context.Context, url string, logger *slog.Logger) error {
	_ = url
	_ = logger
	<-ctx.Done()
	return errors.New("simulator not built")
}
