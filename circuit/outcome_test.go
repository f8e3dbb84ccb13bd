package circuit

import (
	"testing"

	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		class registryclient.Class
		want  Outcome
	}{
		{registryclient.Registered, Success},
		{registryclient.Replayed, Success},
		{registryclient.Transient, Failure},
		{registryclient.Permanent, Answered},
		{registryclient.RateLimited, Answered},
		{registryclient.Misconfigured, Refused},
	} {
		if got := OutcomeOf(tc.class); got != tc.want {
			t.Errorf("OutcomeOf(%s) = %s, want %s", tc.class, got, tc.want)
		}
	}
}
