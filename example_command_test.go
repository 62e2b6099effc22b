package kyu_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/kyuhq/kyu"
)

// A program that runs a worker learns of a stop command (from the
// dashboard, `kyu workers stop ID` or Client.StopWorker) through
// Worker.Done: the worker shuts down gracefully by itself.
func ExampleClient_StopWorker() {
	store, cleanup := openExampleStore()
	defer cleanup()
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{
		Handler:          kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error { return nil }),
		RegistryInterval: 50 * time.Millisecond, // how soon a command arrives; default 10s
	})
	if err != nil {
		log.Fatal(err)
	}
	go worker.Run(context.Background())

	client := kyu.NewClient(store, kyu.ClientConfig{})
	for {
		if _, err := client.StopWorker(context.Background(), worker.ID()); err == nil {
			break // registered, and told to stop
		}
		time.Sleep(10 * time.Millisecond)
	}
	<-worker.Done()
	fmt.Println("worker stopped")
	// Output: worker stopped
}

// With WorkerConfig.OnCommand the program decides what a command does:
// here it quiets the worker itself, and stops it later.
func ExampleWorkerConfig_onCommand() {
	store, cleanup := openExampleStore()
	defer cleanup()
	commands := make(chan kyu.WorkerCommand, 1)
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{
		Handler:          kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error { return nil }),
		RegistryInterval: 50 * time.Millisecond,
		OnCommand:        func(cmd kyu.WorkerCommand) { commands <- cmd },
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(context.Background()); err != nil {
		log.Fatal(err)
	}

	client := kyu.NewClient(store, kyu.ClientConfig{})
	for {
		if _, err := client.QuietWorker(context.Background(), worker.ID()); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd := <-commands
	fmt.Println("told to", cmd)
	if cmd == kyu.WorkerCommandQuiet {
		worker.Quiet() // claim nothing more; the jobs in flight end
	}
	if err := worker.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output: told to quiet
}
