package uplink

import (
	"errors"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

func TestCheckWorkerID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want string // a part of the error, "" for none
	}{
		{"w", ""},
		{"mac-mini-3", ""},
		{"host.example.com:worker_2", ""},
		{"ABC.abc_019:-", ""},
		{strings.Repeat("a", 64), ""},
		{"", "is required"},
		{strings.Repeat("a", 65), "at most 64 characters"},
		{"worker 1", "only letters, digits and ._:-"},
		{"worker/1", "only letters, digits and ._:-"},
		{"wörker", "only letters, digits and ._:-"},
		{"worker\x00", "only letters, digits and ._:-"},
	} {
		checkResult(t, "worker id", tc.id, CheckWorkerID(tc.id), HeaderWorkerID, tc.want)
	}
}

func TestCheckLabel(t *testing.T) {
	for _, tc := range []struct {
		label string
		want  string
	}{
		{"x", ""},
		{"Mac mini 3", ""},
		{"Salle 2 · Étagère B", ""},
		{"ラック3の Mac", ""},
		{strings.Repeat("é", 64), ""},
		{"", "is required"},
		{strings.Repeat("é", 65), "at most 64 characters"},
		{"rack\t3", "must be printable"},
		{"rack\n3", "must be printable"},
		{"rack\x7f3", "must be printable"},
		{"rack\u202e3", "must be printable"},
		{"rack\u200b3", "must be printable"},
		{"\xff\xfe", "must be UTF-8"},
		{" rack 3", "must not start or end with a space"},
		{"rack 3 ", "must not start or end with a space"},
	} {
		checkResult(t, "label", tc.label, CheckLabel(tc.label), HeaderWorkerLabel, tc.want)
	}
}

func checkResult(t *testing.T, what, v string, err error, header, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s %q refused: %v", what, v, err)
	case want != "" && err == nil:
		t.Errorf("%s %q accepted, want %q", what, v, want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("%s %q: %v, want it to say %q", what, v, err, want)
	case want != "" && (!errors.Is(err, &contract.Error{Code: contract.CodeBadRequest}) || !strings.Contains(err.Error(), header)):
		t.Errorf("%s %q: %v, want a BAD_REQUEST naming %s", what, v, err, header)
	}
}
