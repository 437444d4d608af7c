# Type stub of the embedlab package (docs/python.md is the reference). The compiled module
# has no annotations a type checker can read; tests/python/test_stub.py fails when a
# function's or a method's parameters here differ from the module's own.
import os
from typing import Any, Callable, Literal, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str

PathLike = Union[str, bytes, os.PathLike[str], os.PathLike[bytes]]
# A progress callable: called with a dict; returning False cancels (embedlab.Cancelled).
Progress = Optional[Callable[[dict[str, Any]], Optional[bool]]]
TokenIds = Union[Sequence[int], npt.NDArray[np.integer[Any]]]

class InputError(ValueError): ...
class Cancelled(RuntimeError): ...

class Model:
    @property
    def path(self) -> str: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def architecture(self) -> str: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def embedding_kind(self) -> str: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def is_encoder(self) -> bool: ...
    @property
    def head(self) -> Literal["causal_lm", "masked_lm", "classification", "none"]: ...
    @property
    def labels(self) -> list[str]: ...
    @property
    def pooling(self) -> str: ...
    @property
    def normalize_embeddings(self) -> bool: ...
    def tokenize(self, text: str) -> npt.NDArray[np.int64]: ...
    def detokenize(self, ids: TokenIds) -> str: ...
    def embedding_table(self) -> npt.NDArray[np.float32]: ...
    def perplexity(
        self,
        *,
        text: Optional[PathLike] = None,
        ids: Optional[TokenIds] = None,
        ctx: int = 128,
        stride: Optional[int] = None,
        batch: int = 0,
        progress: Progress = None,
    ) -> dict[str, Any]: ...
    def logits(self, ids: TokenIds) -> npt.NDArray[np.float32]: ...
    # This model with `table` [V, d] as its token embedding (np.asarray of real numbers,
    # copied as float32; a tied head follows it); the model itself is unchanged.
    def with_table(self, table: npt.ArrayLike) -> Model: ...
    # The NLL (nats) of each token perplexity() scores: len == its "tokens", mean == its "nll_per_token".
    def token_losses(
        self,
        *,
        text: Optional[PathLike] = None,
        ids: Optional[TokenIds] = None,
        ctx: int = 128,
        stride: Optional[int] = None,
        progress: Progress = None,
    ) -> npt.NDArray[np.float64]: ...
    def export_onnx(
        self,
        path: PathLike,
        *,
        with_past: bool = False,
        external_data: bool = False,
        overwrite: bool = False,
        progress: Progress = None,
    ) -> dict[str, Any]: ...
    def generate(
        self,
        prompt: Optional[str] = None,
        *,
        ids: Optional[TokenIds] = None,
        max_tokens: int = 64,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        stop: Union[str, list[str], None] = None,
        bos: bool = True,
        top_n: int = 5,
        compare: Optional[Model] = None,
        on_token: Optional[Callable[[dict[str, Any]], Optional[bool]]] = None,
        sampler: Literal["llamacpp", "hf"] = "llamacpp",
        min_p: Optional[float] = None,
        ignore_eos: bool = False,
    ) -> dict[str, Any]: ...
    def divergence(
        self,
        reference: Model,
        *,
        text: Optional[PathLike] = None,
        ids: Optional[TokenIds] = None,
        ctx: int = 128,
        stride: Optional[int] = None,
        progress: Progress = None,
    ) -> dict[str, Any]: ...
    def llamacpp_divergence(self, file: PathLike, *, progress: Progress = None) -> dict[str, Any]: ...
    def task(
        self, name: str, data: PathLike, *, limit: Optional[int] = None, progress: Progress = None
    ) -> dict[str, Any]: ...
    def embed(
        self,
        texts: list[str],
        *,
        pooling: Literal["model", "cls", "mean", "max"] = "model",
        normalize: Optional[bool] = None,
        batch: int = 32,
        progress: Progress = None,
    ) -> npt.NDArray[np.float32]: ...
    def classify(
        self,
        texts: list[str],
        *,
        pairs: Optional[list[str]] = None,
        batch: int = 32,
        progress: Progress = None,
    ) -> npt.NDArray[np.float32]: ...
    def masked_lm(
        self,
        *,
        text: Optional[PathLike] = None,
        ctx: int = 128,
        mask_rate: float = 0.0,
        seed: int = 0,
        reference: Optional[Model] = None,
        progress: Progress = None,
    ) -> dict[str, Any]: ...

class Run:
    @property
    def summary(self) -> dict[str, Any]: ...
    @property
    def record(self) -> dict[str, Any]: ...
    @property
    def request(self) -> dict[str, Any]: ...
    # As stored: f16 float16, bf16 uint16 (the bits), ggml types uint8 blocks [rows, row bytes].
    @property
    def factors(self) -> dict[str, npt.NDArray[Any]]: ...
    # Decoded to float32 (ids as stored): the values the compressed model runs on.
    @property
    def factors_f32(self) -> dict[str, npt.NDArray[Any]]: ...
    # "f32", "f16", "bf16", a ggml type ("q8_0"), or NumPy's name for ids ("int32").
    @property
    def factor_types(self) -> dict[str, str]: ...
    @property
    def model(self) -> Model: ...
    # The compressed table [V, d] as its lookup rebuilds the rows.
    def embedding_table(self) -> npt.NDArray[np.float32]: ...
    def export(
        self, dir: PathLike, *, dense: bool = False, overwrite: bool = False, progress: Progress = None
    ) -> dict[str, Any]: ...

def version() -> str: ...
def methods() -> list[dict[str, Any]]: ...
def load(path: PathLike, *, tokenizer: Optional[PathLike] = None, verify: bool = True) -> Model: ...
def compress(model: Union[Model, PathLike], method: str, *, progress: Progress = None, **kwargs: Any) -> Run: ...
# A table method on a table [V, d] without a model file: a Run with record (no summary,
# model or export); model= accounts it as that model's run does.
def compress_table(
    table: npt.ArrayLike,
    method: str,
    *,
    model: Optional[Model] = None,
    model_params: int = 0,
    tied: bool = True,
    positions: int = 0,
    stored_type: Optional[str] = None,
    progress: Progress = None,
    **kwargs: Any,
) -> Run: ...
def sweep(
    model: Union[Model, PathLike],
    method: str,
    grid: dict[str, Sequence[Any]],
    *,
    progress: Progress = None,
    **fields: Any,
) -> list[dict[str, Any]]: ...
def account(
    method: str,
    vocab: int,
    dim: int,
    *,
    model_params: int = 0,
    tied: bool = True,
    positions: int = 0,
    stored_type: Optional[str] = None,
    **kwargs: Any,
) -> dict[str, Any]: ...
def dequantize(
    data: npt.NDArray[Any], type: str, shape: Optional[Sequence[int]] = None
) -> npt.NDArray[np.float32]: ...
