"""The conversation archive: whole conversations with immutable revisions, and ChatGPT exports kept
byte for byte and imported as a job in checkpoints."""
