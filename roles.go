package kyu

import "github.com/kyuhq/kyu/backend"

// ClientBackend is what a Client needs of its store: enqueueing, reading
// (and waiting for) jobs, and acting on jobs and queues. Every
// backend.Backend is one.
type ClientBackend interface {
	backend.Producer
	backend.Inspector
	backend.Admin
}

// WorkerBackend is what a Worker needs of its store: running jobs under
// leases, enqueueing the periodic jobs, the maintenance steps and its
// entry in the registry, and the lease that elects the store's one
// maintainer. Every backend.Backend is one.
type WorkerBackend interface {
	backend.Producer
	backend.Runner
	backend.Maintainer
	backend.Registry
	backend.Leader
}
