package kyu_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/kyuhq/kyu"
)

func TestMuxDispatch(t *testing.T) {
	t.Parallel()
	mux := kyu.NewMux()
	var got []string
	mux.HandleFunc("a", func(ctx context.Context, job *kyu.Job) error { got = append(got, "a:"+job.ID); return nil })
	mux.Handle("b", kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error { return errors.New("b failed") }))

	if err := mux.ProcessJob(t.Context(), &kyu.Job{ID: "1", Type: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := mux.ProcessJob(t.Context(), &kyu.Job{ID: "2", Type: "b"}); err == nil || err.Error() != "b failed" {
		t.Fatalf("b: %v", err)
	}
	err := mux.ProcessJob(t.Context(), &kyu.Job{ID: "3", Type: "c"})
	if !errors.Is(err, kyu.ErrNoHandler) || err.Error() != "no handler for type c" {
		t.Fatalf("unknown type: %v", err)
	}
	if want := []string{"a:1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
	if mux.Handler("a") == nil || mux.Handler("c") != nil {
		t.Fatal("Handler lookup is wrong")
	}
}

func TestMuxRejectsDuplicates(t *testing.T) {
	t.Parallel()
	mux := kyu.NewMux()
	mux.HandleFunc("a", func(context.Context, *kyu.Job) error { return nil })
	defer func() {
		if recover() == nil {
			t.Fatal("second Handle for the same type did not panic")
		}
	}()
	mux.HandleFunc("a", func(context.Context, *kyu.Job) error { return nil })
}

func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	var trace []string
	mw := func(name string) kyu.Middleware {
		return func(next kyu.Handler) kyu.Handler {
			return kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
				trace = append(trace, name+" before")
				err := next.ProcessJob(ctx, job)
				trace = append(trace, name+" after")
				return err
			})
		}
	}
	mux := kyu.NewMux()
	mux.Use(mw("outer"), mw("middle"))
	mux.Use(mw("inner"))
	mux.HandleFunc("t", func(context.Context, *kyu.Job) error {
		trace = append(trace, "handler")
		return nil
	})
	if err := mux.ProcessJob(t.Context(), &kyu.Job{Type: "t"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"outer before", "middle before", "inner before", "handler", "inner after", "middle after", "outer after"}
	if !reflect.DeepEqual(trace, want) {
		t.Fatalf("trace = %v\nwant    %v", trace, want)
	}

	// Middleware also wraps jobs with no handler.
	trace = nil
	if err := mux.ProcessJob(t.Context(), &kyu.Job{Type: "none"}); !errors.Is(err, kyu.ErrNoHandler) {
		t.Fatalf("err = %v", err)
	}
	if len(trace) != 6 {
		t.Fatalf("trace = %v, want the three middlewares around the miss", trace)
	}
}

func TestZeroMux(t *testing.T) {
	t.Parallel()
	var mux kyu.Mux
	if err := mux.ProcessJob(t.Context(), &kyu.Job{Type: "a"}); !errors.Is(err, kyu.ErrNoHandler) {
		t.Fatalf("empty zero Mux: %v", err)
	}
	called := false
	mux.HandleFunc("a", func(context.Context, *kyu.Job) error { called = true; return nil })
	if err := mux.ProcessJob(t.Context(), &kyu.Job{Type: "a"}); err != nil || !called {
		t.Fatalf("zero Mux: err %v, called %v", err, called)
	}
}
