package zab

import (
	"fmt"
	"log/slog"
	"os"
)

func slogStderr(id uint64) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", fmt.Sprint(id))
}
