// Records what Ollama's template library does, for weightkit's port (src/weightkit/ollama/template_library.py):
//   - files: the SHA-256 of each file of Ollama's template/ folder that weightkit bundles (it must ship them
//     unchanged);
//   - layers: for each index.json name, the SHA-256 of the template layer (the .gotmpl, CRLF made LF) and the
//     params layer's bytes (json.Encoder of the struct holding only `stop`), as detectChatTemplate writes them;
//   - cases: template.Named's choice (its name, or "" for "no matching template found") and the least edit
//     distance, for the chat templates of template/testdata/templates.jsonl and for texts made from the
//     library's Jinja templates by a fixed number of random edits (non-ASCII runes included) around the
//     threshold of 100, from a fixed seed;
//   - wrapped: ComputeDistance of strings of 65,535 runes and more, where its uint16 cells wrap.
//
// template.Named is restated here as template/template.go has it (Ollama's package needs modules); the edit
// distance is github.com/agnivade/levenshtein itself (v1.1.1, as Ollama's go.mod: Debian's
// golang-github-agnivade-levenshtein-dev).
//
// Run (Ollama's template folder at the commit docs/formats.md names, extracted to /tmp/ollama-template):
//
//	git --git-dir=/work/.mirror/ollama+ollama/repo archive fb30760996871fa9460115c753afd2c60d4ab0f7 template \
//	    | tar -x -C /tmp && mv /tmp/template /tmp/ollama-template
//	cd tests/data && GO111MODULE=off GOPATH=/usr/share/gocode go run make_ollama_template_library_go.go \
//	    /tmp/ollama-template > ollama_template_library.json
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"
)

type named struct {
	Name       string `json:"name"`
	Template   string `json:"template"`
	Bytes      []byte `json:"-"`
	Parameters *struct {
		Stop []string `json:"stop"`
	} `json:"-"`
}

type layer struct {
	TemplateSHA256 string `json:"template_sha256"`
	Params         string `json:"params"`
}

// wrapped: ComputeDistance of strings.Repeat(Long, LongCount) and strings.Repeat(Short, ShortCount), long
// enough that its uint16 cells wrap.
type wrapped struct {
	Long       string `json:"long"`
	LongCount  int    `json:"long_count"`
	Short      string `json:"short"`
	ShortCount int    `json:"short_count"`
	Distance   int    `json:"distance"`
}

type matchCase struct {
	Text     string `json:"text"`
	Name     string `json:"name"`
	Distance int    `json:"distance"`
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func load(dir string) []*named {
	index, err := os.ReadFile(filepath.Join(dir, "index.json"))
	must(err)
	var templates []*named
	must(json.Unmarshal(index, &templates))
	for _, t := range templates {
		bts, err := os.ReadFile(filepath.Join(dir, t.Name+".gotmpl"))
		must(err)
		t.Bytes = bytes.ReplaceAll(bts, []byte("\r\n"), []byte("\n"))
		params, err := os.ReadFile(filepath.Join(dir, t.Name+".json"))
		if err != nil {
			continue
		}
		must(json.Unmarshal(params, &t.Parameters))
	}
	return templates
}

// namedMatch is template.Named: the first template at the least distance, if below 100.
func namedMatch(templates []*named, s string) (string, int) {
	var template *named
	score := math.MaxInt
	for _, t := range templates {
		if d := levenshtein.ComputeDistance(s, t.Template); d < score {
			score = d
			template = t
		}
	}
	if score < 100 {
		return template.Name, score
	}
	return "", score
}

func edited(r *rand.Rand, s string, n int) string {
	runes := []rune(s)
	alphabet := []rune("abcxyz{}%<>|_ \n\u00e9\u65e5\U0001F600")
	for i := 0; i < n; i++ {
		at := r.Intn(len(runes) + 1)
		ch := alphabet[r.Intn(len(alphabet))]
		switch op := r.Intn(3); {
		case op == 0 || at == len(runes):
			runes = append(runes[:at], append([]rune{ch}, runes[at:]...)...)
		case op == 1:
			runes = append(runes[:at], runes[at+1:]...)
		default:
			runes[at] = ch
		}
	}
	return string(runes)
}

func main() {
	dir := os.Args[1]
	templates := load(dir)

	files := map[string]string{}
	matches, err := filepath.Glob(filepath.Join(dir, "*.*"))
	must(err)
	for _, path := range matches {
		ext := filepath.Ext(path)
		if ext != ".gotmpl" && ext != ".json" {
			continue
		}
		b, err := os.ReadFile(path)
		must(err)
		files[filepath.Base(path)] = sum(b)
	}

	layers := map[string]layer{}
	for _, t := range templates {
		var params bytes.Buffer
		if t.Parameters != nil {
			must(json.NewEncoder(&params).Encode(t.Parameters))
		}
		layers[t.Name] = layer{sum(t.Bytes), params.String()}
	}

	var texts []string
	f, err := os.Open(filepath.Join(dir, "testdata", "templates.jsonl"))
	must(err)
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var line map[string]string
		must(json.Unmarshal(scanner.Bytes(), &line))
		keys := make([]string, 0, len(line))
		for k := range line {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			texts = append(texts, line[k])
		}
	}
	r := rand.New(rand.NewSource(29))
	for i, t := range templates {
		for _, n := range []int{60, 95, 99, 100, 104, 130} {
			if (i+n)%3 == 0 {
				texts = append(texts, edited(r, t.Template, n))
			}
		}
	}
	texts = append(texts, "", "{{ bos_token }}", string(bytes.Repeat([]byte("x"), 3000)))

	cases := make([]matchCase, 0, len(texts))
	for _, text := range texts {
		name, distance := namedMatch(templates, text)
		cases = append(cases, matchCase{text, name, distance})
	}

	wraps := []wrapped{{"ab", 40000, "ab", 20, 0}, {"abc", 22000, "a日c", 12, 0}}
	for i, w := range wraps {
		wraps[i].Distance = levenshtein.ComputeDistance(strings.Repeat(w.Long, w.LongCount), strings.Repeat(w.Short, w.ShortCount))
	}

	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", " ")
	must(out.Encode(map[string]any{"files": files, "layers": layers, "cases": cases, "wrapped": wraps}))
}
