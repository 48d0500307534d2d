package demo_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/demo"
)

// BenchmarkProvisionAt measures a Provision, state file included, in worlds
// that already hold 10 and 10,000 devices. The times are zero, so what is
// measured is the driver's own work: a cost that grew with the world would
// show as a slower second sub-benchmark.
func BenchmarkProvisionAt(b *testing.B) {
	for _, existing := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("devices=%d", existing), func(b *testing.B) {
			d, err := demo.New(demo.Options{Platform: contract.PlatformIOS, StateFile: filepath.Join(b.TempDir(), "world")})
			if err != nil {
				b.Fatal(err)
			}
			spec := someSpec(contract.PlatformIOS)
			for range existing {
				if _, err := d.Provision(b.Context(), spec); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, err := d.Provision(b.Context(), spec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRebootAt measures booting and shutting down one device, three
// changes to the state file, in worlds of 10 and 10,000 devices. Unlike
// provisions, which grow the world as fast as the journal, these changes
// fill the journal, so its compactions are part of the cost once enough
// iterations run (a third of max(1024, 2 × devices)).
func BenchmarkRebootAt(b *testing.B) {
	for _, existing := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("devices=%d", existing), func(b *testing.B) {
			d, err := demo.New(demo.Options{Platform: contract.PlatformIOS, StateFile: filepath.Join(b.TempDir(), "world")})
			if err != nil {
				b.Fatal(err)
			}
			spec := someSpec(contract.PlatformIOS)
			var dev driver.Device
			for range existing {
				if dev, err = d.Provision(b.Context(), spec); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, err := d.MakeReady(b.Context(), dev); err != nil {
					b.Fatal(err)
				}
				if err := d.Shutdown(b.Context(), dev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
