// Records how Go's encoding/json writes the two documents of an Ollama import that weightkit writes without
// Go: the header of a packed tensor blob (x/safetensors: a map of tensorInfo, plus __metadata__) and the
// config blob (types/model.ConfigV2 and its Draft, their fields in Ollama's order at the commit docs/formats.md
// names).
// Output: ollama_go_json.json, which tests/ollama/test_import.py reads.
//
// Run from tests/data: GO111MODULE=off go run make_ollama_go_json.go > ollama_go_json.json
package main

import (
	"encoding/json"
	"os"
)

type tensorInfo struct {
	Dtype       string  `json:"dtype"`
	Shape       []int32 `json:"shape"`
	DataOffsets [2]int  `json:"data_offsets"`
}

type configV2 struct {
	ModelFormat   string   `json:"model_format"`
	ModelFamily   string   `json:"model_family"`
	ModelFamilies []string `json:"model_families"`
	ModelType     string   `json:"model_type"`
	FileType      string   `json:"file_type"`
	Renderer      string   `json:"renderer,omitempty"`
	Parser        string   `json:"parser,omitempty"`
	Requires      string   `json:"requires,omitempty"`
	RemoteHost    string   `json:"remote_host,omitempty"`
	RemoteModel   string   `json:"remote_model,omitempty"`
	Capabilities  []string `json:"capabilities,omitempty"`
	ContextLen    int      `json:"context_length,omitempty"`
	EmbedLen      int      `json:"embedding_length,omitempty"`
	BaseName      string   `json:"base_name,omitempty"`
	Draft         *draft   `json:"draft,omitempty"`
	Architecture  string   `json:"architecture"`
	OS            string   `json:"os"`
}

type draft struct {
	ModelFormat  string `json:"model_format,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	TensorPrefix string `json:"tensor_prefix,omitempty"`
	Config       string `json:"config,omitempty"`
}

type tensor struct {
	Name  string  `json:"name"`
	Dtype string  `json:"dtype"`
	Shape []int32 `json:"shape"`
	Size  int     `json:"size"`
}

type headerCase struct {
	Tensors  []tensor          `json:"tensors"`
	Metadata map[string]string `json:"metadata"`
	Header   string            `json:"header"`
}

func header(tensors []tensor, metadata map[string]string) string {
	h := map[string]any{}
	offset := 0
	for _, t := range tensors {
		h[t.Name] = tensorInfo{t.Dtype, t.Shape, [2]int{offset, offset + t.Size}}
		offset += t.Size
	}
	if len(metadata) > 0 {
		h["__metadata__"] = metadata
	}
	b, _ := json.Marshal(h)
	return string(b)
}

func main() {
	var headers []headerCase
	for _, c := range []headerCase{
		{Tensors: []tensor{{"model.layers.0.mlp.experts.up_proj.weight", "BF16", []int32{2, 64, 64}, 16384}}},
		{Tensors: []tensor{{"b<&>", "F32", []int32{}, 4}, {"a", "U8", []int32{2}, 2}, {"é.weight", "BF16", []int32{1, 1}, 2}},
			Metadata: map[string]string{"quant_type": "nvfp4", "group_size": "16"}},
		{Tensors: []tensor{{"x.weight", "U32", []int32{4, 2}, 32}, {"x.weight.scale", "U8", []int32{4, 1}, 4}, {"x.weight.global_scale", "F32", []int32{}, 4}},
			Metadata: map[string]string{"quant_type": "nvfp4"}},
	} {
		c.Header = header(c.Tensors, c.Metadata)
		headers = append(headers, c)
	}
	config := configV2{ModelFormat: "safetensors", FileType: "int8", Renderer: "qwen3.5", Parser: "qwen3.5",
		Requires: "0.19.0", Capabilities: []string{"completion", "vision", "tools", "thinking"}}
	configJSON, _ := json.Marshal(config)
	unquantized, _ := json.Marshal(configV2{ModelFormat: "safetensors", Requires: "0.19.0", Capabilities: []string{"completion"}})
	// x/create/client's config for a model with a safetensors DRAFT (draftMetadata)
	withDraftConfig := configV2{ModelFormat: "safetensors", Requires: "0.19.0", Capabilities: []string{"completion"},
		Draft: &draft{ModelFormat: "safetensors", Architecture: "LlamaForCausalLM", TensorPrefix: "draft.", Config: "draft/config.json"}}
	withDraft, _ := json.Marshal(withDraftConfig)
	// createModelFromBaseWithDraft: the stored Qwen 3.5 model's config with the draft added
	config.Draft = withDraftConfig.Draft
	baseWithDraft, _ := json.Marshal(config)
	out, _ := json.MarshalIndent(map[string]any{
		"headers": headers, "config_qwen35_int8": string(configJSON), "config_unquantized": string(unquantized),
		"config_safetensors_draft": string(withDraft), "config_qwen35_int8_with_draft": string(baseWithDraft),
	}, "", " ")
	os.Stdout.Write(append(out, '\n'))
}
