"""Projectors (`--mmproj`): libmtmd (llama-cpp-python 0.3.36's, where it is installed) loads what weightkit
writes and encodes an image with it; the command writes the recorded file; and what a projector needs is
refused by name where it is missing."""

from __future__ import annotations

import ctypes
import hashlib
import json
import shutil

import numpy as np
import pytest

from weightkit.cli import main
from weightkit.convert.hf import convert_hf
from weightkit.errors import FormatError, UnsupportedError

from .conftest import checkpoint_group
from .test_hf_golden import GOLDEN

GEMMA3 = "tiny-gemma-3-mmproj"
GEMMA4 = "tiny-gemma-4"


def _encode_image(llama_cpp, mtmd, text_model: str, projector: str, side: int, width: int) -> np.ndarray:
    """libmtmd's embeddings of one side x side image (one row of `width` per image token), the projector loaded
    beside the text model's vocabulary (mtmd_init_from_file checks the two widths agree)."""
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(text_model.encode(), params)
    assert model, "libllama refused the text model"
    ctx_params = mtmd.mtmd_context_params_default()
    ctx_params.use_gpu, ctx_params.n_threads, ctx_params.warmup = False, 1, True
    ctx = mtmd.mtmd_init_from_file(projector.encode(), model, ctx_params)
    try:
        assert ctx, "libmtmd refused the projector"
        pixels = (np.arange(side * side * 3) % 251).astype(np.uint8)
        bitmap = mtmd.mtmd_bitmap_init(side, side, pixels.ctypes.data_as(ctypes.POINTER(ctypes.c_ubyte)))
        chunks = mtmd.mtmd_input_chunks_init()
        marker = mtmd.mtmd_default_marker()
        text = mtmd.mtmd_input_text(text=marker, text_len=len(marker), add_special=False, parse_special=True)
        try:
            assert mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text), (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap), 1) == 0
            images = [c for i in range(mtmd.mtmd_input_chunks_size(chunks))
                      if mtmd.mtmd_input_chunk_get_type(c := mtmd.mtmd_input_chunks_get(chunks, i)) == 1]  # fmt: skip
            assert len(images) == 1
            assert mtmd.mtmd_encode_chunk(ctx, images[0]) == 0
            n_tokens = mtmd.mtmd_input_chunk_get_n_tokens(images[0])
            return (
                np.ctypeslib.as_array(mtmd.mtmd_get_output_embd(ctx), shape=(n_tokens * width,))
                .reshape(n_tokens, -1)
                .copy()
            )
        finally:
            mtmd.mtmd_input_chunks_free(chunks)
            mtmd.mtmd_bitmap_free(bitmap)
    finally:
        if ctx:
            mtmd.mtmd_free(ctx)
        llama_cpp.llama_model_free(model)


@pytest.mark.slow
@checkpoint_group(GEMMA3)
def test_libmtmd_loads_the_gemma3_projector_and_encodes_an_image(hf_checkpoints, tmp_path, vocabulary_once):
    """The Gemma 3 projector weightkit writes, loaded by libmtmd beside weightkit's text model of the same
    checkpoint: an image becomes the processor's image_seq_length tokens of the text model's width."""
    llama_cpp = pytest.importorskip("llama_cpp")
    mtmd = pytest.importorskip("llama_cpp.mtmd_cpp")
    folder = hf_checkpoints[GEMMA3]
    convert_hf(folder, tmp_path / "text.gguf", "q8_0")
    convert_hf(folder, tmp_path / "mmproj.gguf", "f16", mmproj=True)
    config = json.loads((folder / "config.json").read_text())
    tokens = json.loads((folder / "processor_config.json").read_text())["image_seq_length"]
    side, width = config["vision_config"]["image_size"], config["text_config"]["hidden_size"]
    text, projector = str(tmp_path / "text.gguf"), str(tmp_path / "mmproj.gguf")
    embeddings = _encode_image(llama_cpp, mtmd, text, projector, side, width)
    assert embeddings.shape == (tokens, width)
    assert np.isfinite(embeddings).all() and embeddings.std() > 0


