package feedbacktest

import (
	"strings"
	"testing"

	"github.com/throttlekit/throttle/internal/fleettest"
)

// TestPairedGates: a run is judged against its paired control (see
// matrix.control) on what the machine spoils alike for both, use,
// rejections and failed calls, and on the pause's own gates as they are.
func TestPairedGates(t *testing.T) {
	steadyCell := cell{fleet: fleet8x16, window: sliding1s, shape: fleettest.ShapeXRLUnixCeil, scenario: steady, rate: defaultRate}
	pauseCell := steadyCell
	pauseCell.scenario = pause
	ctl := figures{used: 0.80, rejected: 2}
	for _, tc := range []struct {
		name string
		c    cell
		on   figures
		want []string // gate names, in order
	}{
		{"as good as the control", steadyCell, figures{used: 0.795, rejected: 2}, nil},
		{"less use than the control", steadyCell, figures{used: 0.78}, []string{"paired use"}},
		{"more rejections", steadyCell, figures{used: 0.81, rejected: 3}, []string{"paired rejections"}},
		{"failed calls", steadyCell, figures{used: 0.81, failed: 1}, []string{"paired failed calls"}},
		{"a pause's rejections are not compared", pauseCell, figures{used: 0.80, rejected: 40}, nil},
		{"arrivals in a pause excuse nothing", pauseCell, figures{used: 0.80, inPause: 1}, []string{"in pause"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pairedGates(tc.c, tc.on, ctl)
			var names []string
			if len(got) > 0 {
				names = strings.Split(gateNames(got), ", ")
			}
			if strings.Join(names, ";") != strings.Join(tc.want, ";") {
				t.Errorf("pairedGates = %q, want gates %q", got, tc.want)
			}
		})
	}
}
