// Package cputime reads the CPU time this process has used, for the
// benchmarks that report CPU per job: a figure that other work on a shared
// machine moves less than it moves a rate.
package cputime
