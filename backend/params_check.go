package backend

import (
	"fmt"
	"time"
)

// Check validates a claim before a store acts on it: Now given and in
// range, a positive Lease whose end is in range, a known Mode, legal queue
// names, at most MaxClaimTypes types each as NewJob.Type allows. Max <= 0
// or no queues is valid and claims nothing.
func (p *ClaimParams) Check() error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	switch {
	case p.Lease <= 0:
		return invalid("lease", "must be positive")
	case !InTimeRange(p.Now.Add(p.Lease)):
		return invalid("lease", "ends "+timeRangeReason)
	case p.Mode != "" && p.Mode != ClaimStrict && p.Mode != ClaimWeighted:
		return invalid("mode", "unknown claim mode %q", p.Mode)
	}
	for _, q := range p.Queues {
		if !ValidQueueName(q) {
			return invalid("queues", "%q is not 1-128 characters of [A-Za-z0-9._:-]", q)
		}
	}
	if len(p.Types) > MaxClaimTypes {
		return invalid("types", "more than %d types", MaxClaimTypes)
	}
	for _, t := range p.Types {
		switch {
		case t == "":
			return invalid("types", "a type must not be empty")
		case len(t) > MaxType:
			return invalid("types", "a type is longer than %d bytes", MaxType)
		case !ValidText(t):
			return invalid("types", "a type "+textReason)
		}
	}
	return nil
}

// Check validates a heartbeat: Now given and in range, a positive Extend
// whose end is in range.
func (p *HeartbeatParams) Check() error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	switch {
	case p.Extend <= 0:
		return invalid("extend", "must be positive")
	case !InTimeRange(p.Now.Add(p.Extend)):
		return invalid("extend", "ends "+timeRangeReason)
	}
	return nil
}

// Size limits of a failed attempt's record, in bytes: every attempt's is
// kept, so they bound what a job grows by per attempt. The Worker cuts
// longer ones to fit (TruncateText).
const (
	MaxFailMessage = 8 << 10  // 8 KiB
	MaxFailStack   = 64 << 10 // 64 KiB
)

// Check validates failures: Now given and in range, every RetryAt in
// range, every Message and Stack ValidText and within MaxFailMessage and
// MaxFailStack.
func (p *FailParams) Check() error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	for i, it := range p.Items {
		switch {
		case !InTimeRange(it.RetryAt):
			return &ValidationError{Index: i, Field: "retry_at", Reason: timeRangeReason}
		case !ValidText(it.Message):
			return &ValidationError{Index: i, Field: "message", Reason: textReason}
		case len(it.Message) > MaxFailMessage:
			return &ValidationError{Index: i, Field: "message", Reason: fmt.Sprintf("%d bytes is over the maximum of %d", len(it.Message), MaxFailMessage)}
		case !ValidText(it.Stack):
			return &ValidationError{Index: i, Field: "stack", Reason: textReason}
		case len(it.Stack) > MaxFailStack:
			return &ValidationError{Index: i, Field: "stack", Reason: fmt.Sprintf("%d bytes is over the maximum of %d", len(it.Stack), MaxFailStack)}
		}
	}
	return nil
}

// Check validates a subscription: legal queue names.
func (p *SubscribeParams) Check() error {
	for _, q := range p.Queues {
		if !ValidQueueName(q) {
			return invalid("queues", "%q is not 1-128 characters of [A-Za-z0-9._:-]", q)
		}
	}
	return nil
}

// CheckNow validates the caller's clock of any call that takes one.
func CheckNow(now time.Time) error {
	if now.IsZero() || !InTimeRange(now) {
		return invalid("now", "the caller's clock must be given, within the years 1970 to 2261")
	}
	return nil
}

// Check validates a Get: exactly one of ID and JID.
func (p *GetParams) Check() error {
	switch {
	case p.ID != "" && p.JID != "":
		return invalid("jid", "give an id or a jid, not both")
	case p.ID == "" && p.JID == "":
		return invalid("id", "must not be empty")
	case len(p.JID) > MaxJID:
		return invalid("jid", "longer than %d bytes", MaxJID)
	}
	return nil
}
