package stream

// contract002 sends the events as they are (contract 002): each frame's
// SSE message, or its JSON alone over a WebSocket. Its messages are valid
// until the next call: the transport has written them by then.
type contract002 struct{ buf [1]Message }

// Contract002 returns the encoder of contract 002's events, the log as it
// is: one message per event, named by its type, with its sequence as id.
func Contract002() Encoder { return &contract002{} }

func (f *contract002) Encode(fr Frame) ([]Message, error) {
	f.buf[0] = Message{ID: fr.Seq, Name: fr.Name, Data: fr.Data, SSE: fr.SSE}
	return f.buf[:], nil
}
