package mysql_test

import (
	"context"
	"log"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/mysql"
)

// An order and the job that mails its receipt are written in one MySQL
// transaction: if the order is rolled back, no receipt is ever sent, and
// if it commits, the job exists. This example needs a MySQL or MariaDB
// server, so it is compiled but not run; the package's tests run the
// same calls (TestClientEnqueueTxCommit, TestClientEnqueueTxRollback).
func ExampleStore_EnqueueTx() {
	ctx := context.Background()
	store, err := mysql.Open(ctx, "mysql://shop:secret@127.0.0.1:3306/shop?prefix=kyu_", mysql.Options{AutoMigrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	client := kyu.NewClient(store, kyu.ClientConfig{})

	// The application's own transaction, a *sql.Tx of go-sql-driver/mysql
	// (store.DB() is one such pool; the application's own works too).
	tx, err := store.DB().BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // a no-op once committed
	res, err := tx.ExecContext(ctx, `INSERT INTO orders (customer) VALUES (?)`, "ada")
	if err != nil {
		log.Fatal(err)
	}
	orderID, err := res.LastInsertId()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.EnqueueJSONTx(ctx, tx, "receipt.send", map[string]int64{"order": orderID}, kyu.EnqueueOptions{Queue: "mail"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}
