package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// api talks to a daemon's HTTP API as a real client would.
type api struct {
	t    *testing.T
	base string
}

// httpHome starts a daemon with the HTTP API on a free port and returns
// the home and its API.
func httpHome(t *testing.T, settings ...string) (*home, *api) {
	t.Helper()
	settings = append(append([]string{"http.enabled", "true", "http.port", "0"}, fastDemo...), settings...)
	h := newHome(t, settings...)
	h.startDaemon()
	url := httpURL(t, h)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("the HTTP API listens at %s, want loopback", url)
	}
	return h, &api{t: t, base: url}
}

// token makes an HTTP token with `simlock token create` and returns its id
// and secret.
func (h *home) token(role, label string) (id, secret string) {
	h.T.Helper()
	return h.Token(role, label)
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r reply) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r reply) obj(key string) map[string]any {
	m, _ := r.body[key].(map[string]any)
	return m
}

// do sends one request; body "" sends none. Extra headers come in pairs.
func (a *api) do(method, path, secret, body string, headers ...string) reply {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	out := reply{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out.body); err != nil {
			a.t.Fatalf("%s %s answered %d with a body that is not a JSON object: %q", method, path, resp.StatusCode, b)
		}
	}
	return out
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	id, name, data string
}

// sse is an open event stream.
type sse struct {
	resp   *http.Response
	cancel context.CancelFunc
	events chan sseEvent
	// comments counts comment lines (": keepalive") seen.
	comments chan string
}

// stream opens an event stream and checks it is one.
func (a *api) stream(path, secret string, headers ...string) *sse {
	a.t.Helper()
	return a.streamBody(http.MethodGet, path, secret, "", headers...)
}

// streamBody opens an event stream by sending method with a JSON body
// ("" sends none).
func (a *api) streamBody(method, path, secret, body string, headers ...string) *sse {
	a.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		a.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		a.t.Fatalf("GET %s answered %d %s: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &sse{resp: resp, cancel: cancel, events: make(chan sseEvent, 1024), comments: make(chan string, 1024)}
	a.t.Cleanup(s.close)
	go s.read()
	return s
}

func (s *sse) close() {
	s.cancel()
	s.resp.Body.Close()
}

func (s *sse) read() {
	defer close(s.events)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 || ev.name != "" {
				ev.data = strings.Join(data, "\n")
				s.events <- ev
			}
			ev, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
			select {
			case s.comments <- strings.TrimSpace(line[1:]):
			default:
			}
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.name = value
			case "data":
				data = append(data, value)
			case "id":
				ev.id = value
			}
		}
	}
}

// next waits for the next event; ok is false when the stream ended.
func (s *sse) next(t *testing.T) (sseEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		return ev, ok
	case <-time.After(waitBound):
		t.Fatalf("no event within %s", waitBound)
	}
	return sseEvent{}, false
}

func (ev sseEvent) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
		t.Fatalf("event %s data is not JSON: %q", ev.name, ev.data)
	}
	return m
}
