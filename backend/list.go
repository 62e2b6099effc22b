package backend

import (
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"strings"
)

// ListOrder is the direction of a listing.
type ListOrder string

// Listing orders, by id (which is enqueue order).
const (
	OldestFirst ListOrder = "oldest"
	NewestFirst ListOrder = "newest"
)

// Bounds of one page.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// ListParams filters and pages a listing. Empty filters match every job.
type ListParams struct {
	Queue string
	State State
	Type  string
	// Tag matches a job that has exactly this tag (case-sensitive) among
	// its Tags.
	Tag string
	// Search matches a job whose id starts with it, whose title contains
	// it (ignoring case), or that has it as a tag.
	Search string
	Order  ListOrder // default OldestFirst
	Limit  int       // default DefaultListLimit, at most MaxListLimit
	// Cursor continues the listing that returned it as NextCursor; it is
	// valid only with the same filters and order.
	Cursor string
}

// ListResult is one page. NextCursor is empty on the last page. A page
// before the last may hold fewer than Limit jobs (a store may bound the
// records a Type, Tag or Search filter reads per call), even none: only an
// empty NextCursor ends a listing.
//
// Listed jobs carry every field but Payload, Result and Logs (Get has
// them). A page holds each job at most once, and paging from the first
// page to the last returns every job that matched throughout exactly once,
// whatever is enqueued meanwhile.
type ListResult struct {
	Jobs       []*Job
	NextCursor string
}

// Check validates the filters, applies the defaults and decodes the
// cursor: after is the id the page starts after ("" for the first page).
// A cursor that was altered, or that belongs to other filters, is a
// *ValidationError on the field "cursor".
func (p *ListParams) Check() (after string, err error) {
	switch {
	case p.Queue != "" && !ValidQueueName(p.Queue):
		return "", invalid("queue", "%q is not 1-128 characters of [A-Za-z0-9._:-]", p.Queue)
	case p.State != "" && !p.State.Valid():
		return "", invalid("state", "unknown state %q", p.State)
	case p.Order != "" && p.Order != OldestFirst && p.Order != NewestFirst:
		return "", invalid("order", "unknown order %q (oldest or newest)", p.Order)
	case p.Limit < 0 || p.Limit > MaxListLimit:
		return "", invalid("limit", "%d is outside [0, %d]", p.Limit, MaxListLimit)
	case len(p.Tag) > MaxTag:
		return "", invalid("tag", "longer than %d bytes", MaxTag)
	case !ValidText(p.Tag):
		return "", invalid("tag", textReason)
	case len(p.Search) > 256:
		return "", invalid("search", "longer than 256 bytes")
	}
	if p.Order == "" {
		p.Order = OldestFirst
	}
	if p.Limit == 0 {
		p.Limit = DefaultListLimit
	}
	if p.Cursor == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(p.Cursor)
	if err != nil || len(raw) < 5 {
		return "", invalid("cursor", "not a cursor this listing gave")
	}
	id := string(raw[4:])
	if binary.BigEndian.Uint32(raw[:4]) != p.cursorSum(id) {
		return "", invalid("cursor", "altered, or made for other filters or another order")
	}
	return id, nil
}

// After is the id a checked listing's page starts after ("" for the
// first page): what Check returned, for a store that Checked ran Check
// for.
func (p *ListParams) After() string {
	raw, err := base64.RawURLEncoding.DecodeString(p.Cursor)
	if err != nil || len(raw) < 5 {
		return ""
	}
	return string(raw[4:])
}

// NextCursor returns the cursor of the page that follows the job with the
// id last, for these (checked) filters.
func (p *ListParams) NextCursor(last string) string {
	raw := binary.BigEndian.AppendUint32(nil, p.cursorSum(last))
	raw = append(raw, last...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// cursorSum binds a cursor to its id, filters and order, so an edited or
// misplaced cursor is refused rather than silently listing something else.
func (p *ListParams) cursorSum(id string) uint32 {
	var b strings.Builder
	for _, s := range []string{"kyu-cursor-1", p.Queue, string(p.State), p.Type, p.Tag, p.Search, string(p.Order), id} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return crc32.ChecksumIEEE([]byte(b.String()))
}

// Matches reports whether j passes the filters of p (not the cursor).
func (p *ListParams) Matches(j *Job) bool {
	switch {
	case p.Queue != "" && j.Queue != p.Queue,
		p.State != "" && j.State != p.State,
		p.Type != "" && j.Type != p.Type,
		p.Tag != "" && !slices.Contains(j.Tags, p.Tag):
		return false
	}
	return p.Search == "" || MatchesSearch(j, p.Search)
}

// MatchesSearch reports whether j's id starts with q, its title contains q
// ignoring case, or one of its tags is q.
func MatchesSearch(j *Job, q string) bool {
	if strings.HasPrefix(j.ID, q) || strings.Contains(strings.ToLower(j.Title), strings.ToLower(q)) {
		return true
	}
	for _, t := range j.Tags {
		if t == q {
			return true
		}
	}
	return false
}
