package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestWakeupsRefuseBadQueueNames: the wake-up stream checks queue names
// as every other endpoint does.
func TestWakeupsRefuseBadQueueNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, q := range []string{"../x", "", strings.Repeat("q", 129), "a b"} {
		// A stream that opened would last: read the status only, and
		// leave within a bound either way.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		req, err := http.NewRequestWithContext(ctx, "GET", e.base+"/api/v1/wakeups?queue=ok&queue="+url.QueryEscape(q), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("wakeups for queue %q: %d; want 400", q, resp.StatusCode)
		} else {
			var b struct{ Error struct{ Code, Field string } }
			if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || b.Error.Code != "invalid_argument" || b.Error.Field != "queue" {
				t.Errorf("wakeups for queue %q: error %+v (%v); want invalid_argument on queue", q, b.Error, err)
			}
		}
		resp.Body.Close()
		cancel()
	}
}
