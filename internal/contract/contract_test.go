package contract

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEveryCodeHasExitAndStatus(t *testing.T) {
	want := map[Code][2]int{
		CodeBadFrame: {2, 400}, CodeBadRequest: {2, 400}, CodeUnknownRequest: {2, 400},
		CodeNoCapacity: {11, 503}, CodeQueueTimeout: {10, 500}, CodeRequesterAlreadyLeased: {13, 409},
		CodeUnknownModel: {12, 422}, CodeRuntimeMissing: {12, 422}, CodeNoDriver: {12, 422},
		CodeUnknownLease: {1, 404}, CodeForbidden: {1, 403}, CodeProtocolVersionUnsupported: {1, 400},
		CodeAdminAuthenticationFailed: {1, 401}, CodeDaemonStopping: {1, 503}, CodeInternal: {1, 500},
	}
	for code, w := range want {
		if code.ExitCode() != w[0] || code.HTTPStatus() != w[1] {
			t.Errorf("%s: exit %d status %d, want %d %d", code, code.ExitCode(), code.HTTPStatus(), w[0], w[1])
		}
	}
	for _, c := range Codes() {
		if c.HTTPStatus() < 400 {
			t.Errorf("%s maps to HTTP %d", c, c.HTTPStatus())
		}
	}
	if Code("SOMETHING_NEW").ExitCode() != 1 {
		t.Error("unknown codes exit 1")
	}
}

