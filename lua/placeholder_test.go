package lua

import "testing"

func TestUnknownScriptPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Script of an unknown name did not panic")
		}
	}()
	Script("no-such-script.lua")
}