@pytest.mark.slow
@checkpoint_group("tiny-llama4")
def test_libmtmd_loads_the_llama4_projector_and_encodes_an_image(hf_checkpoints, tmp_path, vocabulary_once):
    """The Llama 4 projector weightkit writes, loaded by libmtmd beside weightkit's text model of the same
    checkpoint: a 56-pixel image, 4 x 4 patches pixel-shuffled by 2, becomes 4 tokens of the text model's width."""
    llama_cpp = pytest.importorskip("llama_cpp")
    mtmd = pytest.importorskip("llama_cpp.mtmd_cpp")
    folder = hf_checkpoints["tiny-llama4"]
    text, projector = str(tmp_path / "text.gguf"), str(tmp_path / "mmproj.gguf")
    convert_hf(folder, text, "q8_0")
    convert_hf(folder, projector, "f16", mmproj=True)
    embeddings = _encode_image(llama_cpp, mtmd, text, projector, 56, 64)
    assert embeddings.shape == (4, 64)
    assert np.isfinite(embeddings).all() and embeddings.std() > 0


@pytest.mark.slow
@checkpoint_group(GEMMA4)
def test_libmtmd_loads_the_gemma4_projector_and_encodes_an_image(hf_checkpoints, tmp_path, vocabulary_once):
    """The Gemma 4 projector weightkit writes (vision and audio encoders in one file, both loaded and warmed up),
    loaded by libmtmd beside weightkit's text model of the same checkpoint: a 96-pixel image, scaled up to
    libmtmd's minimum of 70 tokens (9 x 9 tokens of 3 x 3 patches of 16 pixels), becomes 81 tokens of the text
    model's width."""
    llama_cpp = pytest.importorskip("llama_cpp")
    mtmd = pytest.importorskip("llama_cpp.mtmd_cpp")
    folder = hf_checkpoints[GEMMA4]
    convert_hf(folder, tmp_path / "text.gguf", "q8_0")
    convert_hf(folder, tmp_path / "mmproj.gguf", "f16", mmproj=True)
    width = json.loads((folder / "config.json").read_text())["text_config"]["hidden_size"]
    embeddings = _encode_image(llama_cpp, mtmd, str(tmp_path / "text.gguf"), str(tmp_path / "mmproj.gguf"), 96, width)
    assert embeddings.shape == (81, width)
    assert np.isfinite(embeddings).all() and embeddings.std() > 0


@pytest.mark.slow
@checkpoint_group("tiny-mistral3")
def test_libmtmd_refuses_the_pixtral_projector_as_the_reference_writes_it(hf_checkpoints, tmp_path, vocabulary_once):
    """Mistral Small 3's projector from a transformers-format checkpoint is written as the reference writes it
    (the recorded file), and libmtmd refuses that file: the reference drops the language model's tensors before
    it would take the [IMG_BREAK] row of the token embedding (`v.token_embd.img_break`), which libmtmd needs."""
    llama_cpp = pytest.importorskip("llama_cpp")
    mtmd = pytest.importorskip("llama_cpp.mtmd_cpp")
    folder = hf_checkpoints["tiny-mistral3"]
    text, projector = tmp_path / "text.gguf", tmp_path / "mmproj.gguf"
    convert_hf(folder, text, "q8_0")
    report = convert_hf(folder, projector, "f16", mmproj=True)
    assert hashlib.sha256(projector.read_bytes()).hexdigest() == GOLDEN["projectors"]["tiny-mistral3"]["f16"]["sha256"]
    assert "v.token_embd.img_break" not in report.tensors
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(text).encode(), params)
    assert model, "libllama refused the text model"
    try:
        ctx_params = mtmd.mtmd_context_params_default()
        ctx_params.use_gpu, ctx_params.n_threads = False, 1
        ctx = mtmd.mtmd_init_from_file(str(projector).encode(), model, ctx_params)
        if ctx:
            mtmd.mtmd_free(ctx)
        assert not ctx, "libmtmd now loads the Pixtral projector: test it as the others"
    finally:
        llama_cpp.llama_model_free(model)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "side", "tokens"),
    [pytest.param(n, s, t, marks=checkpoint_group(n))
     for n, s, t in (("tiny-qwen2.5-vl", 56, 9), ("tiny-qwen3-vl", 64, 9), ("tiny-qwen3-vl-moe", 64, 9))],
)  # fmt: skip
def test_libmtmd_loads_the_qwen_vl_projectors_and_encodes_an_image(
    hf_checkpoints, tmp_path, vocabulary_once, name, side, tokens
):
    """The Qwen2.5-VL and Qwen3-VL projectors weightkit writes, loaded by libmtmd beside weightkit's language model
    of the same checkpoint (Qwen3-VL's input width counting its deepstack layers): libmtmd scales the image up to
    its minimum pixel count (8 merged patches: 84 and 96 pixels), 3 x 3 tokens of the text model's input width."""
    llama_cpp = pytest.importorskip("llama_cpp")
    mtmd = pytest.importorskip("llama_cpp.mtmd_cpp")
    text, projector = str(tmp_path / "text.gguf"), str(tmp_path / "mmproj.gguf")
    convert_hf(hf_checkpoints[name], text, "q8_0")
    convert_hf(hf_checkpoints[name], projector, "f16", mmproj=True)
    vision = json.loads((hf_checkpoints[name] / "config.json").read_text())["vision_config"]
    width = vision["out_hidden_size"] * (1 + len(vision.get("deepstack_visual_indexes", [])))
    embeddings = _encode_image(llama_cpp, mtmd, text, projector, side, width)
    assert embeddings.shape == (tokens, width)
    assert np.isfinite(embeddings).all() and embeddings.std() > 0


