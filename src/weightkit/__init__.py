"""weightkit: GGUF, safetensors and Ollama's model store; every tensor type; memory planning."""

from ._open import open_model as open
from ._version import __version__ as __version__
from .dtypes import GGMLType
from .errors import FormatError, UnsupportedError, WeightkitError
from .model import ModelFile, TensorInfo

__all__ = ["FormatError", "GGMLType", "ModelFile", "TensorInfo", "UnsupportedError", "WeightkitError", "open"]
