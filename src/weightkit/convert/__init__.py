"""Conversions between Hugging Face checkpoints and GGUF: `convert.hf` (a checkpoint to GGUF, as llama.cpp's
`convert_hf_to_gguf.py`) and `convert.tohf` (a GGUF to a folder transformers loads)."""
