package contract

import (
	"strconv"
	"unicode/utf8"
)

// The encoders below write the records a full status carries by the
// thousand (devices and leases) without reflection: a status of 10,000
// leases is megabytes, and encoding/json would spend most of the call on
// it. They write what json.Marshal writes for the same value, byte for
// byte; a test holds them to it.

// AppendJSON appends d as JSON.
func (d Device) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, d.ID)
	b = append(b, `,"driverDeviceId":`...)
	b = appendJSONString(b, d.DriverDeviceID)
	b = append(b, `,"driver":`...)
	b = appendJSONString(b, d.Driver)
	b = append(b, `,"spec":{"platform":`...)
	b = appendJSONString(b, string(d.Spec.Platform))
	b = append(b, `,"model":`...)
	b = appendJSONString(b, d.Spec.Model)
	b = append(b, `,"osVersion":`...)
	b = appendJSONString(b, d.Spec.OSVersion)
	if d.Spec.ImageTag != "" {
		b = append(b, `,"imageTag":`...)
		b = appendJSONString(b, d.Spec.ImageTag)
	}
	if d.Spec.Mode != "" {
		b = append(b, `,"mode":`...)
		b = appendJSONString(b, string(d.Spec.Mode))
	}
	b = append(b, `},"state":`...)
	b = appendJSONString(b, string(d.State))
	if d.Address != "" {
		b = append(b, `,"address":`...)
		b = appendJSONString(b, d.Address)
	}
	if d.LeaseID != "" {
		b = append(b, `,"leaseId":`...)
		b = appendJSONString(b, d.LeaseID)
	}
	if d.LeaseKey != "" {
		b = append(b, `,"leaseKey":`...)
		b = appendJSONString(b, d.LeaseKey)
	}
	b = append(b, `,"createdAt":`...)
	b = strconv.AppendInt(b, d.CreatedAt, 10)
	b = append(b, `,"stateSince":`...)
	b = strconv.AppendInt(b, d.StateSince, 10)
	if d.LastUsedAt != 0 {
		b = append(b, `,"lastUsedAt":`...)
		b = strconv.AppendInt(b, d.LastUsedAt, 10)
	}
	if d.Slimmed {
		b = append(b, `,"slimmed":true`...)
	}
	if d.TransitionAgeMs != 0 {
		b = append(b, `,"transitionAgeMs":`...)
		b = strconv.AppendInt(b, d.TransitionAgeMs, 10)
	}
	if d.Stalled {
		b = append(b, `,"stalled":true`...)
	}
	if d.WorkerID != "" {
		b = append(b, `,"workerId":`...)
		b = appendJSONString(b, d.WorkerID)
	}
	return append(b, '}')
}

// AppendJSON appends l as JSON.
func (l LeaseRecord) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, l.ID)
	if l.Key != "" {
		b = append(b, `,"key":`...)
		b = appendJSONString(b, l.Key)
	}
	b = append(b, `,"deviceId":`...)
	b = appendJSONString(b, l.DeviceID)
	b = append(b, `,"requesterId":`...)
	b = appendJSONString(b, l.RequesterID)
	b = append(b, `,"ownerId":`...)
	b = appendJSONString(b, l.OwnerID)
	b = append(b, `,"grantedAt":`...)
	b = strconv.AppendInt(b, l.GrantedAt, 10)
	b = append(b, `,"ttlMs":`...)
	b = strconv.AppendInt(b, l.TTLMs, 10)
	b = append(b, `,"lastRenewedAt":`...)
	b = strconv.AppendInt(b, l.LastRenewedAt, 10)
	b = append(b, `,"ttlDeadline":`...)
	b = strconv.AppendInt(b, l.TTLDeadline, 10)
	if l.BoundPID != 0 {
		b = append(b, `,"boundPid":`...)
		b = strconv.AppendInt(b, int64(l.BoundPID), 10)
	}
	if l.IDChosenByRequester {
		b = append(b, `,"idChosenByRequester":true`...)
	}
	if l.WorkerID != "" {
		b = append(b, `,"workerId":`...)
		b = appendJSONString(b, l.WorkerID)
	}
	if l.Worker != nil {
		b = append(b, `,"worker":{"id":`...)
		b = appendJSONString(b, l.Worker.ID)
		b = append(b, `,"label":`...)
		b = appendJSONString(b, l.Worker.Label)
		b = append(b, '}')
	}
	if l.Unreachable {
		b = append(b, `,"unreachable":true`...)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes it: HTML
// characters, control characters, U+2028 and U+2029 escaped, and invalid
// UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
