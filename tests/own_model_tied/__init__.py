"""A team's own models with shared tensors (tied GPT-2 embeddings), trained by their own loops (issue 33 item 4)."""
