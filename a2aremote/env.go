package a2aremote

import (
	"encoding/json"
	"os"
)

func lookupEnv(k string) (string, bool) { return os.LookupEnv(k) }

func jsonText(v any) (string, error) {
	raw, err := json.Marshal(v)
	return string(raw), err
}
