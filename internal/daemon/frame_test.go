package daemon

import (
	"encoding/json"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/wire"
)

func TestAResultFrameIsWhatEncodingTheResponseWouldWrite(t *testing.T) {
	for _, c := range []struct{ id, result string }{
		{`"c1"`, `{"a":1,"b":[true,null,"x\"y"]}`},
		{`17`, `null`},
		{`"a\u00e9"`, `"\u003chtml\u003e"`},
	} {
		want, err := wire.Encode(contract.Response{ID: json.RawMessage(c.id), Result: json.RawMessage(c.result)})
		if err != nil {
			t.Fatal(err)
		}
		if got := resultFrame(json.RawMessage(c.id), json.RawMessage(c.result)); string(got) != string(want) {
			t.Errorf("id %s result %s:\n got %s\nwant %s", c.id, c.result, got, want)
		}
	}
}
