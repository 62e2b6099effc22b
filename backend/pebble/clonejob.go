package pebble

import (
	"maps"

	"github.com/kyuhq/kyu/backend"
)

// cloneJob returns a deep copy of j, as j.Clone does, made in spare when
// it is not nil (spare is overwritten): a claim's copy of a record it
// read lives beside the store's (jobPair), which saves an allocation of
// a whole Job per claimed job.
func cloneJob(j, spare *backend.Job) *backend.Job {
	if spare == nil {
		return j.Clone()
	}
	*spare = *j
	// The fields that refer to memory of their own, copied as Clone
	// copies them (TestCloneJobIsDeep checks that the list is whole).
	if j.Payload != nil {
		spare.Payload = append([]byte{}, j.Payload...)
	}
	if j.Result != nil {
		spare.Result = append([]byte{}, j.Result...)
	}
	if j.Tags != nil {
		spare.Tags = append([]string(nil), j.Tags...)
	}
	if j.Metadata != nil {
		spare.Metadata = make(map[string]string, len(j.Metadata))
		maps.Copy(spare.Metadata, j.Metadata)
	}
	if j.Errors != nil {
		spare.Errors = append([]backend.AttemptError(nil), j.Errors...)
	}
	if j.Progress != nil {
		p := *j.Progress
		spare.Progress = &p
	}
	if j.Logs != nil {
		spare.Logs = append([]backend.LogLine(nil), j.Logs...)
	}
	return spare
}
