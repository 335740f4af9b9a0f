// Records what Ollama's fs/ggml.WriteGGUF writes when server/create.go's copySplitLayerPreservingTensors
// rewrites a split GGUF that carries compatibility tensors: for each case folder of CASES_DIR (written by
// make_ollama_split_gguf.py), its shards are decoded with ggml.Decode(f, -1) as ggufLayersWithMediaType decodes
// them, merged as mergeSplitGGUFLayers orders them (by split.no; here also their names' order), and written as
// copySplitLayerPreservingTensors writes them: the first shard's KV cloned, split.no, split.count and
// split.tensors.count removed (bare and under the architecture), every shard's tensors read from its file
// (baseLayerTensors, tensorFromFile). Output (stdout): each case's name and the written file's sha256 and size,
// or WriteGGUF's error.
//
// Built inside a scratch module holding Ollama's own fs, ml, format and logutil packages at the commit
// docs/formats.md names (docs/contributing.md); run by make_ollama_split_gguf.py.
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

	"github.com/ollama/ollama/fs/ggml"
)

type result struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Error  string `json:"error,omitempty"`
}

// tensorSection is server/quantization.go's: a tensor's bytes read from its shard.
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

func rewrite(dir string) result {
	paths, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	must(err)
	sort.Strings(paths)
	var first *ggml.GGML
	var tensors []*ggml.Tensor
	for _, p := range paths {
		f, err := os.Open(p)
		must(err)
		defer f.Close()
		decoded, err := ggml.Decode(f, -1)
		must(err)
		if first == nil {
			first = decoded
		}
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
	}
	kv := maps.Clone(first.KV())
	arch := first.KV().Architecture()
	for _, key := range []string{"split.no", "split.count", "split.tensors.count"} {
		delete(kv, key)
		delete(kv, arch+"."+key)
	}
	out, err := os.CreateTemp(dir, "split-copy")
	must(err)
	defer os.Remove(out.Name())
	defer out.Close()
	res := result{Name: filepath.Base(dir)}
	if err := ggml.WriteGGUF(out, kv, tensors); err != nil {
		res.Error = err.Error()
		return res
	}
	_, err = out.Seek(0, io.SeekStart)
	must(err)
	h := sha256.New()
	res.Size, err = io.Copy(h, out)
	must(err)
	res.SHA256 = hex.EncodeToString(h.Sum(nil))
	return res
}

func main() {
	dirs, err := os.ReadDir(os.Args[1])
	must(err)
	var results []result
	for _, d := range dirs {
		results = append(results, rewrite(filepath.Join(os.Args[1], d.Name())))
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	must(enc.Encode(results))
}