def test_the_command_writes_the_recorded_projector(hf_checkpoints, tmp_path, capsys):
    out = tmp_path / "mmproj.gguf"
    with pytest.raises(SystemExit) as done:
        main(["convert", str(hf_checkpoints[GEMMA3]), str(out), "--mmproj", "--outtype", "f16", "--json"])
    assert done.value.code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["architecture"] == "clip" and report["hf_architecture"] == "Gemma3ForConditionalGeneration"
    assert hashlib.sha256(out.read_bytes()).hexdigest() == GOLDEN["projectors"][GEMMA3]["f16"]["sha256"]


def test_a_text_model_has_no_projector(hf_checkpoints, tmp_path):
    with pytest.raises(UnsupportedError, match="a projector \\(--mmproj\\) for 'Gemma3ForCausalLM'"):
        convert_hf(hf_checkpoints["tiny-gemma-3"], tmp_path / "mmproj.gguf", mmproj=True)


def test_the_image_processors_normalization_is_needed(hf_checkpoints, tmp_path):
    folder = tmp_path / "no-processor"
    shutil.copytree(hf_checkpoints[GEMMA3], folder)
    (folder / "preprocessor_config.json").unlink()
    with pytest.raises(FormatError, match="image_mean"):
        convert_hf(folder, tmp_path / "mmproj.gguf", mmproj=True)


def test_an_uneven_window_attention_pattern_is_refused(hf_checkpoints, tmp_path):
    """Qwen2.5-VL's full-attention blocks must repeat evenly (clip has one `n_wa_pattern`), as the reference checks."""
    folder = tmp_path / "uneven"
    shutil.copytree(hf_checkpoints["tiny-qwen2.5-vl"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["vision_config"]["fullatt_block_indexes"] = [1, 2]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(FormatError, match="fullatt_block_indexes"):
        convert_hf(folder, tmp_path / "mmproj.gguf", mmproj=True)


def test_a_pixtral_projector_needs_its_image_break_token(hf_checkpoints, tmp_path):
    """The reference looks [IMG_BREAK] up in the tokenizer files for Pixtral's projector and refuses it without."""
    folder = tmp_path / "no-img-break"
    shutil.copytree(hf_checkpoints["tiny-mistral3"], folder)
    for name, key in (("tokenizer.json", "added_tokens"), ("tokenizer_config.json", "added_tokens_decoder")):
        data = json.loads((folder / name).read_text())
        entries = data[key]
        if isinstance(entries, dict):
            data[key] = {k: v for k, v in entries.items() if v["content"] != "[IMG_BREAK]"}
        else:
            data[key] = [e for e in entries if e["content"] != "[IMG_BREAK]"]
        (folder / name).write_text(json.dumps(data))
    with pytest.raises(FormatError, match="IMG_BREAK"):
        convert_hf(folder, tmp_path / "mmproj.gguf", mmproj=True)
