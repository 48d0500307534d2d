package config

// Reading a value for a key, from the file (JSON) or a command line (text),
// and the rules that span keys.

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/simlock/simlock/internal/contract"
)

// check applies rules that span keys.
func (c *Config) check() error {
	if port := c.Int("drivers.android.adbServerPort"); port == 5037 || port > 65535 {
		return &Error{Key: "drivers.android.adbServerPort", Msg: fmt.Sprintf("must be a port from 1024 to 65535 other than 5037 (the default adb server's), got %d", port)}
	}
	if port := c.Int("http.port"); port > 65535 {
		return &Error{Key: "http.port", Msg: fmt.Sprintf("must be a port from 0 to 65535, got %d", port)}
	}
	if c.Int("lease.minTtlMs") > c.Int("lease.defaultTtlMs") {
		return &Error{Key: "lease.minTtlMs", Msg: fmt.Sprintf("must not exceed lease.defaultTtlMs (%d), got %d",
			c.Int("lease.defaultTtlMs"), c.Int("lease.minTtlMs"))}
	}
	if c.Int("lease.defaultTtlMs") > c.Int("lease.maxTtlMs") {
		return &Error{Key: "lease.defaultTtlMs", Msg: fmt.Sprintf("must not exceed lease.maxTtlMs (%d), got %d",
			c.Int("lease.maxTtlMs"), c.Int("lease.defaultTtlMs"))}
	}
	if raw := c.String("gateway.url"); raw != "" {
		if err := checkGatewayURL(c, "gateway.url", raw); err != nil {
			return err
		}
	}
	for _, raw := range c.List("gateway.urls") {
		if err := checkGatewayURL(c, "gateway.urls", raw); err != nil {
			return err
		}
	}
	if raw := c.String("gateway.advertiseUrl"); raw != "" {
		if u, err := url.Parse(raw); err != nil || !gatewayAddress(u) {
			return &Error{Key: "gateway.advertiseUrl", Msg: fmt.Sprintf("must be this replica's address, http://host:port or https://host:port, got %q", raw)}
		}
	}
	return nil
}

// checkGatewayURL checks one gateway address a worker dials (gateway.url,
// an item of gateway.urls): a bare http(s) origin, and plain http only to
// this machine unless gateway.allowInsecure says so.
func checkGatewayURL(c *Config, key, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !gatewayAddress(u) {
		return &Error{Key: key, Msg: fmt.Sprintf("must be the gateway's address, http://host:port or https://host:port, got %q", raw)}
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) && !c.Bool("gateway.allowInsecure") {
		return &Error{Key: key, Msg: fmt.Sprintf("%q is plain http:// to another machine: the join token and the gateway's admin session on this worker "+
			"would cross the network in clear text; use https://, or set gateway.allowInsecure true on a network you trust", raw)}
	}
	return nil
}

// gatewayAddress reports whether u is a bare http(s) origin.
func gatewayAddress(u *url.URL) bool {
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.User == nil && u.Fragment == ""
}

