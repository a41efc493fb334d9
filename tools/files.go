package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"strings"
)

// File is a file a tool returns with its result: an MCP tool's embedded
// resource, a chart, a report. The activity that ran the tool stores it as
// an artifact of the run (its bytes never enter the workflow's history) and
// tells the model its name and id in place of the bytes.
type File struct {
	// Name is the file's name (a label, never a path: directories are
	// dropped).
	Name string
	// MediaType is its media type; empty guesses it from Name's extension
	// (application/octet-stream when that says nothing).
	MediaType string
	Data      []byte
}

// Result is a tool call's answer with the files it returned.
type Result struct {
	// Content is the text for the model.
	Content string
	Files   []File
}

// FileTool is a Tool whose calls can return files. The registry calls
// RunFiles instead of Run for it; Run remains for callers that only want
// text.
type FileTool interface {
	Tool
	RunFiles(ctx context.Context, arguments json.RawMessage) (Result, error)
}

// MediaTypeOf is f's media type: the one it declares, or the one its
// name's extension implies, or application/octet-stream.
func MediaTypeOf(name, declared string) string {
	if declared = strings.TrimSpace(declared); declared != "" {
		if _, _, err := mime.ParseMediaType(declared); err == nil {
			return declared
		}
	}
	switch strings.ToLower(path.Ext(name)) {
	// Those the standard table lacks or gets wrong on some systems.
	case ".md", ".markdown":
		return "text/markdown; charset=utf-8"
	case ".csv":
		return "text/csv; charset=utf-8"
	case ".json":
		return "application/json"
	case ".txt", ".log":
		return "text/plain; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// SaveFile is the built-in save_file tool: the model hands over a text
// file (a report, a CSV, code) to be kept as an artifact of the run,
// listed on its results and downloadable, instead of pasting it into its
// answer. It is the built-in user of the FileTool hook.
func SaveFile() Tool { return saveFileTool{} }

// KeySaveFile is save_file's registry key.
const KeySaveFile = "save_file"

type saveFileTool struct{}

func (saveFileTool) Key() string { return KeySaveFile }
func (saveFileTool) Description() string {
	return "Save a text file (a report, a table as CSV, code) as a downloadable artifact of this run. " +
		"Give the file name with its extension and the whole content; the answer names the stored file."
}
func (saveFileTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","description":"the file name with its extension, e.g. report.md"},` +
		`"content":{"type":"string","description":"the whole content of the file"},` +
		`"media_type":{"type":"string","description":"optional media type; guessed from the extension when absent"}},` +
		`"required":["name","content"],"additionalProperties":false}`)
}

func (t saveFileTool) Run(ctx context.Context, arguments json.RawMessage) (string, error) {
	r, err := t.RunFiles(ctx, arguments)
	return r.Content, err
}

func (saveFileTool) RunFiles(_ context.Context, arguments json.RawMessage) (Result, error) {
	var in struct {
		Name      string `json:"name"`
		Content   string `json:"content"`
		MediaType string `json:"media_type"`
	}
	if err := DecodeArguments(arguments, &in); err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(in.Name) == "" {
		return Result{}, fmt.Errorf("invalid arguments: name is required")
	}
	content, err := marshalResult(map[string]any{"saved": in.Name, "size": len(in.Content)})
	if err != nil {
		return Result{}, err
	}
	return Result{Content: content, Files: []File{{Name: in.Name, MediaType: MediaTypeOf(in.Name, in.MediaType), Data: []byte(in.Content)}}}, nil
}
