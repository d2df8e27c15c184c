"""Generated archived conversations for the archive search benchmark (deterministic for a seed).

Words come from the bundled model's own WordPiece vocabulary (about 20,000 whole English words, in
roughly the order of their frequency in the text the model was trained on), drawn with a Zipf law so a
few words are in a large share of the messages and most are rare, as in real chats. Each conversation
has a topic (80 words it keeps coming back to); a message is 1 to 14 sentences (assistants' longer),
each of 4 to 22 words of which about 40 % are function words ("the", "and", "is", ...)."""

from __future__ import annotations

import json

import numpy as np

FUNCTION_WORDS_IN_VOCAB = 120
"""The first words of the vocabulary are function words; they fill sentences (and are English stop words)."""


def vocabulary() -> list[str]:
    from memvault_indexer.embedder import bundled_tokenizer_path

    vocab: dict[str, int] = json.loads(bundled_tokenizer_path().read_text())["model"]["vocab"]
    words = [w for w, _ in sorted(vocab.items(), key=lambda item: item[1]) if w.isalpha() and w.isascii()]
    # Single letters and two-letter pieces are mostly not words of their own.
    return [w for w in words if len(w) >= 3 or w in ("a", "i", "is", "it", "to", "of", "in", "on", "we", "be")]


class Generator:
    def __init__(self, seed: int = 16) -> None:
        self.words = vocabulary()
        self.rng = np.random.default_rng(seed)
        self.function = np.arange(min(FUNCTION_WORDS_IN_VOCAB, len(self.words)))
        self.content = np.arange(FUNCTION_WORDS_IN_VOCAB, len(self.words))
        ranks = np.arange(1, len(self.content) + 1, dtype=np.float64)
        zipf = 1.0 / (ranks + 20) ** 1.05
        self.content_p = zipf / zipf.sum()
        self.content_cdf = np.cumsum(self.content_p)

    def _zipf(self, n: int) -> np.ndarray:
        picked = np.searchsorted(self.content_cdf, self.rng.random(n) * self.content_cdf[-1])
        return self.content[np.minimum(picked, len(self.content) - 1)]

    def topic(self) -> np.ndarray:
        # Half everyday words, half the subject's own (rarer) words; the title is made of the latter.
        own = self.rng.choice(self.content[300:15000], size=40, replace=False)
        return np.concatenate([own, np.unique(self._zipf(60))[:40]])

    def title(self, topic: np.ndarray) -> str:
        return " ".join(self.words[i] for i in topic[:3]).capitalize()

    def message(self, topic: np.ndarray, role: str) -> str:
        rng = self.rng
        sentences = int(rng.integers(1, 4)) if role == "user" else int(min(14, max(1, rng.lognormal(1.2, 0.7))))
        lengths = rng.integers(4, 23, size=sentences)
        n = int(lengths.sum())
        kind = rng.random(n)
        words = np.where(
            kind < 0.4,
            rng.choice(self.function, size=n),
            np.where(
                kind < 0.7,
                rng.choice(topic, size=n),
                self._zipf(n),
            ),
        )
        out: list[str] = []
        start = 0
        for length in lengths:
            part = [self.words[i] for i in words[start : start + int(length)]]
            start += int(length)
            out.append(" ".join(part).capitalize() + ".")
        return " ".join(out)

    def conversation_sizes(self, conversations: int, messages: int) -> list[int]:
        """Messages per conversation: log-normal (many short chats, some long), summing to `messages`."""
        raw = self.rng.lognormal(3.4, 0.9, size=conversations)
        sizes = np.maximum(2, np.round(raw / raw.sum() * messages)).astype(int)
        diff = messages - int(sizes.sum())
        order = np.argsort(-sizes)
        i = 0
        while diff != 0:
            j = order[i % len(order)]
            step = 1 if diff > 0 else -1
            if sizes[j] + step >= 2:
                sizes[j] += step
                diff -= step
            i += 1
        return [int(s) for s in sizes]

    def queries(self, count: int) -> dict[str, list[str]]:
        """Distinct queries of four kinds (distinct so the indexer's query embedding cache never helps)."""
        rng = self.rng
        common = [self.words[i] for i in self.content[:count]]
        # Drawn by the seed from a band of rare words, so another seed asks words no earlier run read.
        rare = [self.words[int(i)] for i in rng.choice(self.content[6000:8000], size=count, replace=False)]
        words = lambda lo, hi, k: [self.words[int(i)] for i in rng.choice(self.content[lo:hi], size=k, replace=False)]  # noqa: E731
        mixed = [" ".join(words(0, 300, 1) + words(300, 3000, 1) + words(3000, 15000, 1)) for _ in range(count)]
        questions = [
            f"what did we decide about the {a} {b} and {c}?" for a, b, c in (words(0, 8000, 3) for _ in range(count))
        ]
        return {"common word": common, "rare word": rare, "three words": mixed, "question": questions}