// loopbackHost reports whether host (a URL's host, without port or
// brackets) names this machine: localhost or a loopback address. A name
// is not resolved: only localhost is taken on trust.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (k keySpec) fromJSON(v any) (any, error) {
	bad := func(format string, args ...any) error {
		return &Error{Key: k.key, Msg: fmt.Sprintf(format, args...)}
	}
	switch k.kind {
	case kindInt:
		n, ok := v.(json.Number)
		if !ok {
			return nil, bad("must be an integer, got %s", describe(v))
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			return nil, bad("must be an integer, got %s", n)
		}
		return k.checkInt(i)
	case kindBool:
		b, ok := v.(bool)
		if !ok {
			return nil, bad("must be true or false, got %s", describe(v))
		}
		return b, nil
	case kindEnum:
		s, ok := v.(string)
		if !ok || !slices.Contains(k.allowed, s) {
			return nil, bad("must be one of %s, got %s", strings.Join(k.allowed, ", "), describe(v))
		}
		return s, nil
	case kindString:
		s, ok := v.(string)
		if !ok || s == "" || len(s) > 4096 {
			return nil, bad("must be a non-empty string, got %s", describe(v))
		}
		return s, nil
	case kindStore:
		s, ok := v.(string)
		if !ok {
			return nil, bad("must be sqlite or a postgres:// URL, got %s", describe(v))
		}
		if err := checkStore(s); err != nil {
			return nil, bad("%v", err)
		}
		return s, nil
	case kindModels:
		if s, ok := v.(string); ok {
			v = []any{s}
		}
		arr, ok := v.([]any)
		if !ok || len(arr) == 0 {
			return nil, bad("must be a model name or a non-empty list of them, got %s", describe(v))
		}
		out := make([]string, 0, len(arr))
		for _, item := range arr {
			s, ok := item.(string)
			if !ok || s == "" || len(s) > 256 {
				return nil, bad("items must be model names, got %s", describe(item))
			}
			out = append(out, s)
		}
		return out, nil
	case kindTargets:
		arr, ok := v.([]any)
		if !ok {
			return nil, bad(`must be a list of {"platform","model","osVersion"?,"count"} objects, got %s`, describe(v))
		}
		if len(arr) > 256 {
			return nil, bad("at most 256 targets, got %d", len(arr))
		}
		out := make([]WarmTarget, 0, len(arr))
		for i, item := range arr {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, bad("target %d must be an object, got %s", i, describe(item))
			}
			var t WarmTarget
			for k, val := range m {
				switch k {
				case "mode":
					sv, _ := val.(string)
					if sv != "full" && sv != "slim" {
						return nil, bad("target %d: mode must be slim or full, got %s", i, describe(val))
					}
					t.Mode = sv
				case "imageTag":
					sv, _ := val.(string)
					if err := contract.CheckImageTag(contract.PlatformAndroid, sv); err != nil || sv == "" {
						return nil, bad("target %d: imageTag must be 1 to %d ASCII letters, digits, _ and -, got %s", i, contract.MaxImageTagLen, describe(val))
					}
					t.ImageTag = sv
				case "platform", "model", "osVersion":
					sv, ok := val.(string)
					if !ok || sv == "" || len(sv) > 256 {
						return nil, bad("target %d: %s must be a non-empty string of at most 256 characters", i, k)
					}
					switch k {
					case "platform":
						t.Platform = sv
					case "model":
						t.Model = sv
					default:
						t.OSVersion = sv
					}
				case "count":
					n, ok := val.(json.Number)
					c, err := n.Int64()
					if !ok || err != nil || c < 1 || c > 64 {
						return nil, bad("target %d: count must be a whole number from 1 to 64, got %s", i, describe(val))
					}
					t.Count = int(c)
				default:
					return nil, bad("target %d: unknown field %q (fields: platform, model, osVersion, imageTag, mode, count)", i, k)
				}
			}
			if t.Platform != "ios" && t.Platform != "android" {
				return nil, bad("target %d: platform must be ios or android, got %q", i, t.Platform)
			}
			if t.Model == "" || t.Count == 0 {
				return nil, bad("target %d: model and count are required", i)
			}
			if t.Mode == "slim" && t.Platform != "ios" {
				return nil, bad("target %d: mode slim is for ios only", i)
			}
			if t.ImageTag != "" && t.Platform != "android" {
				return nil, bad("target %d: imageTag is for android only", i)
			}
			out = append(out, t)
		}
		return out, nil
	case kindPlatformLists:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad(`must be an object of version lists by platform, like {"ios":["26.4"],"android":["37"]}, got %s`, describe(v))
		}
		out := map[string][]string{}
		for p, list := range m {
			if p != "ios" && p != "android" {
				return nil, bad("platforms are ios and android, got %q", p)
			}
			arr, ok := list.([]any)
			if !ok {
				return nil, bad("%s must be a list of versions, got %s", p, describe(list))
			}
			out[p] = []string{}
			for _, item := range arr {
				s, ok := item.(string)
				if !ok || s == "" || len(s) > 64 || strings.ContainsAny(s, " \t\n") {
					return nil, bad("%s: versions are short strings such as 26.4, got %s", p, describe(item))
				}
				out[p] = append(out[p], s)
			}
		}
		return out, nil
	case kindList:
		arr, ok := v.([]any)
		if !ok {
			return nil, bad("must be a list, got %s", describe(v))
		}
		out := make([]string, 0, len(arr))
		for _, item := range arr {
			s, ok := item.(string)
			if !ok || (len(k.allowed) > 0 && !slices.Contains(k.allowed, s)) {
				return nil, bad("items must be among %s, got %s", strings.Join(k.allowed, ", "), describe(item))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, bad("unsupported")
}

func (k keySpec) checkInt(i int64) (any, error) {
	if i < k.min {
		if k.min == 1 {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be a positive integer, got %d", i)}
		}
		return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be at least %d, got %d", k.min, i)}
	}
	if k.max > 0 && i > k.max {
		return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be at most %d, got %d", k.max, i)}
	}
	if i > math.MaxInt32*int64(1000) {
		return nil, &Error{Key: k.key, Msg: fmt.Sprintf("is too large: %d", i)}
	}
	return i, nil
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 64 {
		return fmt.Sprintf("a %T", v)
	}
	return string(b)
}

func (k keySpec) fromText(s string) (any, error) {
	switch k.kind {
	case kindInt:
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be an integer, got %q", s)}
		}
		return k.checkInt(i)
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be true or false, got %q", s)}
		}
		return b, nil
	case kindEnum, kindString, kindStore:
		return k.fromJSON(strings.TrimSpace(s))
	case kindModels:
		if strings.HasPrefix(strings.TrimSpace(s), "[") {
			var items []any
			if err := json.Unmarshal([]byte(s), &items); err != nil {
				return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be a model name or a JSON list, got %q", s)}
			}
			return k.fromJSON(items)
		}
		return k.fromJSON(strings.TrimSpace(s))
	case kindTargets:
		var doc any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf(`must be a JSON list such as [{"platform":"ios","model":"iPhone 17","count":2}], got %q`, s)}
		}
		return k.fromJSON(doc)
	case kindPlatformLists:
		var doc any
		dec := json.NewDecoder(strings.NewReader(s))
		if err := dec.Decode(&doc); err != nil {
			return nil, &Error{Key: k.key, Msg: fmt.Sprintf(`must be a JSON object such as {"ios":["26.4"],"android":["37"]}, got %q`, s)}
		}
		return k.fromJSON(doc)
	case kindList:
		items := []any{}
		if strings.HasPrefix(strings.TrimSpace(s), "[") {
			if err := json.Unmarshal([]byte(s), &items); err != nil {
				return nil, &Error{Key: k.key, Msg: fmt.Sprintf("must be a JSON list or comma-separated words, got %q", s)}
			}
		} else {
			for _, p := range strings.Split(s, ",") {
				if p = strings.TrimSpace(p); p != "" {
					items = append(items, p)
				}
			}
		}
		return k.fromJSON(items)
	}
	return nil, &Error{Key: k.key, Msg: "unsupported"}
}
