// Records what server/create.go makes of a GGUF named by FROM or ADAPTER that may be a projector: for each
// file of CASES_DIR (written by make_ollama_projector_gguf.py), decoded with ggml.Decode(f, -1) as
// ggufLayersWithMediaType decodes it, the media type that function chooses (general.type "adapter", else
// isProjectorGGUF, else a model), whether needsDefaultLlavaProjectorType holds, and for a projector where it
// does (createModel's check), what addDefaultLlavaProjectorType writes: the KV cloned, clip.projector_type
// "mlp" added, every tensor read from the file (tensorFromFile), all written by fs/ggml.WriteGGUF (its sha256
// and size, or its error). isProjectorGGUF and needsDefaultLlavaProjectorType are Ollama's own, copied
// verbatim into server.go by make_ollama_projector_gguf.py. Output (stdout): JSON, one entry per file.
//
// Built inside the scratch module of make_ollama_split_gguf.py (docs/contributing.md).
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ollama/ollama/fs/ggml"
)

type result struct {
	Name          string `json:"name"`
	MediaType     string `json:"media_type"`
	NeedsDefault  bool   `json:"needs_default_projector_type"`
	RewrittenSHA  string `json:"rewritten_sha256,omitempty"`
	RewrittenSize int64  `json:"rewritten_size,omitempty"`
	Error         string `json:"error,omitempty"`
}

// tensorSection is server/quantization.go's: a tensor's bytes read from its file.
type tensorSection struct {
	*io.SectionReader
}

func (r tensorSection) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, r.SectionReader)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func mediaType(f *ggml.GGML) string {
	mediaType := "application/vnd.ollama.image.model"
	if f.KV().Kind() == "adapter" {
		mediaType = "application/vnd.ollama.image.adapter"
	} else if isProjectorGGUF(f.KV()) {
		mediaType = "application/vnd.ollama.image.projector"
	}
	return mediaType
}

func record(path string) result {
	f, err := os.Open(path)
	must(err)
	defer f.Close()
	decoded, err := ggml.Decode(f, -1)
	must(err)
	res := result{Name: strings.TrimSuffix(filepath.Base(path), ".gguf"), MediaType: mediaType(decoded),
		NeedsDefault: needsDefaultLlavaProjectorType(decoded)}
	if res.MediaType != "application/vnd.ollama.image.projector" || !res.NeedsDefault {
		return res
	}
	kv := maps.Clone(decoded.KV())
	kv["clip.projector_type"] = "mlp"
	var tensors []*ggml.Tensor
	for _, t := range decoded.Tensors().Items() {
		tensors = append(tensors, &ggml.Tensor{
			Name:  t.Name,
			Kind:  t.Kind,
			Shape: append([]uint64(nil), t.Shape...),
			WriterTo: tensorSection{
				io.NewSectionReader(f, int64(decoded.Tensors().Offset+t.Offset), int64(t.Size())),
			},
		})
	}
	out, err := os.CreateTemp(filepath.Dir(path), "projector-metadata")
	must(err)
	defer os.Remove(out.Name())
	defer out.Close()
	if err := ggml.WriteGGUF(out, kv, tensors); err != nil {
		res.Error = err.Error()
		return res
	}
	_, err = out.Seek(0, io.SeekStart)
	must(err)
	h := sha256.New()
	res.RewrittenSize, err = io.Copy(h, out)
	must(err)
	res.RewrittenSHA = hex.EncodeToString(h.Sum(nil))
	return res
}

func main() {
	paths, err := filepath.Glob(filepath.Join(os.Args[1], "*.gguf"))
	must(err)
	sort.Strings(paths)
	var results []result
	for _, p := range paths {
		results = append(results, record(p))
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	must(enc.Encode(results))
}
