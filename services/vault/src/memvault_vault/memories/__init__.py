"""Memories: writing them (with the duplicate check), and their lifecycle: supersede, invalidate, forget, history."""
