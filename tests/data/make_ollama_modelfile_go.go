// Records what Go's standard library does with the values a Modelfile puts in an Ollama model, for
// weightkit's ports (src/weightkit/ollama/modelfile.py, go_template.py):
//   - params: a PARAMETER's text as api.FormatParams parses it (strconv), the client's json.Marshal of the
//     typed value, the server's re-encoding after decoding it as a float64, and fmt's %v of that float64
//     (what `ollama show --modelfile` prints);
//   - layers: the params layer of a Modelfile's typed PARAMETERs (the server's, after JSON to it and back,
//     and x/create's, encoded as typed), the messages layer ([]api.Message) and the config (ConfigV2) of a
//     GGUF model with RENDERER, PARSER and REQUIRES, each as json.Encoder writes it;
//   - templates: text/template's verdict (nil or the error text) on a corpus (written ones, then random
//     strings of template tokens from a fixed seed), parsed as Ollama's
//     template.Parse does (missingkey=zero, its function names, then its Vars walk, restated here), and Ollama's
//     "template error: " prefix.
// Output: ollama_modelfile_go.json, which tests/ollama/test_modelfile.py reads.
//
// Run from tests/data: GO111MODULE=off go run make_ollama_modelfile_go.go > ollama_modelfile_go.json
package main

import (
	"bytes"
	"errors"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"strconv"
	"text/template"
	"text/template/parse"
)

type paramCase struct {
	Kind   string `json:"kind"`
	Text   string `json:"text"`
	Error  string `json:"error,omitempty"`
	Client string `json:"client,omitempty"`
	Server string `json:"server,omitempty"`
	Show   string `json:"show,omitempty"`
}

// api.Message's encoded fields.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// types/model.ConfigV2's fields at the commit docs/formats.md names (draft and the remote fields omitted:
// omitempty, unset here).
type configV2 struct {
	ModelFormat   string   `json:"model_format"`
	ModelFamily   string   `json:"model_family"`
	ModelFamilies []string `json:"model_families"`
	ModelType     string   `json:"model_type"`
	FileType      string   `json:"file_type"`
	Renderer      string   `json:"renderer,omitempty"`
	Parser        string   `json:"parser,omitempty"`
	Requires      string   `json:"requires,omitempty"`
	Capabilities  []string `json:"capabilities,omitempty"`
	Architecture  string   `json:"architecture"`
	OS            string   `json:"os"`
}

type templateCase struct {
	Template string `json:"template"`
	Error    string `json:"error"`
}

func encode(v any) (string, error) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func param(kind, text string) paramCase {
	c := paramCase{Kind: kind, Text: text}
	var v any
	switch kind {
	case "int":
		i, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			c.Error = fmt.Sprintf("invalid int value %s", []string{text})
			return c
		}
		v = i
	case "float":
		f, err := strconv.ParseFloat(text, 32)
		if err != nil {
			c.Error = fmt.Sprintf("invalid float value %s", []string{text})
			return c
		}
		v = float32(f)
	case "bool":
		b, err := strconv.ParseBool(text)
		if err != nil {
			c.Error = fmt.Sprintf("invalid bool value %s", []string{text})
			return c
		}
		v = b
	}
	client, err := encode(map[string]any{"p": v})
	if err != nil {
		c.Error = err.Error()
		return c
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(client), &back); err != nil {
		c.Error = err.Error()
		return c
	}
	server, _ := encode(back)
	c.Client, c.Server, c.Show = client, server, fmt.Sprintf("%v", back["p"])
	return c
}

