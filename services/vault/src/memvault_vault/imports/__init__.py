"""Imports: many memories written as one batch, listed, and undone as a whole."""
