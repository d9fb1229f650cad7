package queueing

import (
	"testing"

	"github.com/aicdb/aicdb/engine"
)

// TestRulesForRegistered checks that every registered backend has scheduling
// rules (noRules would leave its sims deadlocked on errNoProgress).
func TestRulesForRegistered(t *testing.T) {
	for _, b := range engine.Backends() {
		if _, none := rulesFor(b).(noRules); none {
			t.Errorf("backend %s: no queueing scheduling rules", b)
		}
	}
	if _, none := rulesFor("tgi").(noRules); !none {
		t.Errorf("unregistered backend tgi: got rules, want noRules")
	}
}