func main() {
	var params []paramCase
	for _, t := range []string{"0", "42", "-1", "+7", "4096", "1000000", "123456", "1234567", "9007199254740993",
		"9223372036854775807", "9223372036854775808", "1.5", "0x10", "1_000", " 5", ""} {
		params = append(params, param("int", t))
	}
	for _, t := range []string{"0.7", "0.1", "1", "1.0", "-0.5", "1e-7", "0.0001", "0.00001", "3.4e38", "3.5e38",
		"1e21", "123456789", "1e6", "0.3333333333", "inf", "NaN", "0x1p-2", ".5", "5.", "1e", "abc", "1_0", "+2.5"} {
		params = append(params, param("float", t))
	}
	for _, t := range []string{"true", "True", "TRUE", "t", "1", "false", "F", "0", "yes", "tRUE"} {
		params = append(params, param("bool", t))
	}

	stub := func(args ...any) string { return "" }
	funcs := template.FuncMap{"json": stub, "currentDate": stub, "yesterdayDate": stub, "toTypeScriptType": stub}
	var templates []templateCase
	rng := rand.New(rand.NewSource(29))
	for i := 0; i < 600; i++ {
		var b strings.Builder
		for n := 1 + rng.Intn(14); n > 0; n-- {
			b.WriteString(tokens[rng.Intn(len(tokens))])
		}
		corpus = append(corpus, b.String())
	}
	for _, t := range corpus {
		c := templateCase{Template: t}
		if tmpl, err := template.New("").Option("missingkey=zero").Funcs(funcs).Parse(t); err != nil {
			c.Error = "template error: " + err.Error()
		} else if err := vars(tmpl); err != nil {
			c.Error = "template error: " + err.Error()
		}
		templates = append(templates, c)
	}

	// PARAMETER temperature 0.7, num_ctx 4096, use_mmap false, stop "<|im_end|>", stop "</s>", top_p 0.95
	typed := map[string]any{"temperature": float32(0.7), "num_ctx": int64(4096), "use_mmap": false,
		"stop": []string{"<|im_end|>", "</s>"}, "top_p": float32(0.95), "seed": int64(9007199254740993)}
	xcreate, _ := encode(typed)
	var back map[string]any
	if err := json.Unmarshal([]byte(xcreate), &back); err != nil {
		panic(err)
	}
	server, _ := encode(back)
	messages, _ := encode([]message{{"system", "Be <brief> & \"exact\"\n"}, {"user", "héllo\u2028"}})
	config, _ := encode(configV2{ModelFormat: "gguf", ModelFamily: "llama", ModelFamilies: []string{"llama"},
		ModelType: "128", FileType: "F16", Renderer: "r<1>", Parser: "p", Requires: "0.12",
		Architecture: "amd64", OS: "linux"})
	layers := map[string]string{"params_server": server, "params_x_create": xcreate, "messages": messages,
		"config": config}

	out := map[string]any{"params": params, "templates": templates, "layers": layers}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}

// The templates: Ollama's own shapes, then one of each way to fail.
var corpus = []string{
	"{{ .Prompt }}",
	"",
	"plain text only",
	"{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{ end }}{{ if .Prompt }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n{{ .Response }}<|eot_id|>",
	"{{- range $i, $m := .Messages }}\n{{- $last := eq (len (slice $.Messages $i)) 1 -}}\n<|im_start|>{{ $m.Role }}\n{{ $m.Content }}{{ if not $last }}<|im_end|>\n{{ end }}\n{{- end }}",
	"{{- if .Tools }}{{ range .Tools }}{{ json . }}\n{{ end }}{{ end }}{{ .Prompt }}",
	"{{ range .Messages }}{{ if eq .Role \"user\" }}[INST] {{ .Content }}[/INST]{{ else if eq .Role \"assistant\" }}{{ .Content }}</s>{{ else }}{{ .Content }}{{ end }}{{ end }}",
	"{{/* a comment */}}{{ .Prompt }}",
	"{{- /* trimmed comment */ -}} {{ .Prompt }}",
	"{{ with .System }}{{ . }}{{ else }}none{{ end }}",
	"{{ range $k, $v := .Options }}{{ $k }}={{ $v }}{{ break }}{{ end }}",
	"{{ range .Messages }}{{ continue }}{{ end }}",
	"{{ define \"x\" }}hi{{ end }}{{ template \"x\" . }}",
	"{{ block \"b\" . }}{{ .Prompt }}{{ end }}",
	"{{ $x := 1 }}{{ $x = 2 }}{{ $x }}",
	"{{ printf \"%d %s\" 3 `raw` }}{{ 'a' }}{{ 0x1F }}{{ 1.5e3 }}{{ -2 }}{{ 1_000 }}{{ nil }}{{ true }}",
	"{{ (index .Messages 0).Content }}",
	"{{ currentDate }} {{ yesterdayDate }} {{ toTypeScriptType .X }}",
	"{{ .Prompt | printf \"%s\" | len }}",
	"{{ .Prompt",
	"{{ .Prompt }",
	"{{ if .System }}no end",
	"{{ end }}",
	"{{ else }}",
	"{{ if }}{{ end }}",
	"{{ range }}{{ end }}",
	"{{ foo }}",
	"{{ .Prompt | foo }}",
	"{{ $x }}",
	"{{ if .A }}{{ $y := 1 }}{{ end }}{{ $y }}",
	"{{ break }}",
	"{{ continue }}",
	"{{ range .M }}{{ else }}{{ break }}{{ end }}",
	"{{ \"unterminated }}",
	"{{ `raw unterminated }}",
	"{{ 'ab' }}",
	"{{ 1x }}",
	"{{ 08 }}",
	"{{ /* bad comment }}",
	"{{/* unclosed comment",
	"{{/* comment */ x }}",
	"{{ ( .A }}",
	"{{ .A ) }}",
	"{{ .A : .B }}",
	"{{ .A = .B }}",
	"{{ @ }}",
	"{{ .A | 1 }}",
	"{{ \"abc\".Field }}",
	"{{ if .A }}{{ else }}{{ else }}{{ end }}",
	"{{ define \"x\" }}{{ end }}{{ define \"y\" }}",
	"{{ template .Name }}",
	"{{ block }}{{ end }}",
	"{{ range $a, $b, $c := .X }}{{ end }}",
	"{{ with $a, $b := .X }}{{ end }}",
	"{{ \"\\q\" }}",
	"{{ .A.B.C }}{{ $.A }}{{ $ }}",
	"{{ if .A }}\n\n{{ .B\n}}",
	"line one\n{{ .A }}\n{{ end }}",
	"{{ .A }}\n\n{{ bogus }}",
	"{{ . }}{{ .A -}} x {{- .B }}",
	"{{ | }}",
	"{{ .A | }}",
	"{{ ,}}",
	"{{ 1 2 }}",
	"{{ else if .A }}{{ end }}",
	"{{ if .A }}x{{ else if .B }}y{{ else }}z{{ end }}",
	"{{ range .A }}{{ else if .B }}{{ end }}{{ end }}",
	"{{ define \"a\" }}1{{ end }}{{ define \"a\" }}2{{ end }}",
	"{{ template \"a\" 1 2 }}",
	"{{ 1+2i }}{{ 0x1p-2 }}{{ .5 }}",
	"{{ 1e }}",
	"{{ 0x }}",
	"{{ $ := 1 }}",
	// template_test.go's TestParse and TestParseError
	"{{ .System }} {{ .Prompt }} {{ .Response }}",
	"{{ with .Tools }}{{ . }}{{ end }} {{ .System }} {{ .Prompt }}",
	"{{ range .Messages }}{{ if eq .Role \"tool\" }}Tool Result: {{ .ToolName }} {{ .Content }}{{ end }}{{ end }}",
	"{{- range .Messages }}\n{{- if eq .Role \"system\" }}SYSTEM:\n{{- else if eq .Role \"user\" }}USER:\n{{- end }} {{ .Content }}\n{{- end }}",
	"{{ .Prompt ",
	"{{define \"x\"}}{{template \"x\"}}{{end}}{{template \"x\"}}",
	"{{ if .A }}{{ template \"t\" }}{{ end }}",
	"{{ define \"t\" }}{{ template \"u\" . }}{{ end }}{{ block \"b\" . }}{{ template \"t\" }}{{ end }}",
}

