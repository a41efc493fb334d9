package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/parser"
)

// KeyCalculator is the key of the calculator tool.
const KeyCalculator = "calculator"

// MaxExpressionLength bounds a calculator expression, in bytes: arithmetic
// a model needs fits easily, and the bound keeps parse trees small.
const MaxExpressionLength = 500

// Calculator is the calculator tool: exact-enough arithmetic for models,
// which are unreliable at it.
//
// Expressions are evaluated by github.com/expr-lang/expr, but expr is a
// general language (strings, maps, closures, builtins, method calls on the
// environment), so it is fenced in three ways: the parsed tree is checked
// against an allowlist of node kinds, operators and functions before
// compiling; the environment is empty, with every builtin disabled (the
// constants are inlined); and every operator is routed to our own float64 functions
// (integer literals become floats first), so all arithmetic is float64 and
// every step can report division by zero or overflow instead of producing
// Inf, NaN or a silently wrapped integer.
func Calculator() Tool { return calculator{} }

type calculator struct{}

func (calculator) Key() string { return KeyCalculator }

func (calculator) Description() string {
	return "Evaluate an arithmetic expression exactly instead of doing the math yourself. " +
		"Supports numbers (e.g. 12, 3.5, 1e-3), + - * /, % (remainder), ** or ^ (power), parentheses, " +
		"the constants pi and e, and the functions " + strings.Join(calcFuncNames(), ", ") + ". " +
		"round(x, n) rounds to n decimal places; log is the natural logarithm; trigonometric functions use radians. " +
		`Returns JSON {"expression", "result"}.`
}

