"""Recall: full-text and vector search of a vault, fused and ranked, one page at a time."""