func TestErrorJSONIsFlatAndRoundTrips(t *testing.T) {
	e := Errorf(CodeQueueTimeout, "waited too long").With("requestId", "req_1")
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"code":"QUEUE_TIMEOUT","message":"waited too long","requestId":"req_1"}` {
		t.Errorf("json = %s", b)
	}
	var back Error
	if err := json.Unmarshal(b, &back); err != nil || back.Code != CodeQueueTimeout || back.Details["requestId"] != "req_1" {
		t.Errorf("round trip = %+v, %v", back, err)
	}
	if !errors.Is(e, &Error{Code: CodeQueueTimeout}) || errors.Is(e, &Error{Code: CodeNoCapacity}) {
		t.Error("errors.Is must match by code")
	}
}

func TestDecodeInputNamesTheField(t *testing.T) {
	cases := []struct {
		raw, field, msg string
	}{
		{`{"platform":"ios","bogus":1}`, "bogus", "unknown field"},
		{`{"platform":"ios","ttlMs":"soon"}`, "ttlMs", "integer"},
		{`{"platform":"ios","ttlMs":1.5}`, "ttlMs", "integer"},
		{`{"platform":"ios","ttlMs":-1}`, "ttlMs", "negative"},
		{`{"platform":"windows"}`, "platform", "ios or android"},
		{`{}`, "platform", "required"},
		{`{"platform":"ios","model":"iPhone","class":"phone"}`, "class", "not both"},
		{`{"platform":"ios","class":"laptop"}`, "class", "one of"},
		{`{"platform":"ios","model":"` + strings.Repeat("x", 300) + `"}`, "model", "at most"},
		{`{"platform":"ios","requesterId":"bad id with spaces"}`, "requesterId", "letters"},
		{`{"platform":"ios","timeoutMs":99999999999}`, "timeoutMs", "between"},
	}
	for _, c := range cases {
		var in LeaseRequestInput
		err := DecodeInput(json.RawMessage(c.raw), &in)
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != CodeBadRequest {
			t.Errorf("%s: err = %v, want BAD_REQUEST", c.raw[:min(len(c.raw), 60)], err)
			continue
		}
		if ce.Details["field"] != c.field || !strings.Contains(ce.Message, c.msg) {
			t.Errorf("%s: %q field %v, want field %s and %q", c.raw[:min(len(c.raw), 60)], ce.Message, ce.Details["field"], c.field, c.msg)
		}
	}
	var in LeaseRequestInput
	if err := DecodeInput(json.RawMessage(`{"platform":"android","class":"tablet","ttlMs":60000}`), &in); err != nil {
		t.Errorf("valid input refused: %v", err)
	}
	if err := DecodeInput(json.RawMessage(`{"platform":"ios"} {"x":1}`), &in); err == nil {
		t.Error("two objects accepted as one input")
	}
}

func TestProgressJSONCarriesOnlyItsStagesFields(t *testing.T) {
	b, _ := json.Marshal(LeaseProgress{Stage: StageQueued, QueuePosition: 2, EtaMs: 5})
	if string(b) != `{"stage":"queued","queuePosition":2}` {
		t.Errorf("queued = %s", b)
	}
	b, _ = json.Marshal(LeaseProgress{Stage: StageBooting, EtaMs: 0})
	if string(b) != `{"stage":"booting","etaMs":0}` {
		t.Errorf("booting = %s", b)
	}
}

func TestDownloadingProgressIsBoundedBySchema(t *testing.T) {
	ok := `{"stage":"downloading","component":"26.4","waiting":false,"percent":41}`
	var p LeaseProgress
	if err := json.Unmarshal([]byte(ok), &p); err != nil || p.Component != "26.4" || p.Percent == nil || *p.Percent != 41 {
		t.Fatalf("valid step: %+v, %v", p, err)
	}
	back, _ := json.Marshal(p)
	if string(back) != ok {
		t.Errorf("round trip = %s, want %s", back, ok)
	}
	for _, bad := range []string{
		`{"stage":"downloading","component":"26.4","waiting":false,"percent":101}`,
		`{"stage":"downloading","component":"26.4","waiting":false,"percent":-1}`,
		`{"stage":"downloading","component":"` + strings.Repeat("x", 65) + `","waiting":false}`,
		`{"stage":"downloading","waiting":true}`,
	} {
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if err := json.Unmarshal([]byte(`{"stage":"downloading","component":"`+strings.Repeat("x", 64)+`","waiting":true}`), &p); err != nil {
		t.Errorf("a 64-character component was refused: %v", err)
	}
}

// A booting step's detail round-trips, and one too long or with a control
// character (a relayed push is a claim) is refused.
func TestABootingStepsDetailIsBoundedWhenRead(t *testing.T) {
	ok := `{"stage":"booting","etaMs":2000,"detail":"waiting for sys.boot_completed"}`
	var p LeaseProgress
	if err := json.Unmarshal([]byte(ok), &p); err != nil || p.Detail != "waiting for sys.boot_completed" {
		t.Fatalf("valid step: %+v, %v", p, err)
	}
	if back, _ := json.Marshal(p); string(back) != ok {
		t.Errorf("round trip = %s, want %s", back, ok)
	}
	for _, bad := range []string{
		`{"stage":"booting","etaMs":1,"detail":"` + strings.Repeat("x", MaxProgressDetailLen+1) + `"}`,
		`{"stage":"booting","etaMs":1,"detail":"a\u0007b"}`,
	} {
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("accepted %.80s…", bad)
		}
	}
}

func TestQueuedWaitIsCheckedWhenRead(t *testing.T) {
	ok := `{"stage":"queued","queuePosition":1,"wait":{"limit":"platform-running","inUse":1,"max":1,"leaseId":"lse_1","holder":"h2","endsAt":1700000000000}}`
	var p LeaseProgress
	if err := json.Unmarshal([]byte(ok), &p); err != nil || p.Wait == nil || p.Wait.Holder != "h2" {
		t.Fatalf("valid wait: %+v, %v", p, err)
	}
	if back, _ := json.Marshal(p); string(back) != ok {
		t.Errorf("round trip = %s, want %s", back, ok)
	}
	for _, bad := range []string{
		`{"stage":"queued","queuePosition":1,"wait":{"limit":"moon","inUse":1,"max":1}}`,
		`{"stage":"queued","queuePosition":1,"wait":{"limit":"devices","inUse":-1,"max":1}}`,
		`{"stage":"queued","queuePosition":1,"wait":{"limit":"devices","inUse":1,"max":1,"holder":"` + strings.Repeat("x", MaxIDLen+1) + `"}}`,
		`{"stage":"queued","queuePosition":1,"wait":{"limit":"devices","inUse":1,"max":1,"endsAt":-5}}`,
		`{"stage":"queued","queuePosition":1,"wait":{"limit":"devices","inUse":1,"max":1,"holder":"a\u001b[2Jb"}}`,
		`{"stage":"booting","etaMs":5,"wait":{"limit":"devices","inUse":1,"max":1}}`,
	} {
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestComponentNamesCannotReachOutsideTheSDK(t *testing.T) {
	for _, ok := range []string{"26.4", "26", "latest", "36", "Baklava-preview"} {
		in := ComponentInstallInput{Platform: PlatformAndroid, Version: ok}
		if err := in.Validate(); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../36", "36/../../etc", "a..b", "36;rm", "36 37", "/abs", strings.Repeat("1", 65)} {
		in := ComponentRemoveInput{Platform: PlatformAndroid, Version: bad}
		if err := in.Validate(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestAnUnknownFieldNamesTheFieldItLikelyMeant(t *testing.T) {
	for _, c := range []struct{ sent, meant string }{
		{"device", "model"},
		{"os_version", "osVersion"},
		{"ttl", "ttlMs"},
		{"TTL_MS", "ttlMs"},
		{"colour", ""},
	} {
		var in LeaseRequestInput
		err := DecodeInput(json.RawMessage(`{"platform":"ios","`+c.sent+`":"x"}`), &in)
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != CodeBadRequest || ce.Details["field"] != c.sent {
			t.Fatalf("%s: %v, want BAD_REQUEST naming %s", c.sent, err, c.sent)
		}
		got, _ := ce.Details["didYouMean"].(string)
		if got != c.meant {
			t.Errorf("%s: didYouMean %q, want %q (%s)", c.sent, got, c.meant, ce.Message)
		}
		if c.meant != "" && !strings.Contains(ce.Message, "did you mean "+c.meant+"?") {
			t.Errorf("%s: message %q does not say what was meant", c.sent, ce.Message)
		}
	}
}

func TestQueueWaitWordsCountTheLeaseDown(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	w := QueueWait{Limit: WaitPlatformRunning, InUse: 1, Max: 1, LeaseID: "lse_1", Holder: "h2"}
	for _, c := range []struct {
		left time.Duration
		want string
	}{
		{40*time.Second + 100*time.Millisecond, "1/1 running: lse_1 held by h2, expires in 41s"},
		{14 * time.Minute, "1/1 running: lse_1 held by h2, expires in 14m"},
		{2*time.Hour + 5*time.Minute, "1/1 running: lse_1 held by h2, expires in 2h05m"},
		{-time.Second, "1/1 running: lse_1 held by h2, due to expire unless renewed"},
	} {
		w.EndsAt = now.Add(c.left).UnixMilli()
		if got := w.Words(now); got != c.want {
			t.Errorf("%s left: %q, want %q", c.left, got, c.want)
		}
	}
	if got := (QueueWait{Limit: WaitRAM, InUse: 7000, Max: 8192}).Words(now); got != "RAM budget 7000/8192 MiB in use" {
		t.Errorf("RAM wait: %q", got)
	}
}

func TestDownloadSizesAreCheckedWhenRead(t *testing.T) {
	ok := `{"stage":"downloading","component":"26.4","waiting":false,"percent":41,"bytesDone":3600000000,"bytesTotal":8900000000}`
	var p LeaseProgress
	if err := json.Unmarshal([]byte(ok), &p); err != nil || p.BytesDone != 3_600_000_000 || p.BytesTotal != 8_900_000_000 {
		t.Fatalf("valid sizes: %+v, %v", p, err)
	}
	if back, _ := json.Marshal(p); string(back) != ok {
		t.Errorf("round trip = %s, want %s", back, ok)
	}
	if got := SizeWords(p.BytesDone, p.BytesTotal); got != "3.6 GB of 8.9 GB" {
		t.Errorf("SizeWords = %q", got)
	}
	for _, bad := range []string{
		`{"stage":"downloading","component":"26.4","waiting":false,"bytesDone":9,"bytesTotal":3}`,
		`{"stage":"downloading","component":"26.4","waiting":false,"bytesDone":-1,"bytesTotal":3}`,
		`{"stage":"downloading","component":"26.4","waiting":false,"bytesDone":5}`,
		`{"stage":"downloading","component":"26.4","waiting":false,"bytesDone":1,"bytesTotal":2000000000000000}`,
	} {
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestKeysAreExactAndOnce(t *testing.T) {
	type inner struct {
		TTLMs int64 `json:"ttlMs"`
	}
	type outer struct {
		ID    json.RawMessage `json:"id"`
		Spec  inner           `json:"spec"`
		List  []inner         `json:"list"`
		Extra map[string]any  `json:"extra"`
	}
	typ := reflect.TypeFor[outer]()
	for _, ok := range []string{
		`{"id":"1","spec":{"ttlMs":5},"list":[{"ttlMs":1},{"ttlMs":2}],"extra":{"a":1,"b":{"a":2}}}`,
		`{"id":{"ttlMs":1,"TTLMS":2}}`, // raw: its own reader checks it
		`{"unknown":1}`,                // left to the unknown-field check
		`{"spec":{"ttl\u004ds":5}}`,    // an escape that spells the name
		`{"spec":`,                     // malformed: the decoder's to report
		`{"list":[],"extra":{}}`,
	} {
		if err := CheckKeys([]byte(ok), typ); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, c := range []struct{ in, key, want string }{
		{`{"ID":"1"}`, "ID", "id"},
		{`{"spec":{"TTLMS":5}}`, "TTLMS", "ttlMs"},
		{`{"list":[{"ttlMs":1},{"ttlms":2}]}`, "ttlms", "ttlMs"},
		{`{"spec":{"ttlMs":1,"ttlMs":2}}`, "ttlMs", ""},
		{`{"extra":{"a":1,"a":2}}`, "a", ""},
		{`{"id":"1","id":"2"}`, "id", ""},
		{`{"spec":{"\u0054TLMS":1}}`, "TTLMS", "ttlMs"},
		// Bytes that are not UTF-8 read as U+FFFD: two such keys the
		// decoder reads alike are one key, repeated.
		{"{\"extra\":{\"\xffa\":1,\"\xfea\":2}}", "\ufffda", ""},
	} {
		err := CheckKeys([]byte(c.in), typ)
		ke, ok := err.(*KeyError)
		if !ok || ke.Key != c.key || ke.Want != c.want || ke.Dup != (c.want == "") {
			t.Errorf("%s: %v, want the key %q refused (exact name %q)", c.in, err, c.key, c.want)
		}
	}
	var in LeaseRequestInput
	err := DecodeInput(json.RawMessage(`{"platform":"ios","TTLMs":60000}`), &in)
	if ce := AsError(err); ce.Code != CodeBadRequest || ce.Details["field"] != "TTLMs" || ce.Details["didYouMean"] != "ttlMs" {
		t.Errorf("an input key in another case: %v, want BAD_REQUEST on TTLMs, did you mean ttlMs", err)
	}
	err = DecodeInput(json.RawMessage(`{"platform":"ios","platform":"android"}`), &in)
	if ce := AsError(err); ce.Code != CodeBadRequest || ce.Details["field"] != "platform" {
		t.Errorf("a repeated input key: %v, want BAD_REQUEST on platform", err)
	}
}

// BenchmarkCheckKeysOfARenewFrame is the check's cost on the commonest
// frame and its input (it runs on every frame).
func BenchmarkCheckKeysOfARenewFrame(b *testing.B) {
	frame := []byte(`{"id":"17","op":"lease.renew","input":{"leaseId":"lse_ec5e16d815965da4","ttlMs":60000}}`)
	input := []byte(`{"leaseId":"lse_ec5e16d815965da4","ttlMs":60000}`)
	req, in := reflect.TypeFor[Request](), reflect.TypeFor[*LeaseRenewInput]()
	b.ReportAllocs()
	for b.Loop() {
		if CheckKeys(frame, req) != nil || CheckKeys(input, in) != nil {
			b.Fatal("refused")
		}
	}
}

func TestAnInstallNamesAnAndroidImageTagOnlyAsLevelSemicolonTag(t *testing.T) {
	for _, ok := range []string{"36;google_apis_playstore", "35;google_apis", "Baklava;google_apis"} {
		in := ComponentInstallInput{Platform: PlatformAndroid, Version: ok}
		if err := in.Validate(); err != nil {
			t.Errorf("android %q refused: %v", ok, err)
		}
	}
	for _, c := range []struct {
		p Platform
		v string
	}{
		{PlatformIOS, "26.4;google_apis"}, {PlatformAndroid, "36;"}, {PlatformAndroid, ";google_apis"},
		{PlatformAndroid, "36;rm -rf"}, {PlatformAndroid, "36;a;b"}, {PlatformAndroid, "../36;google_apis"},
		{PlatformAndroid, "36;" + strings.Repeat("t", MaxImageTagLen+1)},
	} {
		in := ComponentInstallInput{Platform: c.p, Version: c.v}
		err := in.Validate()
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != CodeBadRequest || ce.Details["field"] != "version" {
			t.Errorf("%s %q: %v, want BAD_REQUEST on version", c.p, c.v, err)
		}
	}
	if err := (&ComponentRemoveInput{Platform: PlatformAndroid, Version: "36;google_apis"}).Validate(); err == nil {
		t.Error("a remove took a tagged component; it removes whole levels")
	}
}

func TestClipCutsAtItsBoundAndMarksTheCut(t *testing.T) {
	long := strings.Repeat("a", 100)
	for _, c := range []struct {
		got, want string
	}{
		{Clip(""), ""},
		{Clip(long[:ClipLen]), long[:ClipLen]},
		{Clip(long[:ClipLen+1]), long[:ClipLen] + "…"},
		{ClipTo(long, 40), long[:40] + "…"},
		{ClipTo("short", 40), "short"},
	} {
		if c.got != c.want {
			t.Errorf("clipped to %q, want %q", c.got, c.want)
		}
	}
}