// vars is the error of Ollama's Template.Vars (template/template.go), which its Parse runs after text/template's:
// the walk of every template's nodes (Identifiers), of which only a {{template}} without a pipeline can fail.
func vars(tmpl *template.Template) error {
	for _, tt := range tmpl.Templates() {
		for _, n := range tt.Root.Nodes {
			if err := identifiers(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// identifiers is Ollama's Identifiers, its errors only.
func identifiers(n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		for _, c := range n.Nodes {
			if err := identifiers(c); err != nil {
				return err
			}
		}
	case *parse.TemplateNode:
		if n.Pipe == nil {
			return errors.New("undefined template specified")
		}
		return identifiers(n.Pipe)
	case *parse.ActionNode:
		if n.Pipe == nil {
			return errors.New("undefined action in template")
		}
		return identifiers(n.Pipe)
	case *parse.IfNode:
		return identifiers(&n.BranchNode)
	case *parse.RangeNode:
		return identifiers(&n.BranchNode)
	case *parse.WithNode:
		return identifiers(&n.BranchNode)
	case *parse.BranchNode:
		if n.Pipe == nil {
			return errors.New("undefined branch")
		}
		if err := identifiers(n.Pipe); err != nil {
			return err
		}
		for _, l := range []*parse.ListNode{n.List, n.ElseList} {
			if l != nil {
				if err := identifiers(l); err != nil {
					return err
				}
			}
		}
	case *parse.PipeNode:
		for _, c := range n.Cmds {
			for _, a := range c.Args {
				if err := identifiers(a); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// The pieces the random templates are made of.
var tokens = []string{"{{", "}}", "{{- ", " -}}", "{{/*", "*/}}", " ", "  ", "\n", "\t", ".", ".A", ".B.C", "$", "$x",
	"$y", ":=", "=", ",", "|", "(", ")", "if", "else", "end", "range", "with", "define", "template", "block", "break",
	"continue", "nil", "true", "1", "0x1F", "1.5", "-2", "'a'", "'\\n'", "''", "'ab'", "\"s\"", "\"\\q\"", "`r`",
	"printf", "len", "index", "eq", "json", "foo", "x", "text", "@", "#", "08", "081i", "1e", "1_0", "1+2i", "é",
	"\"", "`", "'", "-", "+", "*/", "/*", "{{ .Prompt }}", "{{ end }}", "{{ if .A }}", "{{ range $i, $m := .M }}",
	"{{ else }}", "{{ define \"t\" }}", "{{ break }}"}
