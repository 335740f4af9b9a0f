"""weightkit: GGUF, safetensors and Ollama's model store; every tensor type; memory planning."""

from ._open import open_model as open
from .dtypes import GGMLType
from .errors import FormatError, UnsupportedError, WeightkitError
from .model import ModelFile, TensorInfo

__version__ = "0.1.0"
__all__ = ["FormatError", "GGMLType", "ModelFile", "TensorInfo", "UnsupportedError", "WeightkitError", "open"]
