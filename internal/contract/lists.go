package contract

import (
	"encoding/json"
	"strconv"
	"strings"
)

// LeaseListResult answers lease.list.
type LeaseListResult struct {
	Leases []LeaseRecord `json:"leases"`
}

// ListKind picks what list.get returns.
type ListKind string

// The list kinds.
const (
	ListDevices  ListKind = "devices"
	ListLeases   ListKind = "leases"
	ListRequests ListKind = "requests"
	// ListFailedRequests are the requests that failed lately and that
	// their requester has not asked again since (a retry or a new
	// request), newest first (the console's Attention, with Retry): at
	// most Limit, or DefaultFailedRequests; not paged.
	ListFailedRequests ListKind = "failed-requests"
)

// DefaultFailedRequests is how many failed requests list.get returns when
// asked for no limit.
const DefaultFailedRequests = 100

// ListGetInput asks for one kind of record, optionally one page of it.
type ListGetInput struct {
	Kind ListKind `json:"kind"`
	// Limit caps the page: 0 means the whole list, at most MaxListPage.
	Limit int `json:"limit,omitempty"`
	// After is the previous page's Next: the page starts with the first
	// record after it in list order (oldest first).
	After string `json:"after,omitempty"`
}

// MaxListPage is the largest page list.get returns.
const MaxListPage = 10000

// Validate checks the input's fields.
func (in *ListGetInput) Validate() error {
	if in.Limit < 0 || in.Limit > MaxListPage {
		return BadRequest("limit", "must be between 0 and %d, got %d", MaxListPage, in.Limit)
	}
	if err := checkLen("after", in.After, MaxIDLen); err != nil {
		return err
	}
	if in.After != "" {
		if _, err := ParseListCursor(in.After); err != nil {
			return err
		}
	}
	switch in.Kind {
	case ListDevices, ListLeases, ListRequests:
		return nil
	case ListFailedRequests:
		if in.After != "" {
			return BadRequest("after", "the failed requests are not paged: ask without after")
		}
		return nil
	case "":
		in.Kind = ListDevices
		return nil
	}
	return BadRequest("kind", "must be devices, leases or requests, got %q", clip(string(in.Kind)))
}

// ListGetResult answers list.get; only the asked-for field is set.
type ListGetResult struct {
	Devices  []Device             `json:"devices,omitempty"`
	Leases   []LeaseRecord        `json:"leases,omitempty"`
	Requests []LeaseRequestRecord `json:"requests,omitempty"`
	// Next, set when a limited page did not reach the end, is the after
	// of the next page (an opaque cursor).
	Next string `json:"next,omitempty"`
}

// MarshalJSON writes the list that was read, empty or not ("leases":[]),
// and leaves out the kinds that were not: a list is nil when not read.
func (r ListGetResult) MarshalJSON() ([]byte, error) {
	var out struct {
		Devices  *[]Device             `json:"devices,omitempty"`
		Leases   *[]LeaseRecord        `json:"leases,omitempty"`
		Requests *[]LeaseRequestRecord `json:"requests,omitempty"`
		Next     string                `json:"next,omitempty"`
	}
	if r.Devices != nil {
		out.Devices = &r.Devices
	}
	if r.Leases != nil {
		out.Leases = &r.Leases
	}
	if r.Requests != nil {
		out.Requests = &r.Requests
	}
	out.Next = r.Next
	return json.Marshal(out)
}

// ListCursor is where a page of a list ends: the sort time (epoch ms) and
// id of its last record. Lists are ordered by (time, id), so a page resumes
// exactly after its cursor even when that record is gone meanwhile.
type ListCursor struct {
	At int64
	ID string
}

// String is the cursor as list.get's next and after carry it.
func (c ListCursor) String() string { return strconv.FormatInt(c.At, 10) + "-" + c.ID }

// ParseListCursor reads a cursor from list.get's after.
func ParseListCursor(s string) (ListCursor, error) {
	at, id, ok := strings.Cut(s, "-")
	ms, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return ListCursor{}, BadRequest("after", "is not a cursor list.get returned as next: %q", clip(s))
	}
	return ListCursor{At: ms, ID: id}, nil
}

// Passed reports whether a record at (at, id) is at or before c in list
// order: on an earlier page.
func (c ListCursor) Passed(at int64, id string) bool {
	return at < c.At || (at == c.At && id <= c.ID)
}

// checkTTLMs is the protocol's bound of a TTL, whatever the config: not
// negative (0 is the default) and at most MaxTTLMs, said as such (a TTL of
// 2^31 was once told it "must be a positive number"). The config's own
