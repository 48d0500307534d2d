package contract

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// inputs makes a zero value of every operation's input type, as the
// dispatcher decodes them.
var inputs = []func() Validator{
	func() Validator { return new(HelloInput) },
	func() Validator { return new(StatusGetInput) },
	func() Validator { return new(CatalogGetInput) },
	func() Validator { return new(LeaseRequestInput) },
	func() Validator { return new(LeaseRenewInput) },
	func() Validator { return new(LeaseBindInput) },
	func() Validator { return new(WorkerIDInput) },
	func() Validator { return new(LeaseIDInput) },
	func() Validator { return new(LeaseCancelInput) },
	func() Validator { return new(DeviceIDInput) },
	func() Validator { return new(LeaseRequestRetryInput) },
	func() Validator { return new(LeaseRequestGetInput) },
	func() Validator { return new(ListGetInput) },
	func() Validator { return new(EventsReplayInput) },
	func() Validator { return new(UsageGetInput) },
	func() Validator { return new(ConfigGetInput) },
	func() Validator { return new(PassthroughInput) },
	func() Validator { return new(DoctorInput) },
	func() Validator { return new(ExecInput) },
	func() Validator { return new(CallCancelInput) },
	func() Validator { return new(TokenCreateInput) },
	func() Validator { return new(TokenRevokeInput) },
	func() Validator { return new(ComponentInstallInput) },
	func() Validator { return new(ComponentListInput) },
	func() Validator { return new(ComponentRemoveInput) },
	func() Validator { return new(WorkerChoice) },
	func() Validator { return new(JobListInput) },
	func() Validator { return new(JobIDInput) },
	func() Validator { return new(DemoInjectInput) },
	func() Validator { return new(CleanupRunInput) },
	func() Validator { return new(NukeInput) },
	func() Validator { return new(Empty) },
	func() Validator { return new(FilesPutInput) },
	func() Validator { return new(FilesGetInput) },
	func() Validator { return new(AppInstallInput) },
	func() Validator { return new(ScreenshotInput) },
	func() Validator { return new(TransferIDInput) },
	func() Validator { return new(TransferWriteInput) },
	func() Validator { return new(TransferReadInput) },
	func() Validator { return new(AppLaunchInput) },
	func() Validator { return new(AppTerminateInput) },
	func() Validator { return new(OpenURLInput) },
	func() Validator { return new(DeviceLogsInput) },
	func() Validator { return new(LocationInput) },
	func() Validator { return new(AppearanceInput) },
}

// FuzzOperationInputs feeds every operation's input decoder anything. It
// never panics; a refusal is a typed error whose message encodes as valid
// JSON; an input it takes encodes and reads back to the same thing, still
// valid.
func FuzzOperationInputs(f *testing.F) {
	for _, seed := range []string{
		`{}`, `null`, ``, `{"platform":"ios","model":"iPhone 16","osVersion":">=18 <26","ttlMs":60000,"idempotencyKey":"k-1"}`,
		`{"leaseId":"lse_1","ttlMs":1}`, `{"protocol":{"min":1,"max":1},"principal":"a/b","adminToken":"x"}`,
		`{"kind":"leases","limit":2,"after":"x"}`, `{"afterSeq":-1,"limit":10001}`, `{"tool":"simctl","args":["list"],"stdin":"x"}`,
		`{"platform":"android","component":"system-images;android-35;google_apis;arm64-v8a"}`, `{"TTLMS":5}`, `{"ttlMs":5,"ttlMs":6}`,
		`{"platform":"ios"} {}`, `[1]`, `{"platform":"ios","version":"26.4","workers":"all"}`, `{"platform":"ios","version":"26","workers":["a","a"]}`, `"all"`, `{"jobId":"job_1","limit":3}`, `{"ttlMs":1e400}`, `{"requesterId":"\u0000"}`, "{\"model\":\"\xff\"}",
		`{"leaseId":"lse_1","path":"/sdcard/x.txt","size":3}`, `{"leaseId":"lse_1","path":"@com.example/Documents/../x"}`,
		`{"transferId":"tr_1","offset":0,"data":"aGk="}`, `{"transferId":"tr_1","offset":5,"max":262145}`,
		`{"leaseId":"lse_1","appId":"com.example.app","args":["-a","b"]}`, `{"leaseId":"lse_1","url":"myapp://x?y=1"}`,
		`{"leaseId":"lse_1","lines":10,"sinceMs":60000,"process":"SpringBoard"}`, `{"leaseId":"lse_1","latitude":-90,"longitude":180.5}`,
		`{"leaseId":"lse_1","appearance":"dark"}`,
	} {
		f.Add(uint8(0), []byte(seed))
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		mk := inputs[int(which)%len(inputs)]
		in := mk()
		err := DecodeInput(raw, in)
		if err != nil {
			var cerr *Error
			if !errors.As(err, &cerr) || cerr.Code == "" {
				t.Fatalf("%T %q: an untyped error %v", in, raw, err)
			}
			b, merr := json.Marshal(cerr)
			if merr != nil || !utf8.Valid(b) || !json.Valid(b) {
				t.Fatalf("%T %q: the error does not encode as JSON: %q %v", in, raw, b, merr)
			}
			return
		}
		enc, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("%T %q: taken but does not encode: %v", in, raw, err)
		}
		back := mk()
		if err := DecodeInput(enc, back); err != nil {
			t.Fatalf("%T %q: taken, but its encoding %s is refused: %v", in, raw, enc, err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(enc) {
			t.Fatalf("%T %q: reads back as %s, not %s", in, raw, again, enc)
		}
	})
}

// TestEveryInputTypeIsFuzzed keeps the fuzz list whole: every type in this
// package with a Validate method on its pointer, named in the source, is
// in inputs.
func TestEveryInputTypeIsFuzzed(t *testing.T) {
	listed := map[string]bool{}
	for _, mk := range inputs {
		listed[reflect.TypeOf(mk()).Elem().Name()] = true
	}
	for _, name := range validatorTypes(t) {
		if !listed[name] {
			t.Errorf("%s has a Validate method but is not in FuzzOperationInputs' inputs", name)
		}
	}
}

// validatorTypes lists the receivers of `func (x *T) Validate() error` in
// the package's non-test sources.
func validatorTypes(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func \((?:\w+ )?\*(\w+)\) Validate\(\) error`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out = append(out, m[1])
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d Validate methods: the scan is broken", len(out))
	}
	return out
}
