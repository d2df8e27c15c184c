"""Review: the owner approves or rejects proposed memories, confirms flagged ones, and sees what needs attention."""
