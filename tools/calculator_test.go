package tools

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestEvaluate(t *testing.T) {
	cases := []struct {
		expr string
		want float64
	}{
		{"1 + 2 * 3", 7},
		{"(1 + 2) * 3", 9},
		{"10 - 4 - 3", 3},
		{"2 ** 10", 1024},
		{"2 ^ 10", 1024},
		{"2 ^ 3 ^ 2", 512}, // right-associative
		{"-2 ** 2", -4},    // power binds tighter than unary minus
		{"7 / 2", 3.5},     // no integer division
		{"7 % 3", 1},
		{"5.5 % 2", 1.5},
		{"-7 % 3", -1},
		{"1e3 + 0.5", 1000.5},
		{"+3", 3},
		{"sqrt(16) + abs(-2)", 6},
		{"floor(-1.5) + ceil(1.2)", 0},
		{"round(2.5)", 3},
		{"round(3.14159, 2)", 3.14},
		{"round(1234, -2)", 1200},
		{"min(3, 1, 2) + max(4, 9)", 10},
		{"pow(2, 0.5)", math.Sqrt2},
		{"log(e)", 1},
		{"log10(1000)", 3},
		{"exp(0)", 1},
		{"sin(pi / 2) + cos(0) + tan(0)", 2},
		{"2 * pi", 2 * math.Pi},
		{"pi()", math.Pi},
		{"9223372036854775807 + 1", 9223372036854775808}, // float math, no wrap-around
		{"2 ** -1", 0.5},
		{"((((1))))", 1},
	}
	for _, tc := range cases {
		got, err := Evaluate(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if math.Abs(got-tc.want) > 1e-12*math.Max(1, math.Abs(tc.want)) {
			t.Errorf("%s = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestEvaluateErrors(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"", "empty"},
		{"1 +", "syntax error"},
		{"(1 + 2", "syntax error"},
		{"1 / 0", "division by zero"},
		{"1 / (2 - 2)", "division by zero"},
		{"5 % 0", "division by zero"},
		{"0 ** -1", "division by zero"},
		{"sqrt(-1)", "sqrt of a negative number"},
		{"log(0)", "log of a non-positive number"},
		{"(-8) ** (1/3)", "not a real number"},
		{"10 ** 400", "overflowed"},
		{"1e308 * 10", "overflowed"},
		{"1 / (10 ** 400)", "overflowed"}, // caught where it happens, not hidden as 0
		{"exp(1000)", "exp() overflowed"},
		{"round(1.5, 0.5)", "decimal places"},
		{"sqrt(1, 2)", "sqrt() takes 1 argument(s), not 2"},
		{"min()", "at least 1"},
		{"pi(1)", "no arguments"},
		{"sqrt", "sqrt is a function"},
		// Nothing but arithmetic is reachable.
		{"os.Exit(1)", "not allowed"},
		{"Exit(1)", `unknown function "Exit"`},
		{`"abc"`, "numbers only"},
		{`"a" + "b"`, "numbers only"},
		{`len("abc")`, `unknown function "len"`},
		{`upper("x")`, `unknown function "upper"`},
		{"now()", `unknown function "now"`},
		{"env", `unknown name "env"`},
		{"$env", `unknown name "$env"`},
		{"x + 1", `unknown name "x"`},
		{"_add(1, 2)", `unknown function "_add"`},
		{"true", "numbers only"},
		{"nil", "numbers only"},
		{"1 == 1", `operator "=="`},
		{"1 < 2", `operator "<"`},
		{"1 and 2", `operator "and"`},
		{"1 ?? 2", `operator "??"`},
		{"!1", `operator "!"`},
		{"1..3", `operator ".."`},
		{"[1, 2]", "not allowed"},
		{"{a: 1}", "not allowed"},
		{"1 > 0 ? 1 : 2", "not allowed"},
		{"let x = 1; x", "not allowed"},
		{"map([1], # * 2)", "not allowed"},
		{"sqrt(16).String()", "not allowed"},
		{strings.Repeat("1+", 250) + "1", "the limit is 500"},
	}
	for _, tc := range cases {
		_, err := Evaluate(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tc.expr, err, tc.want)
		}
		if IsRetryable(err) {
			t.Errorf("%q: calculator errors must not be retryable", tc.expr)
		}
	}
}

func TestCalculatorTool(t *testing.T) {
	ctx := context.Background()
	got, err := Calculator().Run(ctx, json.RawMessage(`{"expression":"(2 + 3) * 4 / 8"}`))
	if err != nil || got != `{"expression":"(2 + 3) * 4 / 8","result":2.5}` {
		t.Fatalf("Run = %s, %v", got, err)
	}
	if _, err := Calculator().Run(ctx, json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), `"expression" is required`) {
		t.Fatalf("missing expression: %v", err)
	}
	if _, err := Calculator().Run(ctx, json.RawMessage(`{"expression":"1", "mode":"x"}`)); err == nil {
		t.Fatal("unknown argument accepted")
	}
	if d := Calculator().Description(); !strings.Contains(d, "sqrt") || !strings.Contains(d, "pi") {
		t.Fatalf("description lacks the functions: %s", d)
	}
}
