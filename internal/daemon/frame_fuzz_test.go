package daemon

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

// FuzzDecodeFrame feeds the frame decoder anything a client could send. It
// never panics; what it refuses is answered with one line of valid JSON
// (the id echoed only when it is a usable one); what it takes has a usable
// id and an op, and reads back the same once encoded again.
func FuzzDecodeFrame(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","op":"hello","input":{"protocol":{"min":1,"max":1},"principal":"p"}}`,
		`{"id":7,"op":"lease.renew","input":{"leaseId":"lse_1","ttlMs":60000}}`,
		`{"id":null,"op":"status.get"}`, `{"op":"status.get"}`, `{"id":true,"op":"x"}`,
		`{"id":"1","OP":"status.get"}`, `{"id":"1","op":"a","op":"b"}`, `{"id":"1","op":"a","extra":1}`,
		"{\"id\":\"\xff\xfe\",\"op\":\"status.get\"}", `{"id":"1","op":"a"} {"id":"2"}`, `[`, ``, `"just a string"`,
		`{"id":"` + string(bytes.Repeat([]byte("x"), 200)) + `","op":"a"}`, `{"id":1e3,"op":"a"}`, `{"id":-1,"op":""}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, refused := decodeFrame(frame)
		if refused != nil {
			if refused.Error == nil || refused.Error.Code != contract.CodeBadFrame {
				t.Fatalf("%q refused without BAD_FRAME: %+v", frame, refused)
			}
			line, err := wire.Encode(*refused)
			if err != nil {
				t.Fatalf("%q: the refusal does not encode: %v", frame, err)
			}
			if !utf8.Valid(line) || !json.Valid(line) || bytes.IndexByte(line[:len(line)-1], '\n') >= 0 {
				t.Fatalf("%q: the refusal is not one line of JSON: %q", frame, line)
			}
			if string(refused.ID) != "null" && !validID(refused.ID) {
				t.Fatalf("%q: the refusal echoes an unusable id %q", frame, refused.ID)
			}
			return
		}
		if !validID(req.ID) || req.Op == "" {
			t.Fatalf("%q taken with id %q and op %q", frame, req.ID, req.Op)
		}
		again, err := wire.Encode(req)
		if err != nil {
			t.Fatalf("%q: the request taken does not encode: %v", frame, err)
		}
		back, refused := decodeFrame(again)
		if refused != nil || string(back.ID) != string(req.ID) || back.Op != req.Op {
			t.Fatalf("%q taken, but its encoding %q reads back as %+v / %+v", frame, again, back, refused)
		}
	})
}
