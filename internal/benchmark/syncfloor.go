package benchmark

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// syncFloorWrite is the size of each write the sync floor times: about
// one small job's record in the embedded store's log.
const syncFloorWrite = 256

// SyncFloor is the least a durable write costs on the disk that holds an
// embedded store: a small append to a file in the store's directory and
// the sync that makes it durable, timed together. The store syncs its log
// once per enqueue call (or per group of calls), so the one-job-per-call
// enqueue and the enqueue-to-start latency cannot beat these figures.
type SyncFloor struct {
	// Dir is the directory measured in: the store's own.
	Dir string `json:"dir"`
	// Call names the sync: fdatasync on Linux, fsync (os.File.Sync)
	// elsewhere.
	Call string `json:"call"`
	// WriteBytes is the size of each appended write.
	WriteBytes int `json:"write_bytes"`
	// BackToBack times syncs one right after another: what one producer
	// enqueuing one job per call waits for at best.
	BackToBack Latency `json:"back_to_back"`
	// Pause is the idle time before each AfterPause sample: the latency
	// measurement's gap (Config.LatencyGap).
	Pause time.Duration `json:"pause_ns"`
	// AfterPause times one sync after an idle pause: what the enqueue of
	// a job for an idle worker waits for at best.
	AfterPause Latency `json:"after_pause"`
}

// measureSyncFloor times samples writes of syncFloorWrite bytes, each
// followed by a data sync, in a scratch file in dir, back to back and then
// each after a pause of gap, and removes the file. One unrecorded write
// comes first, so that the file's creation is not timed.
//
// The writes append, as the log of a fresh store does. Writing over bytes
// already in the file syncs faster on some file systems (ext4 among them),
// since the file's size does not change and no metadata goes to the
// journal; a floor measured that way would be lower than what the store's
// appends can reach.
func measureSyncFloor(ctx context.Context, dir string, samples int, gap time.Duration) (fl SyncFloor, err error) {
	f, err := os.CreateTemp(dir, "kyu-bench-sync-floor-*")
	if err != nil {
		return SyncFloor{}, fmt.Errorf("benchmark: sync floor: %w", err)
	}
	defer func() {
		cerr := f.Close()
		if rerr := os.Remove(f.Name()); rerr != nil || cerr != nil {
			err = errors.Join(err, fmt.Errorf("benchmark: sync floor: remove the scratch file: %w", errors.Join(cerr, rerr)))
		}
	}()
	buf := payload(syncFloorWrite)
	sample := func() (time.Duration, error) {
		begin := time.Now()
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := dataSync(f); err != nil {
			return 0, err
		}
		return time.Since(begin), nil
	}
	if _, err := sample(); err != nil {
		return SyncFloor{}, fmt.Errorf("benchmark: sync floor: %w", err)
	}

	times := make([]time.Duration, 0, samples)
	for range samples {
		if err := context.Cause(ctx); err != nil {
			return SyncFloor{}, err
		}
		d, err := sample()
		if err != nil {
			return SyncFloor{}, fmt.Errorf("benchmark: sync floor: %w", err)
		}
		times = append(times, d)
	}
	fl = SyncFloor{Dir: dir, Call: syncCall, WriteBytes: syncFloorWrite, BackToBack: newLatency(times), Pause: gap}

	times = times[:0]
	pause := time.NewTimer(gap)
	defer pause.Stop()
	for range samples {
		select {
		case <-pause.C:
		case <-ctx.Done():
			return SyncFloor{}, context.Cause(ctx)
		}
		d, err := sample()
		if err != nil {
			return SyncFloor{}, fmt.Errorf("benchmark: sync floor: %w", err)
		}
		times = append(times, d)
		pause.Reset(gap)
	}
	fl.AfterPause = newLatency(times)
	return fl, nil
}
