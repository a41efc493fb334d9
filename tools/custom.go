package tools

// Custom returns the operator's own tools; Default registers them next to
// the built-ins. This is the extension point for adding a tool:
//
//  1. Implement Tool: a Key of 1 to 64 characters of [a-z0-9_] (not a
//     built-in's key, nor "delegate"), a Description that tells the model
//     what the tool does and when to use it, a Parameters JSON schema of
//     type object, and a Run that is safe for concurrent use. For a small
//     tool, Func builds one from its parts, and DecodeArguments decodes the
//     arguments strictly. Return Retryable(err) for transient failures
//     (an upstream 5xx, a timeout) so the call is retried; any other error
//     becomes the result the model sees, so make it say what to fix.
//  2. Append it to the slice below.
//
// The key is then usable in the "tools" of hierarchy agents and sub-agent
// definitions; requests naming unregistered keys are refused. The worker
// refuses to start if a tool here is invalid (bad key, duplicate key, no
// description, parameters that are not an object schema).
//
// A tiny example (not registered):
//
//	var echo = tools.Func("echo", "Repeats the given text back verbatim.",
//		json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"the text to repeat"}},"required":["text"],"additionalProperties":false}`),
//		func(ctx context.Context, arguments json.RawMessage) (string, error) {
//			var args struct {
//				Text string `json:"text"`
//			}
//			if err := tools.DecodeArguments(arguments, &args); err != nil {
//				return "", err
//			}
//			return args.Text, nil
//		})
//
// and then: return []Tool{echo}.
func Custom() []Tool {
	return []Tool{
		// add your tools here
	}
}
