package backend

// WatchParams names the jobs whose end a caller waits for.
type WatchParams struct {
	IDs []string
}
