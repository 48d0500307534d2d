package gateway

import (
	"errors"
	"strings"
	"testing"

	"github.com/simlock/simlock/internal/contract"
)

func TestAFailedCallOverALostUplinkIsConnectionLostNotItsCode(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		want     string
		wantCode contract.Code
	}{
		{"the connection lost", contract.Errorf(contract.CodeDaemonConnectionLost, "connection closed"), "connection lost", contract.CodeDaemonConnectionLost},
		{"wrapped", errors.Join(errors.New("read"), contract.Errorf(contract.CodeDaemonConnectionLost, "connection closed")), "connection lost", contract.CodeDaemonConnectionLost},
		{"the worker's refusal", contract.Errorf(contract.CodeForbidden, "no"), "status.get failed: FORBIDDEN: no", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := callFailed(nil, "status.get", tt.err)
			if got != tt.want || reasonCode(got) != tt.wantCode {
				t.Errorf("callFailed = %q (code %q), want %q (code %q)", got, reasonCode(got), tt.want, tt.wantCode)
			}
			if strings.Contains(got, "DAEMON_CONNECTION_LOST") {
				t.Errorf("reason %q shows the code", got)
			}
		})
	}
	if reasonCode(reasonStopped) != contract.CodeDaemonStopping {
		t.Errorf("stopped's code = %q", reasonCode(reasonStopped))
	}
}
