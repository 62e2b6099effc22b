package kyu_test

import (
	"context"
	"log"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/postgres"
)

// An order and the job that mails its receipt are written in one
// transaction: if the order is rolled back, no receipt is ever sent, and
// if it commits, the job exists. This example needs a PostgreSQL server,
// so it is compiled but not run; backend/postgres's tests run the same
// calls.
func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, "postgres://localhost/shop", postgres.Options{AutoMigrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	client := kyu.NewClient(store, kyu.ClientConfig{})

	// The application's own transaction: a pgx.Tx here; a *sql.Tx of the
	// pgx database/sql driver works too.
	tx, err := store.Pool().Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // a no-op once committed
	var orderID int64
	if err := tx.QueryRow(ctx, `INSERT INTO orders (customer) VALUES ($1) RETURNING id`, "ada").Scan(&orderID); err != nil {
		log.Fatal(err)
	}
	if _, err := client.EnqueueJSONTx(ctx, tx, "receipt.send", map[string]int64{"order": orderID}, kyu.EnqueueOptions{Queue: "mail"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
