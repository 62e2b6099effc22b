package server_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/server"
)

// ExampleNew embeds a kyu server over the embedded store, enqueues a job
// over HTTP and shuts the server down.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "kyu-server-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	srv, err := server.New(server.Config{Backend: store, Addr: "127.0.0.1:0", Token: "s3cret"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	<-srv.Ready()

	req, _ := http.NewRequest("POST", "http://"+srv.Addr().String()+"/api/v1/jobs",
		strings.NewReader(`{"type":"email.send","payload":{"to":"ada@example.com"}}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 201 Created
}
