# Type stub of the embedlab package (docs/python.md is the reference). The compiled module
# has no annotations a type checker can read; tests/python/test_stub.py fails when a
# function's or a method's parameters here differ from the module's own.
import os
from types import TracebackType
from typing import Any, Callable, Iterator, Literal, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str

PathLike = Union[str, bytes, os.PathLike[str], os.PathLike[bytes]]
# progress=: a callable progress(stage, done, total, overall) (returning False cancels:
# embedlab.Cancelled), True (a tqdm bar, or a line on stderr without tqdm), False or None.
Progress = Union[bool, None, Callable[[str, int, int, float], Optional[bool]]]
# generate's on_token: called with each token's dict; False ends the generation.
OnToken = Optional[Callable[[dict[str, Any]], Optional[bool]]]
Array = npt.NDArray[Any]
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
    # One sequence: [n, V]; a batch (2-D array or list of sequences): [B, T, V] when of one
    # length, else a list of [n_i, V].
    def logits(
        self, ids: Union[TokenIds, Sequence[TokenIds]], *, progress: Progress = None
    ) -> Union[npt.NDArray[np.float32], list[npt.NDArray[np.float32]]]: ...
    # layers=None: final hidden states [n, d]; Hugging Face's output_hidden_states indices
    # (0 embeddings .. num_layers final): an int [n, d], a list [len(layers), n, d].
    def hidden_states(
        self, ids: TokenIds, *, layers: Union[int, Sequence[int], None] = None, progress: Progress = None
    ) -> npt.NDArray[np.float32]: ...
    # lm-evaluation-harness's loglikelihood (nats): two str -> float, two lists -> float64 [n];
    # greedy=True: the harness's (logprob, is_greedy), with lists (float64 [n], bool [n]).
    def loglikelihood(
        self,
        context: Union[str, Sequence[str]],
        continuation: Union[str, Sequence[str]],
        *,
        greedy: bool = False,
        progress: Progress = None,
    ) -> Union[
        float,
        npt.NDArray[np.float64],
        tuple[float, bool],
        tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]],
    ]: ...
    # Releases the model (also at the end of `with embedlab.load(...) as m:`).
    def close(self) -> None: ...
    def __enter__(self) -> Model: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None: ...
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
        on_token: OnToken = None,
        sampler: Literal["llamacpp", "hf"] = "llamacpp",
        min_p: Optional[float] = None,
        ignore_eos: bool = False,
        weights: Literal["half", "f32"] = "half",
    ) -> dict[str, Any]: ...
    # per_token=True adds "per_token": input, target (int32), kl, nll, reference_nll
    # (float64), same_top (bool), one per scored position.
    def divergence(
        self,
        reference: Model,
        *,
        text: Optional[PathLike] = None,
        ids: Optional[TokenIds] = None,
        ctx: int = 128,
        stride: Optional[int] = None,
        per_token: bool = False,
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
    # The results row; a load_run run's is read back from embedlab.json (seconds None, host "").
    @property
    def summary(self) -> dict[str, Any]: ...
    # The summary with relative_frobenius and explained_variance (None where the method has none).
    @property
    def row(self) -> dict[str, Any]: ...
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
    # Per vocabulary id (float64/int64/int32 [V]) and "buckets" (damage_by_frequency).
    def token_damage(
        self,
        reference: Optional[Model] = None,
        *,
        text: Optional[str] = None,
        ids: Optional[TokenIds] = None,
        ctx: Optional[int] = None,
        stride: Optional[int] = None,
        progress: Progress = None,
    ) -> dict[str, Any]: ...
    # The row as a one-row pandas.DataFrame (ImportError without pandas).
    def to_pandas(self) -> Any: ...
    # The compressed table as a torch.nn.Module (ImportError without PyTorch): forward(ids)
    # rows [..., d], head(hidden) logits [..., V]; pca, svd, tt, tucker, lle, lle-unk,
    # lle-pca, fourier and aq factorised (rows rebuilt as the engine does), quant
    # dequantised; flat raises InputError.
    def to_torch(self) -> Any: ...

# compress_chain()'s result: trim, then one method, then its stored type, as one run.
class Chain:
    # The chain's results row (method "chain" after trim; parameters its label).
    @property
    def summary(self) -> dict[str, Any]: ...
    # The one record, as compress --json prints it (its "pipeline" block after trim).
    @property
    def record(self) -> dict[str, Any]: ...
    # What out= holds (embedlab.json, or run.json for trim alone); None without out=.
    @property
    def manifest(self) -> Optional[dict[str, Any]]: ...
    @property
    def out(self) -> Optional[str]: ...
    # Every step's settings, in order (trim's first).
    @property
    def steps(self) -> list[dict[str, Any]]: ...
    # table_parameters, table_bytes, model_bytes: before (the original) and after.
    @property
    def whole_chain(self) -> dict[str, Any]: ...
    # "trim 0.999 → pca rank 32 → q8_0"
    @property
    def label(self) -> str: ...

# sweep()'s rows (Run.row dicts).
class Sweep(list[dict[str, Any]]):
    def to_pandas(self) -> Any: ...

def version() -> str: ...
def methods() -> list[dict[str, Any]]: ...
def load(path: PathLike, *, tokenizer: Optional[PathLike] = None, verify: bool = True) -> Model: ...
# A Run read back from a compressed directory: record, summary, request, factors, model.
def load_run(dir: PathLike, *, verify: bool = True) -> Run: ...
def compress(model: Union[Model, PathLike], method: str, *, progress: Progress = None, **kwargs: Any) -> Run: ...
# A chain as one run, as compress --method trim ... --then METHOD ... --then-store TYPE:
# pipeline=[{"method": "trim", "freq_text": ..., "coverage": 0.999}, {"method": "pca",
# "rank": 32, "store": "q8_0"}]; the keywords are the evaluation's (eval_text=, ctx=).
def compress_chain(
    model: Union[Model, PathLike],
    pipeline: Sequence[dict[str, Any]],
    *,
    out: Optional[PathLike] = None,
    overwrite: bool = False,
    dense: bool = False,
    progress: Progress = None,
    **kwargs: Any,
) -> Chain: ...
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
) -> Sweep: ...
def sweep_iter(
    model: Union[Model, PathLike],
    method: str,
    grid: dict[str, Sequence[Any]],
    *,
    progress: Progress = None,
    **fields: Any,
) -> Iterator[Run]: ...
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
