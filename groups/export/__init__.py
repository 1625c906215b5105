"""A room's history taken away: an agent's 1:1 conversation, or every thread of a group, read
in pages (history) and written as JSON or Markdown (documents) under a size cap (records)."""
