"""Plain dataclasses and rules: no SQL, no protobuf, no HTTP."""
