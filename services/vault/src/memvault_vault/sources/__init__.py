"""Tracked sources: a memory linked to the file or URL it came from, checked on a schedule; exact JSON
values in auto mode supersede the memory, every other change waits as a pending change for review."""