func (calculator) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"expression":{"type":"string","maxLength":` + strconv.Itoa(MaxExpressionLength) + `,` +
		`"description":"the arithmetic expression, e.g. \"(17.5 * 3 + 2^10) / sqrt(2)\""}` +
		`},"required":["expression"],"additionalProperties":false}`)
}

func (calculator) Run(_ context.Context, arguments json.RawMessage) (string, error) {
	var args struct {
		Expression *string `json:"expression"`
	}
	if err := DecodeArguments(arguments, &args); err != nil {
		return "", err
	}
	if args.Expression == nil {
		return "", errors.New(`invalid arguments: "expression" is required`)
	}
	result, err := Evaluate(*args.Expression)
	if err != nil {
		return "", err
	}
	return marshalResult(struct {
		Expression string  `json:"expression"`
		Result     float64 `json:"result"`
	}{*args.Expression, result})
}

// calcFunc is one function of the calculator.
type calcFunc struct {
	minArgs, maxArgs int // maxArgs -1: variadic
	fn               func(args []float64) (float64, error)
}

// calcConstants are the only identifiers an expression may use as values.
var calcConstants = map[string]float64{"pi": math.Pi, "e": math.E}

// calcFuncs are the only functions an expression may call. pi() and e()
// are accepted too because models write them that way as often as not.
var calcFuncs = map[string]calcFunc{
	"sqrt": {1, 1, func(a []float64) (float64, error) {
		if a[0] < 0 {
			return 0, calcErrorf("sqrt of a negative number (%v)", a[0])
		}
		return math.Sqrt(a[0]), nil
	}},
	"abs":   {1, 1, unary(math.Abs)},
	"floor": {1, 1, unary(math.Floor)},
	"ceil":  {1, 1, unary(math.Ceil)},
	"round": {1, 2, func(a []float64) (float64, error) {
		if len(a) == 1 {
			return math.Round(a[0]), nil
		}
		// Decimal places beyond 15 are below float64 precision anyway.
		n := a[1]
		if n != math.Trunc(n) || n < -15 || n > 15 {
			return 0, calcErrorf("round: decimal places must be a whole number from -15 to 15, not %v", n)
		}
		p := math.Pow(10, n)
		if r := math.Round(a[0]*p) / p; !math.IsInf(r, 0) && !math.IsNaN(r) {
			return r, nil
		}
		return a[0], nil // too large to have decimals to round
	}},
	"min": {1, -1, func(a []float64) (float64, error) { return slices.Min(a), nil }},
	"max": {1, -1, func(a []float64) (float64, error) { return slices.Max(a), nil }},
	"pow": {2, 2, func(a []float64) (float64, error) { return calcPow(a[0], a[1]) }},
	"log": {1, 1, func(a []float64) (float64, error) {
		if a[0] <= 0 {
			return 0, calcErrorf("log of a non-positive number (%v)", a[0])
		}
		return math.Log(a[0]), nil
	}},
	"log10": {1, 1, func(a []float64) (float64, error) {
		if a[0] <= 0 {
			return 0, calcErrorf("log10 of a non-positive number (%v)", a[0])
		}
		return math.Log10(a[0]), nil
	}},
	"exp": {1, 1, unary(math.Exp)},
	"sin": {1, 1, unary(math.Sin)},
	"cos": {1, 1, unary(math.Cos)},
	"tan": {1, 1, unary(math.Tan)},
	"pi":  {0, 0, nil}, // inlined by inlineNumbers
	"e":   {0, 0, nil},
}

// calcOperators maps the allowed binary operators to the functions that
// implement them. The names start with an underscore, and the allowlist
// check runs before the operators are rewritten into calls, so an
// expression cannot call them by name.
var calcOperators = map[string]string{
	"+": "_add", "-": "_sub", "*": "_mul", "/": "_div", "%": "_mod", "**": "_pow", "^": "_pow",
}

var calcOperatorFuncs = map[string]func(a, b float64) (float64, error){
	"_add": func(a, b float64) (float64, error) { return a + b, nil },
	"_sub": func(a, b float64) (float64, error) { return a - b, nil },
	"_mul": func(a, b float64) (float64, error) { return a * b, nil },
	"_div": func(a, b float64) (float64, error) {
		if b == 0 {
			return 0, calcErrorf("division by zero")
		}
		return a / b, nil
	},
	"_mod": func(a, b float64) (float64, error) {
		if b == 0 {
			return 0, calcErrorf("division by zero (remainder of %v %% 0)", a)
		}
		return math.Mod(a, b), nil
	},
	"_pow": calcPow,
}

func unary(f func(float64) float64) func([]float64) (float64, error) {
	return func(a []float64) (float64, error) { return f(a[0]), nil }
}

func calcPow(a, b float64) (float64, error) {
	if a == 0 && b < 0 {
		return 0, calcErrorf("division by zero (0 to a negative power)")
	}
	if a < 0 && b != math.Trunc(b) {
		return 0, calcErrorf("pow(%v, %v) is not a real number: a negative number to a fractional power", a, b)
	}
	return math.Pow(a, b), nil
}

func calcFuncNames() []string {
	var names []string
	for name := range calcFuncs {
		if _, constant := calcConstants[name]; !constant {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// calcError is an evaluation error whose message is meant for the model.
type calcError struct{ msg string }

func (e *calcError) Error() string { return e.msg }

func calcErrorf(format string, args ...any) error {
	return &calcError{msg: fmt.Sprintf(format, args...)}
}

// finite turns Inf and NaN into an error, so overflow is reported where it
// happens instead of leaking through later steps (1/(10**400) would be 0).
func finite(name string, v float64) (float64, error) {
	if math.IsInf(v, 0) {
		return 0, calcErrorf("%s overflowed: the result is too large for a 64-bit float", name)
	}
	if math.IsNaN(v) {
		return 0, calcErrorf("%s is undefined (not a number)", name)
	}
	return v, nil
}

// calcOptions are the compile options: an empty environment, no builtins (len, upper, split, now, …), the allowed functions and
// the operators, all typed float64.
var calcOptions = func() []expr.Option {
	opts := []expr.Option{
		expr.Env(map[string]any{}),
		expr.DisableAllBuiltins(),
		expr.AsFloat64(),
		expr.Optimize(false),
		expr.MaxNodes(2 * MaxExpressionLength),
		expr.Patch(inlineNumbers{}),
	}
	float := reflect.TypeFor[float64]()
	for name, f := range calcFuncs {
		if _, constant := calcConstants[name]; constant {
			continue // inlined
		}
		var types []any
		for n := f.minArgs; n <= max(f.maxArgs, f.minArgs); n++ {
			types = append(types, funcType(slices.Repeat([]reflect.Type{float}, n), false))
		}
		if f.maxArgs < 0 {
			types = []any{funcType([]reflect.Type{reflect.SliceOf(float)}, true)}
		}
		opts = append(opts, expr.Function(name, wrapCalcFunc(name, f.fn), types...))
	}
	for name, f := range calcOperatorFuncs {
		opts = append(opts, expr.Function(name, wrapCalcFunc(name, func(a []float64) (float64, error) {
			return f(a[0], a[1])
		}), funcType([]reflect.Type{float, float}, false)))
	}
	for op, name := range calcOperators {
		opts = append(opts, expr.Operator(op, name))
	}
	return opts
}()

// funcType is a value whose type is func(in...) float64, which is how
// expr.Function takes a signature.
func funcType(in []reflect.Type, variadic bool) any {
	return reflect.New(reflect.FuncOf(in, []reflect.Type{reflect.TypeFor[float64]()}, variadic)).Interface()
}

// wrapCalcFunc adapts a float64 function to expr's calling convention and
// checks that its result is finite.
func wrapCalcFunc(name string, fn func([]float64) (float64, error)) func(params ...any) (any, error) {
	label := name + "()"
	if op := operatorOf(name); op != "" {
		label = "the " + op + " operation"
	}
	return func(params ...any) (any, error) {
		args := make([]float64, len(params))
		for i, p := range params {
			v, ok := p.(float64)
			if !ok {
				return nil, calcErrorf("%s: argument %d is not a number", label, i+1)
			}
			args[i] = v
		}
		v, err := fn(args)
		if err != nil {
			return nil, err
		}
		return finite(label, v)
	}
}

func operatorOf(name string) string {
	for op, n := range calcOperators {
		if n == name && op != "^" {
			return op
		}
	}
	return ""
}

// inlineNumbers rewrites integer literals as floats, so expr never does
// integer arithmetic (which wraps around on overflow and only allows % on
// integers) and every operand has the type the operator functions take.
// It also replaces the constants (pi, e, pi(), e()) by their values, so the
// environment can be empty. The tree has passed checkCalcNode, so a call
// whose callee became a number can only be pi() or e().
type inlineNumbers struct{}

func (inlineNumbers) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IntegerNode:
		ast.Patch(node, &ast.FloatNode{Value: float64(n.Value)})
	case *ast.IdentifierNode:
		if v, ok := calcConstants[n.Value]; ok {
			ast.Patch(node, &ast.FloatNode{Value: v})
		}
	case *ast.CallNode:
		if c, ok := n.Callee.(*ast.FloatNode); ok && len(n.Arguments) == 0 {
			ast.Patch(node, &ast.FloatNode{Value: c.Value})
		}
	}
}

// parseConfig makes the parser treat builtin names (abs, min, max, round,
// …) as ordinary calls, which the allowlist then judges, instead of as
// builtin nodes.
var parseConfig = func() *conf.Config {
	c := conf.CreateNew()
	expr.DisableAllBuiltins()(c)
	return c
}()

// Evaluate evaluates an arithmetic expression as the calculator tool does.
func Evaluate(expression string) (float64, error) {
	if strings.TrimSpace(expression) == "" {
		return 0, errors.New("the expression is empty")
	}
	if len(expression) > MaxExpressionLength {
		return 0, fmt.Errorf("the expression is %d bytes long; the limit is %d", len(expression), MaxExpressionLength)
	}
	if !utf8.ValidString(expression) {
		return 0, errors.New("the expression is not valid UTF-8")
	}
	tree, err := parser.ParseWithConfig(expression, parseConfig)
	if err != nil {
		return 0, fmt.Errorf("syntax error: %v", err)
	}
	if err := checkCalcNode(tree.Node); err != nil {
		return 0, err
	}
	program, err := expr.Compile(expression, calcOptions...)
	if err != nil {
		return 0, fmt.Errorf("invalid expression: %w", cleanCalcError(err))
	}
	out, err := expr.Run(program, nil)
	if err != nil {
		return 0, cleanCalcError(err)
	}
	v, ok := out.(float64)
	if !ok { // AsFloat64 should make this impossible; refuse rather than guess
		return 0, fmt.Errorf("the expression did not evaluate to a number")
	}
	return finite("the result", v)
}

// cleanCalcError returns our own evaluation error without expr's position
// decoration when there is one.
func cleanCalcError(err error) error {
	var ce *calcError
	if errors.As(err, &ce) {
		return ce
	}
	return err
}

// allowedHelp ends every refusal, so the model learns what it can write.
func allowedHelp() string {
	return "use numbers, + - * / % ** ^, parentheses, the constants pi and e and the functions " +
		strings.Join(calcFuncNames(), ", ")
}

// checkCalcNode accepts only number literals, the constants, the allowed
// unary and binary operators and calls of the allowed functions by name.
// Everything else expr can express (strings, booleans, member access such
// as os.Exit, arrays, maps, closures, conditionals, pipes, variables) is
// refused before compiling.
func checkCalcNode(node ast.Node) error {
	switch n := node.(type) {
	case *ast.IntegerNode, *ast.FloatNode:
		return nil
	case *ast.IdentifierNode:
		if _, ok := calcConstants[n.Value]; ok {
			return nil
		}
		if _, ok := calcFuncs[n.Value]; ok {
			return fmt.Errorf("%s is a function: call it as %s(...)", n.Value, n.Value)
		}
		return fmt.Errorf("unknown name %q: %s", n.Value, allowedHelp())
	case *ast.UnaryNode:
		if n.Operator != "-" && n.Operator != "+" {
			return fmt.Errorf("operator %q is not allowed: %s", n.Operator, allowedHelp())
		}
		return checkCalcNode(n.Node)
	case *ast.BinaryNode:
		if _, ok := calcOperators[n.Operator]; !ok {
			return fmt.Errorf("operator %q is not allowed: %s", n.Operator, allowedHelp())
		}
		if err := checkCalcNode(n.Left); err != nil {
			return err
		}
		return checkCalcNode(n.Right)
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok {
			return fmt.Errorf("calling %s is not allowed: %s", n.Callee, allowedHelp())
		}
		f, ok := calcFuncs[id.Value]
		if !ok {
			return fmt.Errorf("unknown function %q: %s", id.Value, allowedHelp())
		}
		if len(n.Arguments) < f.minArgs || (f.maxArgs >= 0 && len(n.Arguments) > f.maxArgs) {
			return fmt.Errorf("%s() takes %s, not %d", id.Value, arity(f), len(n.Arguments))
		}
		for _, a := range n.Arguments {
			if err := checkCalcNode(a); err != nil {
				return err
			}
		}
		return nil
	case *ast.StringNode:
		return fmt.Errorf("text such as %s is not allowed: the calculator works on numbers only", n)
	case *ast.BoolNode, *ast.NilNode:
		return fmt.Errorf("%s is not allowed: the calculator works on numbers only", n)
	default:
		return fmt.Errorf("%s is not allowed: %s", node, allowedHelp())
	}
}

func arity(f calcFunc) string {
	switch {
	case f.maxArgs < 0:
		return fmt.Sprintf("at least %d argument(s)", f.minArgs)
	case f.minArgs == f.maxArgs && f.minArgs == 0:
		return "no arguments"
	case f.minArgs == f.maxArgs:
		return fmt.Sprintf("%d argument(s)", f.minArgs)
	default:
		return fmt.Sprintf("%d to %d arguments", f.minArgs, f.maxArgs)
	}
}
