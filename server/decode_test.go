package server

import (
	"bytes"
	"testing"

	"github.com/kyuhq/kyu/server/api"
)

// BenchmarkDecodeNewJob: decoding one enqueue body (the body of
// BenchmarkEnqueue) strictly, as the enqueue path does.
func BenchmarkDecodeNewJob(b *testing.B) {
	body := []byte(`{"type":"bench","queue":"bench","payload":{"n":"` + string(bytes.Repeat([]byte("x"), 80)) + `"}}`)
	b.ReportAllocs()
	for b.Loop() {
		var j api.NewJob
		if err := decodeJSON(body, &j, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBatch: decoding a batch of 100 such jobs.
func BenchmarkDecodeBatch(b *testing.B) {
	item := `{"type":"bench","queue":"bench","payload":{"n":"` + string(bytes.Repeat([]byte("x"), 80)) + `"}}`
	body := []byte("[" + item + string(bytes.Repeat([]byte(","+item), 99)) + "]")
	b.ReportAllocs()
	for b.Loop() {
		var js []api.NewJob
		if err := decodeJSON(body, &js, true); err != nil {
			b.Fatal(err)
		}
	}
}
