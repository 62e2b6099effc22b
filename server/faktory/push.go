package faktory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// notUnique is the answer to a push whose jid another job holds: the
// code Faktory's clients know for a job refused as not unique.
const (
	notUniqueCode = "NOTUNIQUE"
	notUniqueText = "Job not unique: its jid is held by another job"
)

// push answers PUSH: +OK once the job is stored, NOTUNIQUE when its jid
// is held, an error otherwise.
func (c *conn) push(ctx context.Context, w wireJob) error {
	j, err := w.newJob()
	if err != nil {
		return c.out.err("ERR", err.Error())
	}
	res, err := c.l.b.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{j}, Now: c.l.cfg.Now(), MaxPayload: c.l.cfg.MaxPayload})
	if err != nil {
		return c.out.err("ERR", errText(err))
	}
	if res.Jobs[0].Duplicate {
		return c.out.err(notUniqueCode, notUniqueText)
	}
	return c.out.ok()
}

// pushBatch answers PUSHB as Faktory does: a JSON map from jid to the
// error of each job refused ({} when all were stored). The jobs that are
// good are stored together; a bad one does not hold the others back.
func (c *conn) pushBatch(ctx context.Context, ws []wireJob) error {
	if len(ws) > c.l.cfg.MaxBatch {
		return c.out.err("ERR", fmt.Sprintf("PUSHB: %d jobs is over the limit of %d", len(ws), c.l.cfg.MaxBatch))
	}
	refused := map[string]string{}
	jobs := make([]backend.NewJob, 0, len(ws))
	jids := make([]string, 0, len(ws))
	for _, w := range ws {
		j, err := w.newJob()
		if err != nil {
			refused[w.JID] = err.Error()
			continue
		}
		jobs = append(jobs, j)
		jids = append(jids, w.JID)
	}
	for len(jobs) > 0 {
		res, err := c.l.b.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: c.l.cfg.Now(), MaxPayload: c.l.cfg.MaxPayload})
		var ve *backend.ValidationError
		if errors.As(err, &ve) && ve.Index >= 0 && ve.Index < len(jobs) {
			// Drop the job the store refused and store the others.
			v := *ve
			v.Index = -1
			refused[jids[ve.Index]] = errText(&v)
			jobs = append(jobs[:ve.Index], jobs[ve.Index+1:]...)
			jids = append(jids[:ve.Index], jids[ve.Index+1:]...)
			continue
		}
		if err != nil {
			return c.out.err("ERR", "PUSHB: "+errText(err))
		}
		for i, r := range res.Jobs {
			if r.Duplicate {
				refused[jids[i]] = notUniqueCode + " " + notUniqueText
			}
		}
		break
	}
	b, err := json.Marshal(refused)
	if err != nil {
		return c.out.err("ERR", "PUSHB: "+err.Error())
	}
	return c.out.bulk(b)
}
